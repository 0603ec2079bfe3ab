// defines: TorchScriptModel — a module scripted or traced in Python, saved with torch.jit.save.
//
// Its forward must take one tensor and return logits:
//   classification:  forward(x: Tensor[batch, ...features]) -> Tensor[batch, num_classes]
//   language model:  forward(tokens: LongTensor[batch, time]) -> Tensor[batch, time, vocab]
// Its parameters are trained and checkpointed like a zoo model's, under their TorchScript names.
#pragma once

#include <torch/script.h>

#include <map>
#include <memory>

#include "trainc/models/model.h"

namespace trainc {

class TorchScriptModel : public Model {
 public:
  // UserError if the file cannot be loaded. `language_model` and `num_classes` give the logits'
  // shape forward must return ([batch, time, vocab], or [batch, num_classes]); a language model's
  // vocab must reach `token_bound` (every token in the data is below it; 0: unchecked).
  TorchScriptModel(const std::string& path, bool language_model, int64_t num_classes, int64_t token_bound = 0);
  torch::Tensor forward(const torch::Tensor& inputs) override;
  std::vector<NamedTensor> named_parameters() override;
  std::vector<NamedTensor> named_buffers() override;
  void set_training(bool training) override { module_.train(training); }
  void to(torch::Device device) override { module_.to(device); }
  std::string describe() const override { return "torchscript " + path_; }
  std::vector<ScriptedOp> host_value_reads() override;
  std::vector<ScriptedOp> grad_mode_switches() override;
  std::vector<ScriptedOp> value_sized_results() override;
  std::vector<ScriptedOp> host_copies() override;

 private:
  std::string path_;
  bool language_model_;
  int64_t num_classes_;
  int64_t token_bound_;
  torch::jit::Module module_;
  // The forward as walked for its ops, made once per mode (training, evaluation): every list
  // above walks the same graph.
  std::map<bool, std::shared_ptr<torch::jit::Graph>> walked_forward_;
  torch::jit::Graph& walked_forward();
};

}  // namespace trainc
