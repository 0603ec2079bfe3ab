// defines: slice_grads_to_concat
//
// Contract: a sum of slice_backward values that tile a dimension (the gradient of a tensor split
// into pieces, like a fused q/k/v projection) becomes one concat of the pieces' gradients, instead
// of a zero-filled tensor per piece and an add per piece. Sums that leave gaps are unchanged.
// Example: add(add(slice_backward(a, d, 0, 4), slice_backward(b, d, 4, 8)), slice_backward(c, d, 8, 12))
//          over a size-12 dimension becomes concat(a, b, c; d).
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph slice_grads_to_concat(const Graph& graph);

}  // namespace trainc::ir
