// defines: StridedAccess, contiguous_strides, view_strides, broadcast_access, strided_accesses
//
// How a value's elements sit in memory, for the values a generated kernel reads: a base value
// (one that owns contiguous memory: a graph input, a kernel's or an ATen call's result) and, per
// dimension of the value, a stride over the base, plus an offset. Views (permute, expand, slice and
// most reshapes) compose into one such access, so a kernel reads a transposed or broadcast tensor
// in place instead of copying it first. A reshape no strides can express (merging dimensions a
// permute separated) is its own base: ATen copies it, as at::reshape would.
// Example: x: f32[4, 6] contiguous; permute(x, {1, 0}) is {base x, strides {1, 6}, offset 0}.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::codegen {

struct StridedAccess {
  ir::ValueId base = -1;
  std::vector<int64_t> strides;  // one per dimension of the value read
  int64_t offset = 0;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// The strides of `new_shape` viewing memory laid out as (`shape`, `strides`), as ATen's view()
// computes them; nullopt when no strides can (the reshape must copy).
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& new_shape);

// `access` (of a value shaped `shape`) read as if broadcast to `target`: new leading dimensions and
// size-1 dimensions that grow get stride 0.
StridedAccess broadcast_access(const StridedAccess& access, const std::vector<int64_t>& shape, const std::vector<int64_t>& target);

// One access per value of `graph`: non-views are their own base; views compose over their input.
std::vector<StridedAccess> strided_accesses(const ir::Graph& graph);

}  // namespace trainc::codegen
