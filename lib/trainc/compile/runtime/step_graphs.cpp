#include "trainc/compile/runtime/step_graphs.h"

#include <chrono>

#include "trainc/compile/runtime/guards.h"

namespace trainc {
namespace {

std::string step_signature(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets) {
  const std::string first = input_signature(inputs[0], targets[0]);
  std::string signature = std::to_string(inputs.size()) + " micro-batch" + (inputs.size() == 1 ? "" : "es") + ": " + first;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const std::string other = input_signature(inputs[i], targets[i]);
    if (other != first) signature += "; " + other;  // a shape that differs from the first (a partial last batch)
  }
  return signature;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> result;
  for (const at::Tensor& tensor : tensors) result.push_back(tensor.clone());
  return result;
}

void copy_into(std::vector<at::Tensor>& buffers, const std::vector<at::Tensor>& values) {
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(values[i], /*non_blocking=*/true);
}

}  // namespace

StepGraphs::StepGraphs(c10::Device device, std::vector<at::Tensor> parameters, StepBody body,
                       std::function<void(const GraphEvent&)> on_event, std::function<void(const std::string&)> warn, int max_graphs)
    : device_(device),
      parameters_(std::move(parameters)),
      body_(std::move(body)),
      on_event_(std::move(on_event)),
      warn_(std::move(warn)),
      max_graphs_(max_graphs) {}

void StepGraphs::clear_gradients() {
  for (at::Tensor& parameter : parameters_) parameter.mutable_grad() = at::Tensor();
}

StepResult StepGraphs::run(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets) {
  const std::string signature = step_signature(inputs, targets);
  auto found = entries_.find(signature);
  if (found == entries_.end()) {
    if (static_cast<int>(entries_.size()) >= max_graphs_) {
      if (!warned_limit_) {
        warn_("CUDA graph limit: " + std::to_string(max_graphs_) + " input signatures captured; steps with new signatures (" +
              signature + ") run without a graph");
        on_event_({signature, "graph limit: running without a graph", 0.0});
        warned_limit_ = true;
      }
      clear_gradients();
      return body_(inputs, targets);
    }
    Entry& entry = entries_[signature];
    entry.graph = std::make_unique<CudaGraph>(device_);
    clear_gradients();
    StepResult result;
    entry.graph->run([&] { result = body_(inputs, targets); });
    on_event_({signature, "warm-up", 0.0});
    return result;
  }
  Entry& entry = found->second;
  if (!entry.captured) {
    const auto start = std::chrono::steady_clock::now();
    entry.inputs = clones(inputs);
    entry.targets = clones(targets);
    clear_gradients();
    entry.graph->capture([&] { entry.outputs = body_(entry.inputs, entry.targets); });
    entry.captured = true;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pending_seconds_ += seconds;
    on_event_({signature, "captured", seconds});
  } else {
    copy_into(entry.inputs, inputs);
    copy_into(entry.targets, targets);
  }
  entry.graph->replay();
  return entry.outputs;
}

double StepGraphs::take_capture_seconds() {
  const double seconds = pending_seconds_;
  pending_seconds_ = 0.0;
  return seconds;
}

}  // namespace trainc
