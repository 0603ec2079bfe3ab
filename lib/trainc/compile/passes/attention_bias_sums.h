// defines: attention_bias_sums
//
// Contract: a fused q-k-v projection's bias gradient is the column sums of its output's gradient,
// which attention's backward makes as dq, dk and dv stacked; a sum of that stack over its B * T
// rows and the backward become one op, attention_grad_and_bias_sums, whose GPU kernel sums the
// columns as it writes the stack (runtime/column_sums) instead of reading the stack again. The
// stack keeps its [B, T, 3, H, D] memory, so the projection's GEMMs read it as before.
// Matched: sum_to_float(concat(r0, r1, r2), {0, 1}) over [B, T, 3 * H * D], where r_i is
// reshape(permute(reshape(slice(g, part i)), {0, 2, 1, 3}), [B, T, H * D]) of one
// g = attention_grad_from_lse (the views the q-k-v split's gradient makes, after
// slice_grads_to_concat and sums_of_widened).
// Example: g = attention_grad_from_lse(q, k, v, o, lse, dy)    becomes  p = attention_grad_and_bias_sums(q, k, v, o, lse, dy)
//                                                                       g = permute(reshape(slice(p)))  [3, B, H, T, D]
//          s = sum_to_float(concat(r0, r1, r2), {0, 1})                 s = bitcast(slice(p), f32)       [3 * H * D]
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph attention_bias_sums(const Graph& graph);

}  // namespace trainc::ir
