#include "trainc/models/torchscript_model.h"

#include "trainc/common/error.h"

namespace trainc {

namespace {
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
}  // namespace

TorchScriptModel::TorchScriptModel(const std::string& path) : path_(path) {
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
  try {
    output = module_.forward({inputs});
  } catch (const c10::Error& error) {
    throw UserError("model.path: " + path_ + ": forward(inputs " + c10::str(inputs.sizes()) +
                    ") failed: " + first_line(error.what_without_backtrace()), kExitFailure);
  }
  if (!output.isTensor()) throw UserError("model.path: " + path_ + ": forward must return one tensor of logits", kExitFailure);
  return output.toTensor();
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
