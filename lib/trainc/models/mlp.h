// defines: Mlp — fully connected classifier: [Linear, activation, dropout] x N, then Linear
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include "trainc/config/training_arguments.h"

namespace trainc {

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& inputs);  // [batch, ...] flattened to [batch, input_size]

 private:
  torch::nn::Sequential layers_;
};
TORCH_MODULE(Mlp);

}  // namespace trainc
