// defines: checkpointed — activation (gradient) checkpointing for one function of one tensor
//
// checkpointed(f, x) returns f(x) without keeping f's intermediate activations; the backward pass
// runs f again with gradients on, then back-propagates through that recomputation. Like PyTorch's
// reentrant torch.utils.checkpoint: parameters used inside f receive their gradients directly
// (they are leaves), the RNG state of the input's device is replayed so dropout masks match, and the autocast state of
// the forward pass is restored for the recomputation.
#pragma once

#include <torch/types.h>

#include <functional>

namespace trainc {

using TensorFunction = std::function<torch::Tensor(const torch::Tensor&)>;

// `function` must outlive the backward pass (the model that owns it does).
torch::Tensor checkpointed(const TensorFunction* function, const torch::Tensor& input);

}  // namespace trainc
