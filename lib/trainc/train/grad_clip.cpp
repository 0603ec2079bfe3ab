#include "trainc/train/grad_clip.h"

#include <ATen/ATen.h>

#include <map>

#include "trainc/compat/torch_compat.h"
#include "trainc/compile/optimizations.h"
#include "trainc/train/grad_norm_kernel.h"

namespace trainc {

namespace {

std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

torch::Tensor total_norm(const std::vector<torch::Tensor>& grads) { return at::stack(at::_foreach_norm(grads)).to(torch::kFloat).norm(); }

torch::Tensor coefficient(const torch::Tensor& total, double max_norm) { return (max_norm / (total + 1e-6)).clamp_max(1.0); }

// On a GPU, trainc's kernels (switch grad_norm_kernel) where they take the gradients; the variable is
// read at each step, which costs nothing next to a step, so that a compiled step and an eager one
// agree on it.
bool use_kernel(const std::vector<torch::Tensor>& grads) {
  return grad_norm_kernel_takes(grads) && optimization_enabled(Optimization::grad_norm_kernel);
}

}  // namespace

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  const std::vector<torch::Tensor> grads = gradients(parameters);
  if (grads.empty()) return torch::zeros({});
  const bool kernel = use_kernel(grads);
  const NormAndCoefficient measured = kernel ? grad_norm_kernel(grads, max_norm) : NormAndCoefficient{total_norm(grads), {}};
  const torch::Tensor total = measured.norm;
  if (max_norm > 0) {
    const torch::Tensor scale = kernel ? measured.coefficient : coefficient(total, max_norm);
    std::map<at::ScalarType, std::vector<torch::Tensor>> by_dtype;  // a multi-tensor kernel per gradient dtype
    for (const auto& grad : grads) by_dtype[grad.scalar_type()].push_back(grad);
    for (auto& [dtype, same] : by_dtype) foreach_mul_(same, scale.to(dtype));
  }
  return total;
}

GradNorm grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  const std::vector<torch::Tensor> grads = gradients(parameters);
  if (grads.empty()) {
    const auto options = parameters.empty() ? torch::TensorOptions() : torch::TensorOptions().device(parameters.front().device());
    return {torch::zeros({}, options), torch::ones({}, options)};
  }
  if (use_kernel(grads)) {
    const NormAndCoefficient measured = grad_norm_kernel(grads, max_norm);
    return {measured.norm, measured.coefficient};
  }
  const torch::Tensor total = total_norm(grads);
  return {total, coefficient(total, max_norm)};
}

}  // namespace trainc
