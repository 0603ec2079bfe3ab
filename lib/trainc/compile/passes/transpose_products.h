// defines: transpose_products
//
// Contract: the transpose of a matrix product nothing else reads becomes the product of the
// transposes, swapped, so the result is made in the layout it is read in. A linear layer's weight
// gradient is the common case: autodiff produces grad(W^T) = x^T g and transposes it, which left
// the gradient as a transposed view that had to be copied before the optimizer could use it. A
// cast between the product and its transpose (autocast: a bf16 product, a float32 gradient) is
// moved past the transpose, so the cast's kernel writes the gradient in its own layout.
// Example: permute(matmul(a, b), {1, 0})   becomes   matmul(permute(b, {1, 0}), permute(a, {1, 0}))
//          permute(cast(matmul(a, b)), {1, 0})   becomes   cast(matmul(permute(b, {1, 0}), permute(a, {1, 0})))
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph transpose_products(const Graph& graph);

}  // namespace trainc::ir
