// defines: Mlp — fully connected classifier: [Linear, activation, dropout] x N, then Linear
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>

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

// `name` (layers.N.weight or .bias) as an Mlp of `config` with dropout switched between 0 and a
// positive value names it: the k-th Linear is layers.(2k) without dropout and layers.(3k) with it,
// since a dropout module follows each activation only when dropout is positive. Checkpoints are
// keyed by these names, so one saved with the other setting loads under them
// (Model::alternative_checkpoint_name).
std::string mlp_alternative_checkpoint_name(const ModelConfig& config, const std::string& name);

}  // namespace trainc
