// defines: products_to_float
//
// Contract: a float32 cast of a bf16 or f16 matrix product that nothing else reads becomes one
// matmul_to_float: on a GPU the GEMM stores its float32 accumulator instead of rounding it to bf16
// for a kernel to widen again. Under autocast every linear layer's weight gradient is such a
// product (the gradient lives in the float32 parameter's dtype): GPT-2 cast 48 of them a step.
// The result is the product before rounding, so it is closer to the float64 product than eager's
// (within one bf16 rounding of it, inside the numerics contract's bf16 tolerance).
// Example: cast(matmul(g: bf16 [768, 16384], x: bf16 [16384, 3072]), f32)
//          becomes matmul_to_float(g, x): f32 [768, 3072]
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph products_to_float(const Graph& graph);

}  // namespace trainc::ir
