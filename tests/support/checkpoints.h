// defines: read_checkpoint_tensors, tensors_equal — compare what two runs saved
#pragma once

#include <torch/types.h>

#include <map>
#include <string>

namespace trainc::test {

std::map<std::string, torch::Tensor> read_checkpoint_tensors(const std::string& model_pt, const std::vector<std::string>& names);
// Names of the parameters and buffers of a model config's model, as checkpoints key them.
std::vector<std::string> checkpoint_tensor_names(const std::string& run_config_yaml);
// Exactly equal, bit for bit, for every tensor in both files.
bool checkpoints_identical(const std::string& dir_a, const std::string& dir_b);
// Largest absolute difference over all tensors.
double checkpoint_max_difference(const std::string& dir_a, const std::string& dir_b);

}  // namespace trainc::test
