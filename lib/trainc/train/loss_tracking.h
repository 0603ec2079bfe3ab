// defines: track_step_loss
//
// What the training loop keeps of each step's loss, on the loss's device so that no step waits for
// the host: the sums since the last log and over the run (float64), and the first step whose loss
// was not finite (-1 until one is). On a GPU one kernel (CUDA source compiled once per process with
// NVRTC, compile/runtime/cuda_modules) updates all three from a float32 loss: the ten ATen kernels it
// replaces (isfinite's four, the step's selection and its operands, two sums), each a launch outside
// the step's CUDA graph, took about 20 us of a 1.4 ms step (docs/benchmarks.md). Elsewhere, and for
// other dtypes, the same with ATen's ops. Every tensor is written in place, so a CUDA graph can
// capture the tracking (runtime/step_graphs) with the step read from the device (train/device_step_start).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace trainc {

// Adds `loss` (0-dim) to `since_log` and `total` (0-dim float64) and, when the loss is NaN or
// infinite and `first_nonfinite` (0-dim int64) is still -1, sets it to `step`.
void track_step_loss(const at::Tensor& loss, int64_t step, at::Tensor& since_log, at::Tensor& total, at::Tensor& first_nonfinite);

// The same with the step read on the device: `step`, a 0-dim int64 tensor on the loss's device.
void track_step_loss(const at::Tensor& loss, const at::Tensor& step, at::Tensor& since_log, at::Tensor& total,
                     at::Tensor& first_nonfinite);

}  // namespace trainc
