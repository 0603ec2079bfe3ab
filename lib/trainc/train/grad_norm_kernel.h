// defines: grad_norm_kernel_takes, grad_norm_kernel
//
// The gradients' global 2-norm and gradient clipping's coefficient, min(1, max_norm / (norm + 1e-6)),
// on a GPU by trainc's own kernels (CUDA source compiled once per process with NVRTC,
// compile/runtime/cuda_modules): one launch per 128 gradients (the small GPT's 52 in one), each block writing the float32 sum of
// the squares of one chunk of one gradient, then one block adding those sums in a fixed order (so
// the result does not depend on how blocks were scheduled) and writing the norm and the
// coefficient. ATen's way (a multi-tensor norm of each gradient, a stack, the norm of the norms,
// then the coefficient's four kernels) is ten launches, about 45 us of the small GPT's 1.3 ms step
// (docs/benchmarks.md). A NaN or infinite gradient gives a NaN or infinite norm, and the coefficient
// ATen's arithmetic gives it (NaN, or 0).
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// Whether the kernels take these gradients: CUDA, float32, contiguous, 16-byte aligned, one device.
bool grad_norm_kernel_takes(at::TensorList grads);

// The norm and the coefficient, 0-dim float32 tensors on the gradients' device. grads not empty.
struct NormAndCoefficient {
  at::Tensor norm, coefficient;
};
NormAndCoefficient grad_norm_kernel(at::TensorList grads, double max_norm);

}  // namespace trainc
