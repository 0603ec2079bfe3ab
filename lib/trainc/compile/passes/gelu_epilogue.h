// defines: gelu_epilogue
//
// Contract: in a joint graph, a bf16 or f16 linear layer followed by GELU's tanh approximation (as
// the import decomposes it: the product cast to float32, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))), cast back) becomes one GEMM whose epilogue applies the GELU (cuBLASLt's
// GELU_AUX_BIAS): it writes the activation and, beside it, the product plus bias that GELU's
// backward reads, so no kernel reads the product again to make the activation (GPT-2: 100 MB read
// and written a layer). The IR has one tensor per value, so the op's value holds both:
//   y = matmul_bias(x, w, b)                 becomes   p = matmul_bias_gelu(x, w, b)   [2, ...y]
//   h = cast(gelu_tanh(cast(y, f32)), bf16)            h = reshape(slice(p, 0, 0, 1)), y = reshape(slice(p, 0, 1, 2))
// Every reader of y (the backward's GELU derivative) and of h reads the slices. The epilogue
// applies GELU to the float32 sum before it is rounded, where the decomposition applies it to the
// rounded sum: the activation can differ from eager's by one bf16 rounding. The planner runs the
// pass for steps on a GPU where cuBLASLt is loaded (switch gelu_epilogue), for layers whose
// widths are multiples of 8 (the epilogue's 16-byte rows).
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph gelu_epilogue(const Graph& graph);

}  // namespace trainc::ir
