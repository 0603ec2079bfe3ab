#include "trainc/compile/capture/capture.h"

#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "trainc/models/model.h"

namespace trainc {
namespace {

// Puts the default generators of the CPU and the model's device back as they were.
class GeneratorRestore {
 public:
  explicit GeneratorRestore(at::Device device) {
    save(at::Device(at::kCPU));
    if (!device.is_cpu()) save(device);
  }
  ~GeneratorRestore() {
    for (auto& [generator, state] : saved_) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
  }

 private:
  void save(at::Device device) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved_.emplace_back(generator, generator.get_state());
  }
  std::vector<std::pair<at::Generator, at::Tensor>> saved_;
};

}  // namespace

std::vector<at::Tensor> model_tensors(Model& model) {
  std::vector<at::Tensor> tensors;
  for (auto& [name, parameter] : model.named_parameters()) tensors.push_back(parameter);
  for (auto& [name, buffer] : model.named_buffers()) tensors.push_back(buffer);
  return tensors;
}

std::vector<at::Tensor> step_tensors(Model& model, const at::Tensor& inputs, const at::Tensor& targets) {
  std::vector<at::Tensor> tensors = model_tensors(model);
  tensors.push_back(inputs);
  tensors.push_back(targets);
  return tensors;
}

std::string no_gradient_path_message(const std::string& model) {
  return "model: the loss of " + model + " depends on none of the parameters being trained (does forward detach its logits, "
         "or compute them without the parameters?); expected logits computed from them";
}

CapturedStep capture_function(std::vector<StepInput> inputs, const std::vector<at::Tensor>& tensors,
                              const std::function<at::Tensor()>& fn) {
  CapturedStep captured;
  captured.inputs = std::move(inputs);
  torch::jit::Stack stack(tensors.begin(), tensors.end());
  {
    GeneratorRestore restore(tensors.empty() ? at::Device(at::kCPU) : tensors.front().device());
    // The trace needs the ops, not their autograd history.
    c10::NoGradGuard no_grad;
    std::function<torch::jit::Stack(torch::jit::Stack)> traced = [&](torch::jit::Stack) {
      torch::jit::Stack out;
      out.emplace_back(fn());
      return out;
    };
    std::function<std::string(const at::Tensor&)> no_names = [](const at::Tensor&) { return std::string(); };
    captured.graph = torch::jit::tracer::trace(std::move(stack), traced, no_names, /*strict=*/false, /*force_outplace=*/false).first->graph;
  }
  // A TorchScript model's methods may be recorded as calls; inline them into one graph.
  torch::jit::Inline(*captured.graph);
  return captured;
}

CapturedStep capture_loss(Model& model, const LossFunction& loss_fn, const at::Tensor& inputs, const at::Tensor& targets) {
  std::vector<StepInput> described;
  for (auto& [name, parameter] : model.named_parameters()) {
    described.push_back({name, StepInputKind::parameter, parameter.requires_grad()});
  }
  std::vector<at::Tensor> buffer_values;
  for (auto& [name, buffer] : model.named_buffers()) {
    described.push_back({name, StepInputKind::buffer, false});
    buffer_values.push_back(buffer.clone());
  }
  described.push_back({"inputs", StepInputKind::batch, false});
  described.push_back({"targets", StepInputKind::batch, false});
  CapturedStep captured = capture_function(std::move(described), step_tensors(model, inputs, targets),
                                           [&] { return loss_fn(inputs, targets); });
  // Tracing ran the model once: put the buffers (batch-norm statistics) back as they were.
  c10::NoGradGuard no_grad;
  std::size_t index = 0;
  for (auto& [name, buffer] : model.named_buffers()) buffer.copy_(buffer_values[index++]);
  return captured;
}

}  // namespace trainc
