#include "trainc/train/optimizer.h"

#include <torch/optim/sgd.h>

#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/foreach_adamw.h"
#include "trainc/train/grad_clip.h"

namespace trainc {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingArguments& args, Model& model, bool capturable) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (!parameter.requires_grad()) continue;
    (parameter.dim() >= 2 ? decay : no_decay).push_back(parameter);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (args.optim == "sgd") {
    auto options = [&](double weight_decay) {
      return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(args.learning_rate).weight_decay(weight_decay));
    };
    if (!decay.empty()) groups.emplace_back(decay, options(args.weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
    if (capturable) return std::make_unique<CapturableSGD>(groups, torch::optim::SGDOptions(args.learning_rate));
    return std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(args.learning_rate));
  }
  // adamw_torch: the multi-tensor (foreach) AdamW; adamw_torch_fused: the fused kernel on a GPU
  // (foreach elsewhere). A whole-step CUDA graph always takes the capturable one (fused on a GPU).
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(args.learning_rate)
                                                            .betas({args.adam_beta1, args.adam_beta2})
                                                            .eps(args.adam_epsilon)
                                                            .weight_decay(weight_decay));
  };
  if (!decay.empty()) groups.emplace_back(decay, options(args.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
  if (capturable) return std::make_unique<CapturableAdamW>(groups, torch::optim::AdamWOptions(args.learning_rate));
  return std::make_unique<ForeachAdamW>(groups, torch::optim::AdamWOptions(args.learning_rate), args.optim == "adamw_torch_fused");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate) {
  if (auto* on_device = dynamic_cast<DeviceStateOptimizer*>(&optimizer)) {
    on_device->set_device_learning_rate(learning_rate);
    return;
  }
  record_learning_rate(optimizer, learning_rate);
}

void record_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(learning_rate);
}

torch::Tensor clipped_step(torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& parameters, double max_grad_norm) {
  if (auto* adamw = dynamic_cast<CapturableAdamW*>(&optimizer); adamw != nullptr && max_grad_norm > 0) {
    const GradNorm measured = grad_norm(parameters, max_grad_norm);
    adamw->scale_gradients_in_next_step(measured.clip_coefficient);
    optimizer.step();
    return measured.norm;
  }
  const torch::Tensor norm = clip_grad_norm(parameters, max_grad_norm);
  optimizer.step();
  return norm;
}

}  // namespace trainc
