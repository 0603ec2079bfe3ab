// defines: embedding_grad_add
//
// Contract: an embedding's float32 (or float64) gradient that is only added to another value of
// its type (a language model's tied token embedding and head: the head's gradient of the same
// table) becomes one op that adds its rows into a copy of that value:
// embedding_grad_add(base, grad, indices). The copy is the base widened to the
// gradient's dtype where the base was a cast read only by the add, so the cast is not a kernel of
// its own. On a GPU the rows go in with atomic adds (runtime/embedding_grad_add), where ATen's
// embedding backward sorts the indices, zeroes a table and sums it in (GPT-2, 50,257 x 768 in
// float32: about 0.45 ms of sorting, filling and adding a step, against one widening copy and one
// scatter). The sum's order differs from the sort's, within float32 rounding.
// Matched: add(a, embedding_grad(g, i)) or add(embedding_grad(g, i), a) of dtype f32 or f64, the
// embedding_grad read only by the add and a of the add's type; a = cast(b) read only by the add
// gives base b. Run after products_to_float, so a GEMM's product widened by a cast is already
// the GEMM's float32 output, not a bf16 base to widen again.
// Example: w = cast(h: bf16 [V, D], f32)          becomes   s = embedding_grad_add(h, g, i) {ints=[V]}
//          e = embedding_grad(g, i) {ints=[V]}
//          s = add(w, e)
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph embedding_grad_add(const Graph& graph);

}  // namespace trainc::ir
