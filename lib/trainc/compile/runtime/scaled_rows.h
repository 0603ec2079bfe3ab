// defines: scale_rows_into, scale_rows_kernel_takes
//
// Each row of a matrix times its own float32 factor, rounded once to the output's dtype: the
// language-model head's backward scales x and x's gradient by each row's loss gradient this way
// (runtime/linear_cross_entropy). ATen's mul of a bf16 matrix by a broadcast float32 column takes
// its unvectorized path (GPT-2's two such calls: 0.113 ms a step for 100 MB); on a GPU, contiguous
// bf16 rows whose width is a multiple of 8 go through one vectorized kernel instead (16 bytes a
// load), compiled once per process with NVRTC (runtime/cuda_modules). Both round float(x) * s to
// bf16, so the results are equal.
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// out[r, :] = rows[r, :] * scale[r] for rows [N, C], scale float32 [N], out of rows' shape and
// dtype (it may be `rows` itself).
void scale_rows_into(at::Tensor& out, const at::Tensor& rows, const at::Tensor& scale);

// Whether scale_rows_into runs the kernel for these (else ATen's mul): CUDA, all on one device,
// bf16 rows and output contiguous and 16-byte aligned, a width of whole 16-byte groups, a float32
// factor per row.
bool scale_rows_kernel_takes(const at::Tensor& out, const at::Tensor& rows, const at::Tensor& scale);

}  // namespace trainc
