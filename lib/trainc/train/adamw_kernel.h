// defines: adamw_kernel_takes, adamw_kernel_update
//
// AdamW's update on a GPU by trainc's own multi-tensor kernel (CUDA source compiled once per
// process with NVRTC, compile/runtime/cuda_modules). ATen's fused AdamW, given gradient clipping's
// factor's inverse as its grad_scale, writes every gradient back divided by it (for GradScaler's
// sake): for GPT-2 that is 0.5 GB of stores a step nothing reads, as the gradients are zeroed next.
// This kernel reads each gradient, multiplies it by clipping's factor as it loads it (as clipping
// the gradients first does, and without a launch for the inverse) and leaves it as it is; the rest
// is ATen's arithmetic (ADAMW mode) in float32:
//   g = grad * factor;  p -= lr * wd * p;  m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
//   p -= (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
// where ATen rounds a few products through float64: the results agree to a float32 rounding or two.
// The learning rate, step counts and factor are read on the device, so the update can be captured
// in a CUDA graph. Each launch takes up to 56 tensors, each with its own weight decay (the
// parameter groups of a step share launches: the small GPT's 52 tensors in two groups are one
// launch, where one per group of up to 32 tensors were three, 7 us), passed by value with the
// launch as ATen's multi-tensor kernels pass theirs, so nothing is copied to the device first.
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// Whether the kernel takes these lists: CUDA, float32, contiguous and 16-byte aligned, a moment of
// each parameter's size, one float32 step count per parameter, a float32 learning rate and (when
// defined) a float32 factor on the same device.
bool adamw_kernel_takes(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                        at::TensorList steps, const at::Tensor& learning_rate, const at::Tensor& grad_factor);

// One AdamW step of every parameter (the step counts already advanced), parameter i with weight
// decay weight_decays[i]; the gradients are multiplied by `grad_factor` (0-dim, may be undefined: 1) as
// they are read, not in place. `shadows`, empty or one per parameter: where defined, a contiguous
// bf16 tensor of the parameter's shape the kernel writes the updated parameter into, rounded as
// ATen's cast rounds (runtime/parameter_shadows).
void adamw_kernel_update(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                         at::TensorList steps, const at::Tensor& learning_rate, double beta1, double beta2,
                         at::ArrayRef<double> weight_decays, double eps, const at::Tensor& grad_factor, at::TensorList shadows = {});

}  // namespace trainc
