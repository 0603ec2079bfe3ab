// defines: StepResult, StepBody, GraphEvent, StepGraphs
//
// Whole-step CUDA graphs (torch_compile_mode reduce-overhead, backend cudagraphs): the training
// step (forward, backward, gradient clipping and the optimizer update) is recorded once per input
// signature and replayed, so a step costs one graph launch instead of hundreds of kernel launches.
//
// Per signature (the micro-batches' shapes, dtypes and device):
//   first step   a warm-up, run normally on the graph's side stream. A capture records work
//                without doing it, so whatever must exist before it is made here: the compiled
//                programs, the optimizer's state, library handles and workspaces.
//   second step  the batch is copied into static input buffers, the step is captured, then replayed.
//   later steps  the batch is copied into the buffers and the graph replayed.
// Gradients are set to none before a warm-up and before a capture, so the captured backward
// writes fresh gradients at every replay: that is the zeroing. Anything else that changes from
// step to step (the learning rate) must live in device tensors written before run().
// Past `max_graphs` signatures, new ones run without a graph, with one warning.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trainc/compat/cuda_graph.h"

namespace trainc {

struct StepResult {
  at::Tensor loss;       // the step's loss (mean over micro-batches), a 0-dim device tensor
  at::Tensor grad_norm;  // the gradient norm before clipping
};

// One whole training step over micro-batches (inputs[i], targets[i]), gradients starting from none.
using StepBody = std::function<StepResult(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets)>;

struct GraphEvent {
  std::string signature;
  std::string outcome;  // "warm-up", "captured", "graph limit: running without a graph"
  double seconds = 0.0;
};

class StepGraphs {
 public:
  StepGraphs(c10::Device device, std::vector<at::Tensor> parameters, StepBody body, std::function<void(const GraphEvent&)> on_event,
             std::function<void(const std::string&)> warn, int max_graphs = 8);

  // A replayed step's results are the graph's output buffers: the next replay of the same
  // signature overwrites them.
  StepResult run(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets);

  // Seconds spent capturing since the last call (kept out of step times, like compile time).
  double take_capture_seconds();

 private:
  struct Entry {
    std::unique_ptr<CudaGraph> graph;
    bool captured = false;
    std::vector<at::Tensor> inputs, targets;  // static buffers the graph reads
    StepResult outputs;                        // buffers the graph writes
  };
  void clear_gradients();

  c10::Device device_;
  std::vector<at::Tensor> parameters_;
  StepBody body_;
  std::function<void(const GraphEvent&)> on_event_;
  std::function<void(const std::string&)> warn_;
  int max_graphs_;
  std::map<std::string, Entry> entries_;
  bool warned_limit_ = false;
  double pending_seconds_ = 0.0;
};

}  // namespace trainc
