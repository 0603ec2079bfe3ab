// defines: gelu_grad_epilogue
//
// Contract: in a joint graph, GELU's backward under a linear layer with a bias (the tanh
// approximation, as autodiff differentiates the import's decomposition) becomes the epilogue of
// the GEMM that makes the GELU's incoming gradient (cuBLASLt's DGELU_BGRAD): that GEMM multiplies
// by GELU's derivative at the kept pre-activation and sums the result's columns, the layer's bias
// gradient, so no kernel reads the product again (GPT-2: 200 MB read and 100 MB written a layer).
// The IR has one tensor per value, so the op's value holds both:
//   d = matmul(a, w)                              becomes   p = matmul_gelu_grad(a, w, y)   [rows + 1, n]
//   dy = cast(f(cast(d, f32), cast(y, f32)), bf16)          dy = reshape(slice(p, 0, 0, rows))
//   db = sum(dy) over all but the last dimension            db = reshape(slice(p, 0, rows, rows + 1))
// where f is any pointwise expression computing g * gelu'(x) (checked by evaluating it at sample
// points, so autodiff's order of operations does not matter), d is read only by f, and y is the
// bf16 or f16 pre-activation (matmul_bias_gelu's kept half after passes/gelu_epilogue). The
// epilogue multiplies the float32 product before rounding it, where the decomposition rounds the
// product first: dy can differ from eager's by one bf16 rounding. The planner runs the pass for
// steps on a GPU where cuBLASLt is loaded (switch gelu_grad_epilogue), for widths that are
// multiples of 8 (the epilogue's 16-byte rows).
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph gelu_grad_epilogue(const Graph& graph);

}  // namespace trainc::ir
