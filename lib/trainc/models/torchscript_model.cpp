#include "trainc/models/torchscript_model.h"

#include <torch/csrc/jit/passes/inliner.h>

#include <functional>
#include <set>

#include "trainc/common/error.h"

namespace trainc {

namespace {
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
}  // namespace

TorchScriptModel::TorchScriptModel(const std::string& path, bool language_model, int64_t num_classes)
    : path_(path), language_model_(language_model), num_classes_(num_classes) {
  try {
    module_ = torch::jit::load(path);
  } catch (const c10::Error& error) {
    throw UserError("model.path: cannot load TorchScript file " + path + ": " + first_line(error.what_without_backtrace()) +
                    " (save it with torch.jit.save(torch.jit.script(module), path))");
  }
  if (!module_.find_method("forward")) throw UserError("model.path: " + path + " has no forward method");
  for (const auto& parameter : module_.parameters()) parameter.requires_grad_(true);
}

torch::Tensor TorchScriptModel::forward(const torch::Tensor& inputs) {
  c10::IValue output;
  const auto failed = [&](const std::string& what) {
    return UserError("model.path: " + path_ + ": forward(inputs " + c10::str(inputs.sizes()) + ") failed: " + what, kExitFailure);
  };
  try {
    output = module_.forward({inputs});
  } catch (const c10::Error& error) {
    throw failed(first_line(error.what_without_backtrace()));
  } catch (const std::exception& error) {
    // The interpreter's own exceptions (a raise, a failed op inside a scripted call) carry its
    // traceback: the last line says what failed.
    std::string what = error.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    throw failed(what.substr(what.rfind('\n') == std::string::npos ? 0 : what.rfind('\n') + 1));
  }
  if (!output.isTensor()) throw UserError("model.path: " + path_ + ": forward must return one tensor of logits", kExitFailure);
  // Logits of another layout would meet the targets misaligned, or fail inside the loss with
  // ATen's words ("Target 9 is out of bounds").
  const torch::Tensor logits = output.toTensor();
  const bool fits = language_model_ ? logits.dim() == 3 && logits.size(0) == inputs.size(0) && logits.size(1) == inputs.size(1)
                                    : logits.dim() == 2 && logits.size(0) == inputs.size(0) && logits.size(1) == num_classes_;
  if (!fits || !at::isFloatingType(logits.scalar_type())) {
    const std::string expected = language_model_ ? "[" + std::to_string(inputs.size(0)) + ", " + std::to_string(inputs.size(1)) + ", vocab]"
                                                 : "[" + std::to_string(inputs.size(0)) + ", " + std::to_string(num_classes_) + "] (model.num_classes)";
    throw UserError("model.path: " + path_ + ": forward(inputs " + c10::str(inputs.sizes()) + ") returned " +
                    std::string(c10::toString(logits.scalar_type())) + " logits of shape " + c10::str(logits.sizes()) +
                    ", expected floating-point logits of shape " + expected);
  }
  return logits;
}

std::vector<std::string> TorchScriptModel::host_value_reads() {
  // The ops that turn a tensor into a host value: a scripted `if bool(x.sum() > 0)`, `.item()`,
  // `float(t)`, `t.tolist()`. A shape read (x.size(0), x.dim()) is no such op: a new shape is a new
  // input signature, compiled again.
  static const std::set<std::string> reads = {"aten::Bool",         "aten::Float",      "aten::Int",        "aten::item",
                                              "aten::ScalarImplicit", "aten::FloatImplicit", "aten::IntImplicit", "aten::is_nonzero",
                                              "aten::_local_scalar_dense", "aten::tolist", "prim::tolist"};
  std::shared_ptr<torch::jit::Graph> graph = module_.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  std::vector<std::string> found;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* block) {
    for (torch::jit::Node* node : block->nodes()) {
      const std::string kind = node->kind().toQualString();
      if (reads.count(kind) && !node->inputs().empty() && node->input(0)->type()->cast<c10::TensorType>()) {
        std::string where = kind;
        if (const auto place = node->sourceRange().file_line_col()) where += " at line " + std::to_string(std::get<1>(*place));
        found.push_back(where);
      }
      for (torch::jit::Block* inner : node->blocks()) visit(inner);
    }
  };
  visit(graph->block());
  return found;
}

std::vector<NamedTensor> TorchScriptModel::named_parameters() {
  std::vector<NamedTensor> items;
  for (const auto& item : module_.named_parameters(/*recurse=*/true)) items.emplace_back(item.name, item.value);
  return items;
}

std::vector<NamedTensor> TorchScriptModel::named_buffers() {
  std::vector<NamedTensor> items;
  for (const auto& item : module_.named_buffers(/*recurse=*/true)) items.emplace_back(item.name, item.value);
  return items;
}

}  // namespace trainc
