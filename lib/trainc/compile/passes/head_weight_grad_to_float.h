// defines: head_weight_grad_to_float
//
// Contract: a head's weight gradient made on its own (linear_cross_entropy_grad_from_dlogits
// {ints=[1]}, passes/head_gradients_apart) whose only use, through a chain of slices and reshapes
// read once each, is the base of an embedding_grad_add (a tied embedding's table gradient,
// passes/embedding_grad_add, which widens its base into a new float32 table) becomes the float32
// weight gradient ({ints=[2]}): the GEMM stores its float32 accumulator, as products_to_float does
// for a cast matmul, and the embedding's rows are added into that buffer in place ({ints=[V, 1]}).
// For the small GPT on an H200: a 22 us widening off the end of the backward, for 6 us more of the
// GEMM on the second stream. The result is the product before rounding, within one bf16 rounding
// of eager's (as products_to_float's). An untied head's cast stays: without the scatter to take
// the float32 rows in place, the gradient would be a view of the padded buffer, which the step
// copies out as a parameter's .grad (runtime/compiled_step), costing as much as the cast.
// Example: hw = linear_cross_entropy_grad_from_dlogits(p, x, w, g) {ints=[1]}   bf16 [P*C]
//          t = reshape(slice(hw, 0, V*C)) [V, C]; e = embedding_grad_add(t, d, i) {ints=[V]}
//   becomes hw = linear_cross_entropy_grad_from_dlogits(p, x, w, g) {ints=[2]}   f32 [P*C]
//          t = reshape(slice(hw, 0, V*C)) [V, C]; e = embedding_grad_add(t, d, i) {ints=[V, 1]}
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph head_weight_grad_to_float(const Graph& graph);

}  // namespace trainc::ir
