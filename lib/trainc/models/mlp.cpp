#include "trainc/models/mlp.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

namespace trainc {

namespace {
torch::nn::AnyModule activation(const std::string& name) {
  if (name == "gelu") return torch::nn::AnyModule(torch::nn::GELU());
  if (name == "tanh") return torch::nn::AnyModule(torch::nn::Tanh());
  if (name == "silu") return torch::nn::AnyModule(torch::nn::SiLU());
  return torch::nn::AnyModule(torch::nn::ReLU());
}
}  // namespace

MlpImpl::MlpImpl(const ModelConfig& config) {
  int64_t width = config.input_size;
  for (int64_t hidden : config.hidden_sizes) {
    layers_->push_back(torch::nn::Linear(width, hidden));
    layers_->push_back(activation(config.activation));
    if (config.dropout > 0) layers_->push_back(torch::nn::Dropout(config.dropout));
    width = hidden;
  }
  layers_->push_back(torch::nn::Linear(width, config.num_classes));
  register_module("layers", layers_);
}

torch::Tensor MlpImpl::forward(const torch::Tensor& inputs) { return layers_->forward(inputs.flatten(1)); }

}  // namespace trainc
