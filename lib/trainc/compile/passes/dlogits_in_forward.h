// defines: dlogits_in_forward
//
// Contract: in a joint graph, a language-model head whose loss is differentiated computes, in the
// forward, each row's gradient of its own loss over the logits while the logits are at hand, and
// keeps it for the backward instead of the logits (runtime/linear_cross_entropy). The backward then
// runs two GEMMs where it ran three: it no longer computes the logits again. What lives between the
// forward and the head's backward is the size of the logits the backward made before (rows times
// the vocabulary, in x's dtype) and the weight padded for the GEMMs (a vocabulary's worth of rows),
// and the forward's cross-entropy pass becomes the backward's (the same two passes over the row),
// so the step loses one pass over the logits as well.
// A head differentiates to linear_cross_entropy_grad(x, weight, targets, grad); with the pass,
//   linear_cross_entropy(x, weight, targets)                 becomes
//     packed = linear_cross_entropy_and_dlogits(x, weight, targets)
//     losses = bitcast(slice(packed, 0, the losses' elements), loss dtype)
//   linear_cross_entropy_grad(x, weight, targets, grad)      becomes
//     linear_cross_entropy_grad_from_dlogits(packed, x, weight, grad)
// Heads without a gradient, and layouts the losses do not fit (float32 losses over an odd number
// of float64 rows), are left as they are.
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph dlogits_in_forward(const Graph& graph);

}  // namespace trainc::ir
