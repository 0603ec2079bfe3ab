// defines: head_gradients_apart
//
// Contract: a head's backward that makes x's and the weight's gradients in one step
// (linear_cross_entropy_grad_from_dlogits) becomes two steps, one for each, when the only readers
// of its flat result are slices within one of the two: the rest of the backward waits for x's
// gradient only, and the weight's (a GEMM as large as x's) can then run beside it on a second
// stream (passes/stream_plan). Each slice reads the same elements of its own part.
// Example: h = linear_cross_entropy_grad_from_dlogits(p, x, w, g)          [N*C + P*C]
//          dx = slice(h, 0, N*C); dw = slice(h, N*C, N*C + V*C)
//   becomes hx = linear_cross_entropy_grad_from_dlogits(p, x, w, g) {ints=[0]}   [N*C]
//           hw = linear_cross_entropy_grad_from_dlogits(p, x, w, g) {ints=[1]}   [P*C]
//           dx = slice(hx, 0, N*C); dw = slice(hw, 0, V*C)
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph head_gradients_apart(const Graph& graph);

}  // namespace trainc::ir
