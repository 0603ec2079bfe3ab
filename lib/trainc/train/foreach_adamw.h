// defines: ForeachAdamW — LibTorch's AdamW with a multi-tensor update; adamw_state, closure_loss
//
// The same arithmetic, options and per-parameter state as torch::optim::AdamW (so checkpoints
// and resumes are interchangeable), but each group is updated with ATen's _foreach_* ops: on a GPU
// a handful of multi-tensor kernels per step instead of about ten kernels per parameter tensor,
// which is what torch.optim.AdamW's foreach path does for Hugging Face's adamw_torch.
#pragma once

#include <torch/optim/adamw.h>

#include "trainc/compat/torch_compat.h"

namespace trainc {

// An optimizer step's closure evaluated with gradients on, as LibTorch's optimizers do; undefined without one.
inline torch::Tensor closure_loss(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

// The AdamW state of `parameter` in an optimizer's state map, created on first use (step 0, zero
// moments in the parameter's layout) exactly as torch::optim::AdamW creates it.
template <typename StateMap>
torch::optim::AdamWParamState& adamw_state(StateMap& states, const at::Tensor& parameter) {
  const auto key = optimizer_state_key(parameter);
  auto found = states.find(key);
  if (found == states.end()) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(0);
    state->exp_avg(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    state->exp_avg_sq(at::zeros_like(parameter, at::MemoryFormat::Preserve));
    found = states.emplace(key, std::move(state)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*found->second);
}

class ForeachAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace trainc
