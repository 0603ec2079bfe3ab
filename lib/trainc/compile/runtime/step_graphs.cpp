#include "trainc/compile/runtime/step_graphs.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "trainc/common/error.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/graph_memsets.h"
#include "trainc/compile/runtime/guards.h"
#include "trainc/compile/runtime/parameter_shadows.h"

namespace trainc {
namespace {

// The signature of the micro-batches once on `device` (they may still be in host memory).
std::string step_signature(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets, c10::Device device) {
  const std::string first = input_signature(inputs[0], targets[0], device);
  std::string signature = std::to_string(inputs.size()) + " micro-batch" + (inputs.size() == 1 ? "" : "es") + ": " + first;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const std::string other = input_signature(inputs[i], targets[i], device);
    if (other != first) signature += "; " + other;  // a shape that differs from the first (a partial last batch)
  }
  return signature;
}

// The tensors on `device`: those in (pinned) host memory copied there without waiting.
std::vector<at::Tensor> on_device(const std::vector<at::Tensor>& tensors, c10::Device device) {
  std::vector<at::Tensor> result;
  for (const at::Tensor& tensor : tensors) result.push_back(tensor.to(device, /*non_blocking=*/true));
  return result;
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> result;
  for (const at::Tensor& tensor : tensors) result.push_back(tensor.clone());
  return result;
}

// A host tensor's copy goes straight into its buffer: one copy a tensor, where moving the batch to
// the device first made two.
void copy_into(std::vector<at::Tensor>& buffers, const std::vector<at::Tensor>& values) {
  for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(values[i], /*non_blocking=*/true);
}

bool all_on_host(const std::vector<at::Tensor>& tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const at::Tensor& tensor) { return tensor.is_cpu(); });
}

}  // namespace

StepGraphs::StepGraphs(c10::Device device, std::vector<at::Tensor> parameters, StepPhases phases,
                       std::function<void(const GraphEvent&)> on_event, std::function<void(const std::string&)> warn, int max_graphs,
                       std::string without_graphs)
    : device_(device),
      parameters_(std::move(parameters)),
      phases_(std::move(phases)),
      on_event_(std::move(on_event)),
      warn_(std::move(warn)),
      max_graphs_(max_graphs),
      without_graphs_(std::move(without_graphs)) {}

void StepGraphs::clear_gradients() {
  for (at::Tensor& parameter : parameters_) parameter.mutable_grad() = at::Tensor();
}

void StepGraphs::use_gradients(const Entry& entry) {
  for (std::size_t i = 0; i < parameters_.size(); ++i) parameters_[i].mutable_grad() = entry.gradients[i];
}

StepResult StepGraphs::run(const std::vector<at::Tensor>& batch_inputs, const std::vector<at::Tensor>& batch_targets) {
  const std::string signature = step_signature(batch_inputs, batch_targets, device_);
  auto found = entries_.find(signature);
  if (found == entries_.end()) {
    if (static_cast<int>(entries_.size()) >= max_graphs_) {
      if (!warned_limit_) {
        warn_("CUDA graph limit: " + std::to_string(max_graphs_) + " input signatures captured; steps with new signatures (" +
              signature + ") run without a graph");
        on_event_({signature, "graph limit: running without a graph", 0.0});
        warned_limit_ = true;
      }
      return run_without_graph(on_device(batch_inputs, device_), on_device(batch_targets, device_));
    }
    const std::vector<at::Tensor> inputs = on_device(batch_inputs, device_), targets = on_device(batch_targets, device_);
    Entry& entry = entries_[signature];
    // The step's own stream of high priority over the side stream (switch stream_priorities): the
    // work the step waits on next gets freed SMs before the weight gradients beside it.
    const bool high_priority = optimization_enabled(Optimization::stream_priorities);
    entry.graph = std::make_unique<CudaGraph>(device_, high_priority);
    clear_gradients();
    StepResult result;
    if (two_graphs()) {
      entry.update = std::make_unique<CudaGraph>(device_, high_priority);
      entry.graph->run([&] { result.loss = start_and_gradients(inputs, targets); });
      if (std::optional<at::Tensor> skipped_norm = between_graphs()) {
        entries_.erase(signature);  // no update ran, so nothing a capture needs was made: warm up again
        result.grad_norm = *skipped_norm;
        return result;
      }
      entry.update->run([&] { result.grad_norm = phases_.update(); });
    } else {
      entry.graph->run([&] {
        result.loss = start_and_gradients(inputs, targets);
        result.grad_norm = phases_.update();
      });
    }
    for (const at::Tensor& parameter : parameters_) {
      if (parameter.grad().defined()) entry.stepped.push_back(parameter);
    }
    on_event_({signature, "warm-up", 0.0});
    return result;
  }
  Entry& entry = found->second;
  // The programs read the bf16 shadows the optimizer keeps uncast, as captured (a capture records
  // a cast only for a shadow made during it): a parameter written outside the step since (a
  // checkpoint loaded into it) has its shadow cast here, outside the graph.
  ParameterShadows& shadows = ParameterShadows::instance();
  shadows.refresh_stale();
  if (!entry.captured) {
    const auto start = std::chrono::steady_clock::now();
    entry.inputs = clones(on_device(batch_inputs, device_));
    entry.targets = clones(on_device(batch_targets, device_));
    clear_gradients();
    // Captured work is recorded, not run: the update graph reads the gradient tensors the first
    // graph's capture allocated, which every replay of it overwrites in place. The libraries' small
    // memsets become kernels before instantiation (runtime/graph_memsets; switch graph_memsets).
    std::function<void(void*)> edit;
    if (optimization_enabled(Optimization::graph_memsets)) {
      edit = [this](void* graph) {
        try {
          memset_nodes_to_kernels(graph);
        } catch (const std::exception& error) {  // the graph is left correct, with the memsets not yet replaced
          warn_(std::string("CUDA graph: the memset nodes stay memsets (") + error.what() + ")");
        }
      };
    }
    // Past the gradients, nothing reads the input buffers: the next step's batch may be copied in
    // while this one's update runs. The step's start is the graph's first node, the loss's tracking
    // a branch of the graph with the update, which nothing after it waits for (with an exchange, a
    // branch at the end of the gradients' graph would hold the exchange back).
    const auto gradients = [&] {
      if (phases_.start) phases_.start(true, entry.stepped);
      entry.outputs.loss = phases_.gradients(entry.inputs, entry.targets);
      entry.graph->mark_inputs_read();
    };
    const auto update = [&](CudaGraph& graph) {
      if (phases_.track) graph.beside([&] { phases_.track(entry.outputs.loss); });
      entry.outputs.grad_norm = phases_.update();
    };
    try {
      if (entry.update) {
        entry.graph->capture(gradients, edit);
        entry.update->capture([&] { update(*entry.update); }, edit);
      } else {
        entry.graph->capture(
            [&] {
              gradients();
              update(*entry.graph);
            },
            edit);
      }
    } catch (const std::logic_error&) {
      throw;  // trainc's own check (TRAINC_CHECK): a bug, reported as one
    } catch (const c10::OutOfMemoryError&) {
      throw;  // the capture's memory pool did not fit: reported as out of memory, not as a wait
    } catch (const std::exception& error) {
      // The signature's warm-up ran the same work, so what failed is the capture: most often a wait
      // for the GPU inside the step. (trainc's refusals of a model, the no-gradient check among
      // them, fire in the warm-up, outside this catch, and keep their own words.) The model's own
      // errors come wrapped (TorchScriptModel), ATen's with a backtrace: the first line says it.
      const c10::Error* aten = dynamic_cast<const c10::Error*>(&error);
      const std::string what = aten != nullptr ? aten->what_without_backtrace() : error.what();
      throw UserError("CUDA graph: the step could not be captured (" + signature + "): " + what.substr(0, what.find('\n')) +
                          ". A step that waits for the GPU (a copy to the host, a tensor's value read, an op whose output size "
                          "depends on the data) cannot be captured; to train this model, set " + without_graphs_,
                      kExitFailure);
    }
    for (const at::Tensor& parameter : parameters_) entry.gradients.push_back(parameter.grad());
    entry.captured = true;
    entry.copies_beside = optimization_enabled(Optimization::input_copies);
    entry.shadow_generation = shadows.generation();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pending_seconds_ += seconds;
    on_event_({signature, "captured", seconds});
  } else {
    const auto copy = [&] {
      copy_into(entry.inputs, batch_inputs);
      copy_into(entry.targets, batch_targets);
    };
    // From host memory on the copy stream, once the last replay has read the buffers; a batch on
    // the device is copied in line, after the work that made it.
    if (entry.copies_beside && all_on_host(batch_inputs) && all_on_host(batch_targets)) {
      entry.graph->copy_inputs(copy);
    } else {
      copy();
    }
    use_gradients(entry);
  }
  entry.graph->replay();
  if (entry.update) {
    if (std::optional<at::Tensor> skipped_norm = between_graphs()) {
      return {entry.outputs.loss, *skipped_norm};  // the update's graph not replayed: no parameter changed
    }
    entry.update->replay();
  }
  // Shadows made after this graph's capture are not written by its update, which has now changed
  // their parameters without a version the host sees: all are cast again before they are read.
  if (entry.shadow_generation != shadows.generation()) shadows.mark_all_stale();
  return entry.outputs;
}

std::optional<at::Tensor> StepGraphs::between_graphs() {
  if (phases_.exchange) phases_.exchange();
  return phases_.skip ? phases_.skip() : std::nullopt;
}

at::Tensor StepGraphs::start_and_gradients(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets) {
  if (phases_.start) phases_.start(false, {});
  at::Tensor loss = phases_.gradients(inputs, targets);
  if (phases_.track) phases_.track(loss);
  return loss;
}

StepResult StepGraphs::run_without_graph(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets) {
  clear_gradients();
  StepResult result;
  result.loss = start_and_gradients(inputs, targets);
  if (std::optional<at::Tensor> skipped_norm = between_graphs()) {
    result.grad_norm = *skipped_norm;
    return result;
  }
  result.grad_norm = phases_.update();
  return result;
}

double StepGraphs::take_capture_seconds() {
  const double seconds = pending_seconds_;
  pending_seconds_ = 0.0;
  return seconds;
}

}  // namespace trainc
