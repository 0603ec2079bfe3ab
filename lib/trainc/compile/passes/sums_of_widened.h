// defines: sums_of_widened
//
// Contract: a sum over leading dimensions (one the scheduler leaves to ATen) of a bf16 or f16
// value cast to float32 becomes one sum_to_float of the value itself: ATen accumulates the
// low-precision elements in float32 as it reads them, exactly as it sums the cast. The float32
// copy then need not be stored for the sum: the kernel that made the cast stores it only if
// something else still reads it. A layer norm's bias gradient is the common case (its kernel
// stored the float32 gradient, twice the bytes of the bf16 one, only for this sum).
// The same for a float32 cast of such a sum that nothing else reads (a bias gradient under
// autocast: the bias is cast to bf16 for its GEMM, so its gradient is summed in bf16 and widened):
// the float32 sum, not rounded to bf16 first, and no kernel launched for the cast.
// Example: sum(cast(x: bf16 [16, 1024, 768], f32), {0, 1})   becomes   sum_to_float(x, {0, 1})
//          cast(sum(x, {0, 1}), f32)                          becomes   sum_to_float(x, {0, 1})
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph sums_of_widened(const Graph& graph);

}  // namespace trainc::ir
