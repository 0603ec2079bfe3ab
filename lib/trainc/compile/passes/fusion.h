// defines: FusedKernel, ScheduleStep, Schedule, KernelRole, schedule_kernels, trailing_split, leading_split
//
// Contract: groups the nodes of a program into fused kernels and orders them with the ATen calls
// that stay, so that every value is computed before it is read. All rules about what may fuse
// live in this file (fusion.cpp):
//   - pointwise ops (unary, binary, where) of one shape fuse with the producer they read; one that
//     reads no kernel's value (recomputed from saved values) joins the newest step if it is a kernel;
//   - a reduction over trailing dimensions fuses with the pointwise ops that feed it, with other
//     reductions over the same rows (layer norm's mean and variance, softmax's max and sum), and
//     with the pointwise ops that follow, at row level (one value per row) or element level; one
//     over every dimension (a single row, run by one block) joins only up to 16,384 elements;
//   - on a GPU (`column_sums`), a float32 sum over the leading dimensions of an element member, or
//     of a value an element member loads whole, joins that kernel as a column member when those
//     dimensions are the kernel's rows (at least 1024 of them): each block adds up its rows' values
//     per column, and a second, small kernel adds the blocks' sums; nothing in the kernel reads it.
//     A sum met before any kernel loads its value waits for the first kernel that does, and is
//     otherwise an ATen call placed before its first reader, or before the next ATen call once a
//     few steps have passed;
//   - extern ops, random draws, other reductions over leading dimensions, casts of parameters and views
//     into bf16 (fusion.cpp says why) and float16 values stay ATen calls; views, constants and iota are never steps of their own: kernels read them in place.
//   - a node joins a kernel only when all else it reads comes from steps older than the kernel, so
//     steps run in the order they are made and never wait on each other in a cycle.
// Example: y = relu(x @ w + b) becomes [ATen matmul] -> [kernel: add, relu].
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "trainc/compile/codegen/strided_access.h"
#include "trainc/compile/ir/graph.h"

namespace trainc {

// How a member of a kernel is indexed: per element of the domain, once per row, or once per
// column (a sum over the rows of an element member: a bias's or a layer norm's parameter gradient).
enum class KernelRole : uint8_t { element, row, column };

struct FusedKernel {
  std::vector<ir::ValueId> members;  // the nodes computed, in topological order
  std::vector<KernelRole> roles;     // one per member
  std::vector<int64_t> domain;       // the iteration shape
  int reduce_from = 0;               // dimensions [reduce_from, rank) are reduced; rank: no reduction
  // With column members: dimensions [0, column_split) are the rows they sum over, the rest their
  // columns (equal to reduce_from in a kernel with a reduction); 0 without column members.
  int column_split = 0;
  std::vector<ir::ValueId> stores;   // members other steps or the program's outputs read
  bool has_reduction() const { return reduce_from < static_cast<int>(domain.size()); }
};

struct ScheduleStep {
  enum class Kind : uint8_t { kernel, aten } kind;
  int32_t index = 0;  // a kernel's index in Schedule::kernels, or the value an ATen call makes
};

struct Schedule {
  std::vector<FusedKernel> kernels;
  std::vector<ScheduleStep> steps;                // in execution order
  std::vector<codegen::StridedAccess> accesses;   // per value: where its elements are read from
  std::vector<int32_t> kernel_of;                 // per value: its kernel, or -1
  int fused_nodes() const;                        // nodes computed inside kernels
};

// A value no step computes: graph inputs, and views, constants and iota, which ATen makes on
// demand when a step or an output needs the tensor (a kernel reads them in place).
bool is_lazy(const ir::Graph& graph, const Schedule& schedule, ir::ValueId value);

// The first reduced dimension when a reduction's axes are the trailing dimensions of its input;
// nullopt otherwise (reductions over leading dimensions stay ATen calls).
std::optional<int> trailing_split(const ir::Graph& graph, const ir::Node& node);

// The number of leading dimensions a float32 sum (sum or sum_to_float) reduces when its axes are
// exactly the leading ones and it keeps at least one; nullopt otherwise.
std::optional<int> leading_split(const ir::Graph& graph, const ir::Node& node);

// `copies` (optional, per node) marks the copies passes/rematerialize made: a kernel that starts
// with them takes the nodes of the reader kernel they were made for. `column_sums`: sums over
// leading dimensions may join kernels as column members (CUDA programs; the C++ renderer has none).
Schedule schedule_kernels(const ir::Graph& graph, const std::vector<bool>& copies = {}, bool column_sums = false);

}  // namespace trainc
