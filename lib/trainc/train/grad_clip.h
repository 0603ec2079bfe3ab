// defines: clip_grad_norm, GradNorm, grad_norm — global-norm gradient clipping that stays on the device
//
// Like torch.nn.utils.clip_grad_norm_: scales every gradient by min(1, max_norm / (norm + 1e-6))
// and returns the total norm before clipping, but as a 0-dim tensor on the gradients' device, so
// the training step never waits for the GPU. (LibTorch's C++ clip_grad_norm_ returns a double,
// which is a host synchronization every step.)
#pragma once

#include <torch/types.h>

#include <vector>

namespace trainc {

// max_norm <= 0 measures the norm without clipping.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

// The total norm and the factor clipping scales every gradient by, min(1, max_norm / (norm +
// 1e-6)), both 0-dim device tensors, without scaling anything: for an optimizer that applies the
// factor inside its own update (CapturableAdamW::scale_gradients_in_next_step), which saves a read
// of every gradient and the launches of a pass of its own. max_norm > 0.
struct GradNorm {
  torch::Tensor norm, clip_coefficient;
};
GradNorm grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace trainc
