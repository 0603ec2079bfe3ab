// defines: StepInputKind, StepInput, CapturedStep, LossFunction, no_gradient_path_message,
//          capture_loss, capture_function, model_tensors, step_tensors
//
// Capture, the planner's first stage: trace `loss = loss_fn(model(inputs), targets)` with the
// TorchScript tracer into one aten-level graph whose inputs are the model's parameters, its
// buffers and the batch, in that order. The graph is then a pure function of (parameters,
// buffers, batch): nothing the model holds is baked in as a constant.
//
// Tracing runs the model once. The generators' states and the buffers (batch-norm statistics) are
// restored afterwards, so capturing a step does not change what the run computes.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
}

namespace trainc {

class Model;

enum class StepInputKind { parameter, buffer, batch };

struct StepInput {
  std::string name;  // parameter or buffer name; "inputs" and "targets" for the batch
  StepInputKind kind = StepInputKind::batch;
  bool requires_grad = false;  // parameters that train
};

struct CapturedStep {
  std::shared_ptr<torch::jit::Graph> graph;  // one output: the loss
  std::vector<StepInput> inputs;             // the graph's inputs, in order
};

// The loss of one micro-batch, with whatever autocast the run uses set up inside.
using LossFunction = std::function<at::Tensor(const at::Tensor& inputs, const at::Tensor& targets)>;

// The error for a loss that no trained parameter reaches (`model`: Model::describe()), eager or
// compiled: a forward that detaches its logits would otherwise train nothing.
std::string no_gradient_path_message(const std::string& model);

CapturedStep capture_loss(Model& model, const LossFunction& loss_fn, const at::Tensor& inputs, const at::Tensor& targets);

// The general form: traces `fn`, which computes a scalar from `tensors` (described by `inputs`,
// one to one). The generators' states are restored afterwards; buffers are the caller's to keep.
CapturedStep capture_function(std::vector<StepInput> inputs, const std::vector<at::Tensor>& tensors,
                              const std::function<at::Tensor()>& fn);

// The model's parameters, then its buffers: the leading inputs of a captured step.
std::vector<at::Tensor> model_tensors(Model& model);
// The tensors to feed a captured (or compiled) step, in the order of CapturedStep::inputs.
std::vector<at::Tensor> step_tensors(Model& model, const at::Tensor& inputs, const at::Tensor& targets);

}  // namespace trainc
