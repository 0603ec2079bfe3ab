#include "trainc/compile/runtime/compiled_step.h"

#include <c10/core/GradMode.h>

#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/runtime/aten_executor.h"

namespace trainc {
namespace {

bool shares_storage(const at::Tensor& tensor, const std::vector<at::Tensor>& others) {
  for (const at::Tensor& other : others) {
    if (other.defined() && tensor.is_alias_of(other)) return true;
  }
  return false;
}

}  // namespace

CompiledStep::CompiledStep(StepPrograms programs, std::vector<int> updated_buffers, std::vector<int> gradient_inputs,
                           ProgramRunner forward, ProgramRunner backward)
    : programs_(std::move(programs)),
      updated_buffers_(std::move(updated_buffers)),
      gradient_inputs_(std::move(gradient_inputs)),
      forward_(std::move(forward)),
      backward_(std::move(backward)) {
  const auto through_aten = [](const ir::Graph& graph) {
    return [&graph](std::vector<at::Tensor> inputs, at::Device device) { return ir::execute_with_aten(graph, std::move(inputs), device); };
  };
  if (!forward_) forward_ = through_aten(programs_.forward);
  if (!backward_) backward_ = through_aten(programs_.backward);
}

at::Tensor CompiledStep::run(const std::vector<at::Tensor>& tensors, const GradScale& grad_scale) const {
  c10::NoGradGuard no_grad;  // the programs are the autograd: ATen must not record them again
  const at::Device device = tensors.front().device();
  std::vector<at::Tensor> forward = forward_(tensors, device);
  const at::Tensor loss = forward[0];

  // The saved values are handed over, not shared: the backward frees each after its last use, as
  // eager autograd frees what a node saved once the node has run.
  std::vector<at::Tensor> backward_inputs;
  for (int index : programs_.backward_step_inputs) backward_inputs.push_back(tensors[static_cast<std::size_t>(index)]);
  for (std::size_t i = static_cast<std::size_t>(programs_.forward_results); i < forward.size(); ++i) {
    backward_inputs.push_back(std::move(forward[i]));
  }
  const at::Tensor seed_tensor = grad_scale.tensor.defined() ? grad_scale.tensor.to(loss.options()) : seed(grad_scale.value, loss.options());
  backward_inputs.push_back(seed_tensor);
  const std::vector<at::Tensor> grads = backward_(std::move(backward_inputs), device);

  for (std::size_t k = 0; k < grads.size(); ++k) {
    at::Tensor parameter = tensors[static_cast<std::size_t>(gradient_inputs_[k])];
    at::Tensor& grad = parameter.mutable_grad();
    if (grad.defined()) {
      grad.add_(grads[k]);
    } else {
      // .grad is the parameter's own from here on: never a view (optimizers detach it in place)
      // and never sharing storage with a step input, a forward result or the kept seed (a loss
      // that adds a scalar parameter passes the seed through as its gradient). (The saved values were
      // handed to the backward and are released by now: a gradient that is one of them, or a
      // view of one, keeps that memory alone.)
      const bool owned = grads[k].is_contiguous() && !grads[k].is_view() && !shares_storage(grads[k], tensors) &&
                         !shares_storage(grads[k], forward) && !grads[k].is_alias_of(seed_tensor);
      grad = owned ? grads[k] : grads[k].clone(at::MemoryFormat::Contiguous);
    }
  }
  for (std::size_t k = 0; k < updated_buffers_.size(); ++k) {
    tensors[static_cast<std::size_t>(updated_buffers_[k])].copy_(forward[1 + k]);
  }
  return loss;
}

at::Tensor CompiledStep::seed(double value, const at::TensorOptions& options) const {
  for (const auto& [made_for, tensor] : seeds_) {
    if (made_for == value && tensor.device() == options.device() && tensor.dtype() == options.dtype()) return tensor;
  }
  // Kept only when made outside a capture (a capture would leave it in its graph's memory, filled
  // only by its replays), and only the first few: a loss scale that changes makes new values.
  at::Tensor made = at::full({}, value, options);
  const bool capturing = options.device().is_cuda() && cuda_stream_capturing();
  if (!capturing && seeds_.size() < kKeptSeeds) seeds_.emplace_back(value, made);
  return made;
}

}  // namespace trainc
