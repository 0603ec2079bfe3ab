#include "trainc/train/capturable_optimizer.h"

#include <ATen/ATen.h>

#include <string>

#include "trainc/common/error.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/runtime/parameter_shadows.h"
#include "trainc/train/adamw_kernel.h"
#include "trainc/train/foreach_adamw.h"

namespace trainc {
namespace {

// The learning-rate tensor on the parameters' device, created on first use (the device is known by then).
at::Tensor& learning_rate_tensor(at::Tensor& tensor, const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  if (!tensor.defined()) {
    TRAINC_CHECK(!groups.empty() && !groups.front().params().empty(), "an optimizer without parameters");
    tensor = at::empty({}, groups.front().params().front().options().dtype(at::kFloat));
  }
  return tensor;
}

void write_learning_rate(at::Tensor& tensor, double learning_rate, std::vector<torch::optim::OptimizerParamGroup>& groups) {
  for (auto& group : groups) group.options().set_lr(learning_rate);  // what a checkpoint records
  learning_rate_tensor(tensor, groups).fill_(learning_rate);
}

}  // namespace

CapturableAdamW::CapturableAdamW(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamWOptions defaults)
    : torch::optim::AdamW(std::move(groups), std::move(defaults)) {
  // bf16 shadows that trainc's kernel keeps with the parameters, for the programs' casts.
  if (!adamw_kernel_ || !shadows_) return;
  std::vector<at::Tensor> parameters;
  for (const auto& group : param_groups()) {
    for (const auto& p : group.params()) {
      if (p.is_cuda() && p.scalar_type() == at::kFloat) parameters.push_back(p);
    }
  }
  ParameterShadows::instance().track(parameters);
}

void CapturableAdamW::set_device_learning_rate(double learning_rate) {
  write_learning_rate(learning_rate_, learning_rate, param_groups());
}

at::Tensor CapturableAdamW::device_learning_rate() { return learning_rate_tensor(learning_rate_, param_groups()); }

std::vector<at::Tensor> CapturableAdamW::step_counts_advanced_before_next_step(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> counts;
  std::set<const void*> advanced;
  for (const at::Tensor& p : params) {
    const auto step = steps_.find(p.unsafeGetTensorImpl());
    TRAINC_CHECK(step != steps_.end(), "CapturableAdamW: a step count asked for before its parameter's first step");
    counts.push_back(step->second);
    advanced.insert(p.unsafeGetTensorImpl());
  }
  advanced_ = std::move(advanced);
  return counts;
}

torch::Tensor CapturableAdamW::step(LossClosure closure) {
  const at::Tensor coefficient = std::move(coefficient_);  // this step's only, whatever happens to it
  coefficient_ = at::Tensor();
  const std::optional<std::set<const void*>> advanced = std::move(advanced_);
  advanced_.reset();
  TRAINC_CHECK(learning_rate_.defined(), "CapturableAdamW::step before set_device_learning_rate");
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = closure_loss(closure);
  // trainc's kernel multiplies each gradient by the coefficient; ATen's fused AdamW divides by its
  // inverse, made only for it.
  const at::Tensor grad_factor = coefficient.defined() ? coefficient.to(at::kFloat) : at::Tensor();
  // Each group's tensors that have gradients, and all of them for trainc's kernel, which takes a
  // weight decay per parameter: one launch for every group where their betas and eps agree.
  struct GroupTensors {
    const torch::optim::AdamWOptions* options;
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  };
  std::vector<GroupTensors> groups;
  GroupTensors all{nullptr, {}, {}, {}, {}, {}};
  std::vector<double> weight_decays;
  bool one_launch = adamw_kernel_;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    TRAINC_CHECK(!options.amsgrad(), "CapturableAdamW does not implement amsgrad");
    GroupTensors tensors{&options, {}, {}, {}, {}, {}};
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = adamw_state(state_, p);
      at::Tensor& step = steps_[p.unsafeGetTensorImpl()];
      if (!step.defined()) step = at::full({}, static_cast<double>(state.step()), p.options().dtype(at::kFloat));
      for (GroupTensors* into : {&tensors, &all}) {
        into->params.push_back(p);
        into->grads.push_back(p.grad());
        into->exp_avgs.push_back(state.exp_avg());
        into->exp_avg_sqs.push_back(state.exp_avg_sq());
        into->steps.push_back(step);
      }
      weight_decays.push_back(options.weight_decay());
    }
    if (tensors.params.empty()) continue;
    if (!groups.empty()) {
      const torch::optim::AdamWOptions& first = *groups.front().options;
      one_launch = one_launch && options.betas() == first.betas() && options.eps() == first.eps();
    }
    groups.push_back(std::move(tensors));
  }
  if (advanced) {
    std::set<const void*> stepped;
    for (const at::Tensor& p : all.params) stepped.insert(p.unsafeGetTensorImpl());
    TRAINC_CHECK(stepped == *advanced, "CapturableAdamW: the step counts advanced before this step are not those of the parameters it updates (" +
                                           std::to_string(advanced->size()) + " advanced, " + std::to_string(stepped.size()) + " updated)");
  }
  if (groups.empty()) return loss;
  if (!advanced) at::_foreach_add_(all.steps, 1.0);
  // On a GPU, trainc's kernel, which leaves the gradients unwritten (train/adamw_kernel), else ATen's.
  if (one_launch && adamw_kernel_takes(all.params, all.grads, all.exp_avgs, all.exp_avg_sqs, all.steps, learning_rate_, grad_factor)) {
    const auto& options = *groups.front().options;
    adamw_kernel_update(all.params, all.grads, all.exp_avgs, all.exp_avg_sqs, all.steps, learning_rate_, std::get<0>(options.betas()),
                        std::get<1>(options.betas()), weight_decays, options.eps(), grad_factor, shadows_to_update(all.params));
    updated_shadows(all.params);
    return loss;
  }
  for (GroupTensors& group : groups) {
    const auto& options = *group.options;
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    std::vector<at::Tensor>& params = group.params;
    std::vector<at::Tensor>& grads = group.grads;
    std::vector<at::Tensor>& exp_avgs = group.exp_avgs;
    std::vector<at::Tensor>& exp_avg_sqs = group.exp_avg_sqs;
    const std::vector<at::Tensor>& steps = group.steps;
    if (adamw_kernel_ && adamw_kernel_takes(params, grads, exp_avgs, exp_avg_sqs, steps, learning_rate_, grad_factor)) {
      adamw_kernel_update(params, grads, exp_avgs, exp_avg_sqs, steps, learning_rate_, beta1, beta2,
                          std::vector<double>(params.size(), options.weight_decay()), options.eps(), grad_factor,
                          shadows_to_update(params));
      updated_shadows(params);
      continue;
    }
    if (fused_adamw_update(params, grads, exp_avgs, exp_avg_sqs, steps, learning_rate_, beta1, beta2, options.weight_decay(),
                           options.eps(), grad_factor.defined() ? grad_factor.reciprocal() : at::Tensor())) {
      cast_shadows(params);  // ATen's update writes the parameters only
      continue;
    }
    if (coefficient.defined()) foreach_mul_(grads, coefficient.to(grads.front().scalar_type()));
    // torch::optim::AdamW's arithmetic with the learning rate and the bias corrections as tensors.
    for (std::size_t i = 0; i < params.size(); ++i) {
      const at::Tensor bias_correction1 = 1 - at::pow(beta1, steps[i]);
      const at::Tensor bias_correction2 = 1 - at::pow(beta2, steps[i]);
      if (options.weight_decay() != 0) params[i].mul_(1 - learning_rate_ * options.weight_decay());
      exp_avgs[i].mul_(beta1).add_(grads[i], 1 - beta1);
      exp_avg_sqs[i].mul_(beta2).addcmul_(grads[i], grads[i], 1 - beta2);
      const at::Tensor denom = (exp_avg_sqs[i].sqrt() / bias_correction2.sqrt()).add_(options.eps());
      params[i].addcdiv_(exp_avgs[i], denom.div_(-learning_rate_ / bias_correction1));
    }
    cast_shadows(params);
  }
  return loss;
}

std::vector<at::Tensor> CapturableAdamW::shadows_to_update(at::TensorList params) const {
  return shadows_ ? ParameterShadows::instance().shadows_to_update(params) : std::vector<at::Tensor>{};
}

void CapturableAdamW::updated_shadows(at::TensorList params) const {
  if (shadows_) ParameterShadows::instance().updated(params);
}

void CapturableAdamW::cast_shadows(at::TensorList params) const {
  if (shadows_) ParameterShadows::instance().cast_shadows(params);
}

CapturableAdamW::~CapturableAdamW() {
  if (!shadows_) return;
  for (const auto& group : param_groups()) ParameterShadows::instance().untrack(group.params());
}

void CapturableAdamW::store_device_state() {
  for (auto& group : param_groups()) {
    for (auto& p : group.params()) {
      const auto step = steps_.find(p.unsafeGetTensorImpl());
      const auto state = state_.find(optimizer_state_key(p));
      if (step == steps_.end() || state == state_.end()) continue;
      static_cast<torch::optim::AdamWParamState&>(*state->second).step(static_cast<int64_t>(step->second.item<double>()));
    }
  }
}

void CapturableAdamW::load(torch::serialize::InputArchive& archive) {
  torch::optim::AdamW::load(archive);
  steps_.clear();  // rebuilt from the loaded state by the next step
}

void CapturableSGD::set_device_learning_rate(double learning_rate) {
  write_learning_rate(learning_rate_, learning_rate, param_groups());
}

at::Tensor CapturableSGD::device_learning_rate() { return learning_rate_tensor(learning_rate_, param_groups()); }

torch::Tensor CapturableSGD::step(LossClosure closure) {
  TRAINC_CHECK(learning_rate_.defined(), "CapturableSGD::step before set_device_learning_rate");
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = closure_loss(closure);
  const at::Tensor negative_learning_rate = -learning_rate_;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    TRAINC_CHECK(options.momentum() == 0 && !options.nesterov(), "CapturableSGD implements SGD without momentum");
    std::vector<at::Tensor> params, grads;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (params.empty()) continue;
    const std::vector<at::Tensor> updates = options.weight_decay() != 0 ? at::_foreach_add(grads, params, options.weight_decay()) : grads;
    for (std::size_t i = 0; i < params.size(); ++i) params[i].addcmul_(updates[i], negative_learning_rate);
  }
  return loss;
}

}  // namespace trainc
