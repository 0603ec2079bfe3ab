#include "trainc/models/mlp.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>

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

std::string mlp_alternative_checkpoint_name(const ModelConfig& config, const std::string& name) {
  const std::string prefix = "layers.";
  const std::size_t dot = name.find('.', prefix.size());
  if (name.compare(0, prefix.size(), prefix) != 0 || dot == std::string::npos || dot == prefix.size()) return name;
  const std::string digits = name.substr(prefix.size(), dot - prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) return name;
  const int64_t index = std::stoll(digits);
  // Modules a hidden layer takes in layers_ (the constructor above), with dropout and without.
  const int64_t stride = config.dropout > 0 ? 3 : 2, other_stride = config.dropout > 0 ? 2 : 3;
  if (index % stride != 0) return name;  // not a Linear: it holds no tensor
  return prefix + std::to_string(index / stride * other_stride) + name.substr(dot);
}

torch::Tensor MlpImpl::forward(const torch::Tensor& inputs) { return layers_->forward(inputs.flatten(1)); }

}  // namespace trainc
