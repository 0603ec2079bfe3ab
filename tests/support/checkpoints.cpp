#include "support/checkpoints.h"

#include <torch/serialize.h>
#include <torch/torch.h>

#include "trainc/config/resolve.h"
#include "trainc/data/dataset.h"
#include "trainc/models/model.h"

namespace trainc::test {

std::map<std::string, torch::Tensor> read_checkpoint_tensors(const std::string& model_pt, const std::vector<std::string>& names) {
  torch::serialize::InputArchive archive;
  archive.load_from(model_pt);
  std::map<std::string, torch::Tensor> tensors;
  for (const std::string& name : names) {
    torch::Tensor tensor;
    if (archive.try_read(name, tensor) || archive.try_read(name, tensor, /*is_buffer=*/true)) tensors[name] = tensor;
  }
  return tensors;
}

std::vector<std::string> checkpoint_tensor_names(const std::string& run_config_yaml) {
  const RunConfig config = build_run_config(run_config_yaml, {}, nullptr);
  const DataSplits data = load_data(config.data, config.model, config.args.seed);
  auto model = make_model(config.model, {data.language_model, data.sample_shape}, false);
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.first);
  for (const auto& item : model->named_buffers()) names.push_back(item.first);
  return names;
}

namespace {
std::pair<std::map<std::string, torch::Tensor>, std::map<std::string, torch::Tensor>> read_both(const std::string& a,
                                                                                                  const std::string& b) {
  const std::vector<std::string> names = checkpoint_tensor_names(a + "/run_config.yaml");
  return {read_checkpoint_tensors(a + "/model.pt", names), read_checkpoint_tensors(b + "/model.pt", names)};
}
}  // namespace

bool checkpoints_identical(const std::string& dir_a, const std::string& dir_b) {
  const auto [a, b] = read_both(dir_a, dir_b);
  if (a.empty() || a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a) {
    if (!b.count(name) || !torch::equal(tensor, b.at(name))) return false;
  }
  return true;
}

double checkpoint_max_difference(const std::string& dir_a, const std::string& dir_b) {
  const auto [a, b] = read_both(dir_a, dir_b);
  double largest = 0.0;
  for (const auto& [name, tensor] : a) {
    largest = std::max(largest, (tensor.to(torch::kDouble) - b.at(name).to(torch::kDouble)).abs().max().item<double>());
  }
  return largest;
}

}  // namespace trainc::test
