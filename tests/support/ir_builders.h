// defines: f32, bf16, ints, scalar — shorthands for building small IR graphs in tests
#pragma once

#include <utility>
#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::test {

inline ir::TensorType f32(std::vector<int64_t> shape) { return {ir::DType::f32, std::move(shape)}; }
inline ir::TensorType bf16(std::vector<int64_t> shape) { return {ir::DType::bf16, std::move(shape)}; }

// Attributes holding `values` (axes, a shape, a permutation) and keepdim.
inline ir::Attributes ints(std::vector<int64_t> values, bool keepdim = false) {
  ir::Attributes attrs;
  attrs.ints = std::move(values);
  attrs.keepdim = keepdim;
  return attrs;
}

// Attributes holding a scalar (a constant's value).
inline ir::Attributes scalar(double value) {
  ir::Attributes attrs;
  attrs.scalar = value;
  return attrs;
}

}  // namespace trainc::test
