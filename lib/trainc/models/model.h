// defines: Model, NamedTensor, ModelInputs, make_model
//
// A trainable model: logits = forward(inputs). Zoo models are torch::nn modules; a TorchScript
// file from Python is a model too. The trainer sees only this interface: parameters and buffers
// by stable names (checkpoints are keyed by them), train/eval mode, and the device.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

using NamedTensor = std::pair<std::string, torch::Tensor>;

// An op of a scripted forward ("aten::Bool"), and where ("net.py:7", or empty when the module
// carries no source, as a traced one).
struct ScriptedOp {
  std::string op;
  std::string place;
  bool operator==(const ScriptedOp& other) const { return op == other.op && place == other.place; }
};

// Whether an op of Model::grad_mode_switches runs autograd itself (`torch.autograd.grad`,
// `.backward()`): a forward that holds one cannot be traced at all.
inline bool runs_autograd(const ScriptedOp& op) { return op.op == "aten::grad" || op.op == "aten::backward"; }

class Model {
 public:
  virtual ~Model() = default;
  // Classifiers: inputs [batch, ...] -> logits [batch, classes].
  // Language models: tokens [batch, time] (int64) -> logits [batch, time, vocab].
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;
  virtual std::vector<NamedTensor> named_parameters() = 0;
  virtual std::vector<NamedTensor> named_buffers() = 0;
  virtual void set_training(bool training) = 0;
  virtual void to(torch::Device device) = 0;
  virtual std::string describe() const = 0;  // one line for the run header
  // The forward's reads of a tensor's value on the host: a branch or a number taken from the data.
  // A trace records the first batch's branch and value as constants, so a step that holds one is
  // not compiled. The zoo models have none.
  virtual std::vector<ScriptedOp> host_value_reads() { return {}; }
  // The forward's switches of autograd (`with torch.no_grad():`), reads of its mode and its own
  // runs of autograd (`torch.autograd.grad`). Eager autograd records nothing inside a switch; a
  // trace keeps the ops but not the switch, so its backward would differentiate through them, it
  // reads the mode as off, and it runs no autograd: a step that holds one is not compiled. The
  // zoo models have none.
  virtual std::vector<ScriptedOp> grad_mode_switches() { return {}; }
  // The forward's other ops that wait for the GPU: a tensor sized by its input's values (`nonzero`,
  // `masked_select`, `unique`), and copies to the host (`x.cpu()`). A CUDA graph's capture cannot
  // record a wait. The import has no builder for the first kind, so the planner breaks on them; a
  // compiled program drops a copy's change of device, so only an eager step copies. The zoo
  // models have none.
  virtual std::vector<ScriptedOp> value_sized_results() { return {}; }
  virtual std::vector<ScriptedOp> host_copies() { return {}; }
  // The name a tensor has when the same model is built with a setting that changes no tensor, only
  // the names (the MLP numbers its layers by whether it has dropout): a checkpoint that lacks some
  // of the model's names is read under these when it holds all of them. `name` itself for a model
  // whose names depend on no such setting.
  virtual std::string alternative_checkpoint_name(const std::string& name) const { return name; }

  int64_t parameter_count();
};

// What the data tells the model factory.
struct ModelInputs {
  bool language_model = false;
  std::vector<int64_t> sample_shape;  // one input sample, e.g. {1, 28, 28} or {784}
  int64_t token_bound = 0;            // language models: every token in the data is below it (0: unknown)
};

// Builds the model named by config.name, initialized from the current torch seed. Throws
// UserError when the model and the data do not fit together (naming both keys).
std::unique_ptr<Model> make_model(const ModelConfig& config, const ModelInputs& inputs, bool gradient_checkpointing);

// Adapts a torch::nn module (the zoo models) to Model.
template <typename ModuleHolder>
class ModuleModel : public Model {
 public:
  using NameMapping = std::function<std::string(const std::string&)>;
  ModuleModel(ModuleHolder module, std::string description, NameMapping alternative_names = {})
      : module_(std::move(module)), description_(std::move(description)), alternative_names_(std::move(alternative_names)) {}
  torch::Tensor forward(const torch::Tensor& inputs) override { return module_->forward(inputs); }
  std::vector<NamedTensor> named_parameters() override { return to_vector(module_->named_parameters()); }
  std::vector<NamedTensor> named_buffers() override { return to_vector(module_->named_buffers()); }
  void set_training(bool training) override { module_->train(training); }
  void to(torch::Device device) override { module_->to(device); }
  std::string describe() const override { return description_; }
  std::string alternative_checkpoint_name(const std::string& name) const override {
    return alternative_names_ ? alternative_names_(name) : name;
  }

 private:
  static std::vector<NamedTensor> to_vector(const torch::OrderedDict<std::string, torch::Tensor>& dict) {
    std::vector<NamedTensor> items;
    for (const auto& item : dict) items.emplace_back(item.key(), item.value());
    return items;
  }
  ModuleHolder module_;
  std::string description_;
  NameMapping alternative_names_;
};

}  // namespace trainc
