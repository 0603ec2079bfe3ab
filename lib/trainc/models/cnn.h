// defines: Cnn — a small convolutional classifier for 28x28 images:
// [conv 3x3, batch norm, ReLU, max-pool 2] per entry of `channels`, then dropout and a linear head.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "trainc/config/training_arguments.h"

namespace trainc {

class CnnImpl : public torch::nn::Module {
 public:
  explicit CnnImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& images);  // [batch, in_channels, 28, 28]

 private:
  torch::nn::Sequential features_;
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace trainc
