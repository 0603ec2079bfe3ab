#include "trainc/models/torchscript_model.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "trainc/common/error.h"

namespace trainc {

namespace {
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// What failed, in one line. The interpreter's message is a header, tracebacks of the scripted code
// (indented lines, the failing one marked "<--- HERE", then the lines after it), then the error
// itself: the first unindented line after the last mark (a CUDA error's own advice follows it).
std::string cause_of(const std::string& message) {
  const std::size_t here = message.rfind("<--- HERE");
  if (message.rfind("The following operation failed in the TorchScript interpreter", 0) != 0 || here == std::string::npos) {
    return first_line(message);
  }
  std::istringstream rest(message.substr(message.find('\n', here) == std::string::npos ? message.size() : message.find('\n', here) + 1));
  for (std::string line; std::getline(rest, line);) {
    if (!line.empty() && line[0] != ' ' && line[0] != '\t') return line;
  }
  return first_line(message);
}

// "net.py:7" for a source range of a loaded module: its serialized code points back to the Python
// file's line. A traced module's ranges carry none ("").
std::string file_line(torch::jit::SourceRange range) {
  if (const auto original = range.findSourceRangeThatGenerated()) range = *original;
  if (const auto place = range.file_line_col(); place && !std::get<0>(*place).empty() && std::get<1>(*place) > 0) {
    return std::get<0>(*place) + ":" + std::to_string(std::get<1>(*place));
  }
  return "";
}

// Where a scripted node comes from: "net.py:7". An op of PyTorch's own scripted code (torch.unique
// calls aten::_unique2 in torch/functional.py) is placed at the innermost of the inlined calls made
// from code that is not PyTorch's; a function's qualified name tells (`__torch__.torch.`).
std::string place_of(const torch::jit::Node* node) {
  const auto pytorchs = [](const auto* function) {
    return function != nullptr && function->qualname().qualifiedName().rfind("__torch__.torch.", 0) == 0;
  };
  if (!node->callstack()) return file_line(node->sourceRange());
  // The outermost call first, made in the forward; each later one inside the function called before it.
  const std::vector<torch::jit::InlinedCallStackEntry> calls = (*node->callstack())->vec();
  if (calls.empty() || !pytorchs(std::get<0>(calls.back()))) return file_line(node->sourceRange());
  for (std::size_t call = calls.size(); call-- > 0;) {
    if (call == 0 || !pytorchs(std::get<0>(calls[call - 1]))) return file_line(std::get<1>(calls[call]));
  }
  return file_line(node->sourceRange());
}

// Each node of `block` and of the blocks inside it, in order.
void for_each_node(torch::jit::Block* block, const std::function<void(torch::jit::Node*)>& visit) {
  for (torch::jit::Node* node : block->nodes()) {
    visit(node);
    for (torch::jit::Block* inner : node->blocks()) for_each_node(inner, visit);
  }
}

// The module's forward as it runs in the module's present mode (training, for the step), with the
// methods it calls inlined: one graph to walk (a copy; the module keeps its own). A branch on
// `self.training` that the mode does not take is dropped: an evaluation-only `nonzero` is no wait
// of the step's.
std::shared_ptr<torch::jit::Graph> inlined_forward(torch::jit::Module& module) {
  std::shared_ptr<torch::jit::Graph> graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  torch::jit::Value* mode = nullptr;
  {
    const torch::jit::WithInsertPoint first(graph->block()->param_node()->next());
    mode = graph->insertConstant(module.is_training());
  }
  std::vector<torch::jit::Node*> reads_of_mode;
  for_each_node(graph->block(), [&](torch::jit::Node* node) {
    if (node->kind() == torch::jit::prim::GetAttr && node->s(torch::jit::attr::name) == "training") reads_of_mode.push_back(node);
  });
  for (torch::jit::Node* read : reads_of_mode) read->output()->replaceAllUsesWith(mode);
  std::shared_ptr<torch::jit::Graph> folded = graph->copy();
  try {
    torch::jit::ConstantPropagation(folded);
    torch::jit::EliminateDeadCode(folded);
  } catch (const std::exception&) {
    // One the passes cannot fold is walked whole: every branch counts, evaluation's too, which can
    // only decline more (a graph break, CUDA graphs) than the step needs, never less.
    return graph;
  }
  return folded;
}

void add_once(std::vector<ScriptedOp>& found, const ScriptedOp& op) {
  if (std::find(found.begin(), found.end(), op) == found.end()) found.push_back(op);
}
}  // namespace

TorchScriptModel::TorchScriptModel(const std::string& path, bool language_model, int64_t num_classes, int64_t token_bound)
    : path_(path), language_model_(language_model), num_classes_(num_classes), token_bound_(token_bound) {
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
    throw failed(cause_of(error.what_without_backtrace()));
  } catch (const std::exception& error) {  // the interpreter's own (a raise in the scripted code)
    throw failed(cause_of(error.what()));
  }
  if (!output.isTensor()) throw UserError("model.path: " + path_ + ": forward must return one tensor of logits", kExitFailure);
  // Logits of another layout would meet the targets misaligned, or fail inside the loss with
  // ATen's words ("Target 9 is out of bounds"; on a GPU, a device-side assertion that ends the
  // process): a language model's vocabulary must cover every token in the data.
  const torch::Tensor logits = output.toTensor();
  const int64_t batch = inputs.size(0);
  std::string expected;
  bool fits = false;
  if (language_model_) {
    fits = logits.dim() == 3 && logits.size(0) == batch && logits.size(1) == inputs.size(1) && logits.size(2) >= token_bound_;
    expected = "[" + std::to_string(batch) + ", " + std::to_string(inputs.size(1)) + ", vocab]";
    if (token_bound_ > 0) {
      expected += " with vocab at least " + std::to_string(token_bound_) + " (the data's largest token is " + std::to_string(token_bound_ - 1) + ")";
    }
  } else {
    fits = logits.dim() == 2 && logits.size(0) == batch && logits.size(1) == num_classes_;
    expected = "[" + std::to_string(batch) + ", " + std::to_string(num_classes_) + "] (model.num_classes)";
  }
  if (!fits || !at::isFloatingType(logits.scalar_type())) {
    throw UserError("model.path: " + path_ + ": forward(inputs " + c10::str(inputs.sizes()) + ") returned " +
                    std::string(c10::toString(logits.scalar_type())) + " logits of shape " + c10::str(logits.sizes()) +
                    ", expected floating-point logits of shape " + expected);
  }
  return logits;
}

torch::jit::Graph& TorchScriptModel::walked_forward() {
  std::shared_ptr<torch::jit::Graph>& graph = walked_forward_[module_.is_training()];
  if (!graph) graph = inlined_forward(module_);
  return *graph;
}

std::vector<ScriptedOp> TorchScriptModel::host_value_reads() {
  // The ops that turn a tensor into a host value: a scripted `if bool(x.sum() > 0)`, `.item()`,
  // `float(t)`, `t.tolist()`, `torch.equal(a, b)`.
  static const std::set<std::string> reads = {
      "aten::Bool",       "aten::Float",       "aten::Int",          "aten::Complex", "aten::item",
      "aten::ScalarImplicit", "aten::FloatImplicit", "aten::IntImplicit", "aten::ComplexImplicit", "aten::is_nonzero",
      "aten::_local_scalar_dense", "aten::tolist", "prim::tolist", "aten::equal", "aten::allclose"};
  torch::jit::Graph& graph = walked_forward();
  // Tensors that hold no data, only shapes and constants: a traced `x.view(x.size(0), -1)` keeps
  // the size as prim::NumToTensor, read back by aten::Int. A new shape is a new input signature,
  // compiled again, so reading these is no host read. Parameters (prim::GetAttr), the inputs and
  // random draws are data.
  std::set<const torch::jit::Value*> shape_only;
  const auto holds_data = [&](const torch::jit::Value* value) {
    return value->type()->cast<c10::TensorType>() && !shape_only.count(value);
  };
  std::vector<ScriptedOp> found;
  for_each_node(graph.block(), [&](torch::jit::Node* node) {
    const std::string kind = node->kind().toQualString();
    const bool random = kind.find("rand") != std::string::npos || kind.find("bernoulli") != std::string::npos ||
                        kind.find("normal") != std::string::npos || kind.find("dropout") != std::string::npos;
    const bool from_shapes = kind == "prim::NumToTensor" ||
                             (kind != "prim::GetAttr" && kind != "prim::Param" && !random && node->blocks().empty() &&
                              std::none_of(node->inputs().begin(), node->inputs().end(), holds_data));
    if (from_shapes) {
      for (const torch::jit::Value* output : node->outputs()) shape_only.insert(output);
    }
    if (reads.count(kind) && std::any_of(node->inputs().begin(), node->inputs().end(), holds_data)) add_once(found, {kind, place_of(node)});
  });
  return found;
}

std::vector<ScriptedOp> TorchScriptModel::grad_mode_switches() {
  // `with torch.no_grad():` is prim::Enter of a grad_mode object; `torch.set_grad_enabled(False)`
  // is the op itself. `torch.is_grad_enabled()` reads the mode, which the trace (taken without
  // autograd) would read as off, and `torch.autograd.grad`, `.backward()` and `requires_grad_`
  // run autograd inside the forward, which the trace cannot record. A training step runs with
  // autograd on, so turning it on changes nothing there: `with torch.enable_grad():` and
  // `torch.set_grad_enabled(True)` are left out (the autograd they guard is not).
  static const std::set<std::string> autograd_ops = {"aten::is_grad_enabled", "aten::grad", "aten::backward", "aten::requires_grad_"};
  torch::jit::Graph& graph = walked_forward();
  const bool training = module_.is_training();
  std::vector<ScriptedOp> found;
  for_each_node(graph.block(), [&](torch::jit::Node* node) {
    const std::string kind = node->kind().toQualString();
    if (autograd_ops.count(kind)) add_once(found, {kind, place_of(node)});
    if (kind == "aten::set_grad_enabled") {
      const c10::optional<c10::IValue> mode = node->inputs().empty() ? c10::nullopt : torch::jit::toIValue(node->inputs()[0]);
      if (!(training && mode && mode->isBool() && mode->toBool())) add_once(found, {kind, place_of(node)});
    }
    if (kind != "prim::Enter" || node->inputs().empty()) return;
    const torch::jit::Value* context = node->inputs()[0];
    const auto type = context->type()->cast<c10::ClassType>();
    if (!type || !type->name() || type->name()->qualifiedName().find("torch.autograd.grad_mode.") == std::string::npos) return;
    if (training && type->name()->name() == "enable_grad") return;
    add_once(found, {"with torch." + type->name()->name(), place_of(context->node())});
  });
  return found;
}

std::vector<ScriptedOp> TorchScriptModel::value_sized_results() {
  // Each counts its result on the GPU and waits for the count. `torch.where(c)`, one argument, is
  // nonzero; `torch.unique` is a scripted function that calls aten::_unique2. repeat_interleave
  // with a tensor of repeats adds them up, unless told its output_size.
  const auto sized_by_repeats = [](const torch::jit::Node* node) {
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (node->kind().toQualString() != std::string("aten::repeat_interleave") || schema == nullptr) return false;
    const c10::optional<int> repeats = schema->argumentIndexWithName("repeats");
    const c10::optional<int> output_size = schema->argumentIndexWithName("output_size");
    if (!repeats || !node->inputs()[*repeats]->type()->cast<c10::TensorType>()) return false;
    return !output_size || node->inputs()[*output_size]->mustBeNone();
  };
  static const std::set<std::string> sized = {
      "aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select", "aten::unique",
      "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive",
      "aten::bincount"};
  torch::jit::Graph& graph = walked_forward();
  std::vector<ScriptedOp> found;
  for_each_node(graph.block(), [&](torch::jit::Node* node) {
    const std::string kind = node->kind().toQualString();
    if (sized.count(kind) || (kind == "aten::where" && node->inputs().size() == 1) || sized_by_repeats(node)) {
      add_once(found, {kind, place_of(node)});
    }
  });
  return found;
}

std::vector<ScriptedOp> TorchScriptModel::host_copies() {
  // `x.cpu()`, and `x.to(device)` with the CPU as a constant ("cpu") or as torch.device("cpu").
  // A device known only when the forward runs (`other.device`) is not looked for.
  const auto is_cpu = [](const torch::jit::Value* value) {
    if (const c10::optional<c10::IValue> constant = torch::jit::toIValue(value); constant && constant->isDevice()) {
      return constant->toDevice().is_cpu();
    }
    if (value->node()->kind().toQualString() != std::string("aten::device") || value->node()->inputs().empty()) return false;
    const c10::optional<c10::IValue> name = torch::jit::toIValue(value->node()->inputs()[0]);
    return name && name->isString() && name->toStringRef().rfind("cpu", 0) == 0;
  };
  torch::jit::Graph& graph = walked_forward();
  std::vector<ScriptedOp> found;
  for_each_node(graph.block(), [&](torch::jit::Node* node) {
    const std::string kind = node->kind().toQualString();
    const bool to_cpu = (kind == "aten::to" || kind == "aten::_to_copy") &&
                        std::any_of(node->inputs().begin(), node->inputs().end(), is_cpu);
    if (kind == "aten::cpu" || to_cpu) add_once(found, {kind, place_of(node)});
  });
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
