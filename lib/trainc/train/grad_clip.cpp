#include "trainc/train/grad_clip.h"

#include <ATen/ATen.h>

#include <map>

#include "trainc/compat/torch_compat.h"

namespace trainc {

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({});
  const torch::Tensor total = at::stack(at::_foreach_norm(grads)).to(torch::kFloat).norm();
  if (max_norm > 0) {
    const torch::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
    std::map<at::ScalarType, std::vector<torch::Tensor>> by_dtype;  // a multi-tensor kernel per gradient dtype
    for (auto& grad : grads) by_dtype[grad.scalar_type()].push_back(grad);
    for (auto& [dtype, same] : by_dtype) foreach_mul_(same, scale.to(dtype));
  }
  return total;
}

}  // namespace trainc
