// defines: gelu_grad_epilogue
//
// Contract: in a joint graph, GELU's backward (the tanh approximation, as autodiff differentiates
// the import's decomposition) becomes the epilogue of the GEMM that makes the GELU's incoming
// gradient (cuBLASLt's DGELU): that GEMM multiplies its product by GELU's derivative at the kept
// pre-activation, so no kernel reads the product again (GPT-2: 100 MB written and read a layer):
//   d = matmul(a, w)                                  becomes   dy = matmul_gelu_grad(a, w, y)
//   dy = cast(f(cast(d, f32), cast(y, f32)), bf16)
// where f is any pointwise expression computing g * gelu'(x) (checked by evaluating it at sample
// points, so autodiff's order of operations does not matter), d is read only by f, and y is the
// bf16 or f16 pre-activation (matmul_bias_gelu's kept half after passes/gelu_epilogue). The layer's
// bias gradient stays a sum over dy: cuBLASLt's DGELU_BGRAD, which would make it too, ran a
// separate epilogue kernel costing 0.32 ms where the GEMM takes 0.11 on GPT-2's layer.
// The epilogue multiplies the float32 product before rounding it, where the decomposition rounds
// the product first: dy can differ from eager's by one bf16 rounding. The planner runs the pass for
// steps on a GPU where cuBLASLt is loaded (switch gelu_grad_epilogue), for widths that are
// multiples of 8 (the epilogue's 16-byte rows).
// `small_layer`, where given: a product whose layer it calls small is left alone, asked of the
// product's first operand a (the gradient coming into the MLP's second linear layer) viewed as
// [rows, width], rows its leading dimensions (the planner asks runtime/side_product_sms' rule).
// There cuBLASLt ran DGELU with an sm_80 kernel slower than the plain product, and the generated
// kernel that applies the derivative instead also sums the bias gradient as it reads dy, where
// after the epilogue that sum is two launches on the backward's second stream (docs/compile.md).
#pragma once

#include <cstdint>
#include <functional>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

using SmallLayer = std::function<bool(int64_t rows, int64_t width)>;

Graph gelu_grad_epilogue(const Graph& graph, const SmallLayer& small_layer = {});

}  // namespace trainc::ir
