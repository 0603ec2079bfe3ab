#include "trainc/train/device_loss_scale.h"

namespace trainc {

DeviceLossScale::DeviceLossScale(c10::Device device) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::ones({}, options);
  inverse_ = at::ones({}, options);
  found_inf_ = at::zeros({}, options);
}

void DeviceLossScale::set(double scale) {
  if (scale == written_) return;
  scale_.fill_(scale);
  inverse_.fill_(1.0 / scale);
  written_ = scale;
}

at::Tensor DeviceLossScale::seed(double count) const { return scale_ / count; }

bool DeviceLossScale::unscale(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& parameter : parameters) {
    if (parameter.grad().defined()) gradients.push_back(parameter.grad());
  }
  found_inf_.zero_();
  if (!gradients.empty()) at::_amp_foreach_non_finite_check_and_unscale_(gradients, found_inf_, inverse_);
  return found_inf_.item<float>() == 0.0F;
}

}  // namespace trainc
