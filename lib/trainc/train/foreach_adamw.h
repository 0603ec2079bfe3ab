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

// With `fused` (optim adamw_torch_fused), parameters on a GPU are updated by ATen's fused AdamW
// kernel, as torch.optim.AdamW(fused=True) does: one pass over parameters, gradients and moments
// where the foreach path makes eight (LibTorch 2.x; elsewhere the foreach path runs).
class ForeachAdamW : public torch::optim::AdamW {
 public:
  ForeachAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups, torch::optim::AdamWOptions defaults, bool fused = false)
      : torch::optim::AdamW(groups, std::move(defaults)), fused_(fused) {}
  ForeachAdamW(std::vector<torch::Tensor> params, torch::optim::AdamWOptions defaults, bool fused = false)
      : torch::optim::AdamW(std::move(params), std::move(defaults)), fused_(fused) {}
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  bool fused_;
};

}  // namespace trainc
