// defines: StepResult, StepPhases, GraphEvent, StepGraphs
//
// Whole-step CUDA graphs (torch_compile_mode reduce-overhead, backend cudagraphs): the training
// step (forward, backward, gradient clipping and the optimizer update) is recorded once per input
// signature and replayed, so a step costs one graph launch instead of hundreds of kernel launches.
// A step with an exchange between its gradients and its update (data-parallel training: the
// gradient all-reduce) is two graphs per signature, and the exchange runs between their replays,
// outside any graph: the collectives stay ordinary, so a rank that dies is detected as in an
// eager step, and no collective is recorded under a process group's feet. So is a step whose
// update the host may skip (fp16), which decides between the two replays.
//
// Per signature (the micro-batches' shapes, dtypes and device):
//   first step   a warm-up, run normally on the graph's side stream. A capture records work
//                without doing it, so whatever must exist before it is made here: the compiled
//                programs, the optimizer's state, library handles and workspaces.
//   second step  the batch is copied into static input buffers, the step is captured, then replayed.
//   later steps  the batch is copied into the buffers and the graph replayed.
// A batch may be handed in on the device or in pinned host memory; from host memory, a replay's
// copies go straight into the buffers, on a copy stream of their own: each replay marks where its
// gradients are done (nothing reads the inputs after that), and the next batch's copies wait for
// that mark only, so they run while the previous replay's update does, not between two replays.
// Gradients are set to none before a warm-up and before a capture, so the captured backward
// writes fresh gradients at every replay: that is the zeroing. Anything else that changes from
// step to step (the learning rate) must live in device tensors, written before run() or by the
// step's own start (StepPhases::start), which a graph records as its first node.
// Past `max_graphs` signatures, new ones run without a graph, with one warning. A capture that
// fails (a forward that waits for the GPU, which a capture cannot record, where the Model's lists
// of such ops did not show it: a boolean mask's index) ends the run with its cause: going on
// would leave the failed capture's memory pool held and the allocator's capture bookkeeping as the
// failure left it.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainc/compat/cuda_graph.h"

namespace trainc {

struct StepResult {
  at::Tensor loss;       // the step's loss (mean over micro-batches), a 0-dim device tensor
  at::Tensor grad_norm;  // the gradient norm before clipping
};

// The phases of one training step over micro-batches (inputs[i], targets[i]).
struct StepPhases {
  // Forward and backward of every micro-batch, gradients starting from none: the mean loss.
  std::function<at::Tensor(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets)> gradients;
  // Optional: what happens to the gradients between the two (eager work on the current stream).
  std::function<void()> exchange;
  // Optional, after the exchange: whether this step's update is skipped (fp16's overflowed
  // gradients, which the host learns of here, between the two graphs). A skipped step's result
  // carries the norm `skip` returns; nothing, and the update runs. A signature whose warm-up was
  // skipped warms up again at its next step: the update's warm-up makes what its capture needs.
  std::function<std::optional<at::Tensor>()> skip;
  // Clipping and the optimizer update: the gradient norm before clipping.
  std::function<at::Tensor()> update;
  // Optional: the loop's bookkeeping of a step, done by the step itself so that a replay needs no
  // work on the host's behalf before or after it (train/device_step_start). `start` comes first:
  // in a capture (`captured` true) with the parameters the captured update steps (those the
  // signature's warm-up gave gradients), whose step counts it advances; elsewhere with none, as the
  // update advances them.
  std::function<void(bool captured, const std::vector<at::Tensor>& stepped)> start;
  // `track(loss)` comes after the gradients, with their loss; in a graph on a branch of its own
  // beside the update.
  std::function<void(const at::Tensor& loss)> track;
};

struct GraphEvent {
  std::string signature;
  std::string outcome;  // "warm-up", "captured", "graph limit: running without a graph"
  double seconds = 0.0;
};

class StepGraphs {
 public:
  // `without_graphs`: the setting a failed capture's error suggests ("torch_compile_mode: default").
  StepGraphs(c10::Device device, std::vector<at::Tensor> parameters, StepPhases phases,
             std::function<void(const GraphEvent&)> on_event, std::function<void(const std::string&)> warn, int max_graphs = 8,
             std::string without_graphs = "a setting without CUDA graphs");

  // A replayed step's results are the graph's output buffers: the next replay of the same
  // signature overwrites them.
  StepResult run(const std::vector<at::Tensor>& batch_inputs, const std::vector<at::Tensor>& batch_targets);

  // Seconds spent capturing since the last call (kept out of step times, like compile time).
  double take_capture_seconds();

 private:
  struct Entry {
    std::unique_ptr<CudaGraph> graph;   // the whole step, or its gradients when there are two graphs
    std::unique_ptr<CudaGraph> update;  // the update, when there are two graphs
    bool captured = false;
    bool copies_beside = false;     // input_copies, decided at capture: host batches copied on the copy stream
    int64_t shadow_generation = 0;  // ParameterShadows::generation() at capture
    std::vector<at::Tensor> inputs, targets;  // static buffers the graph reads
    std::vector<at::Tensor> gradients;        // the .grad tensors the captured backward writes
    std::vector<at::Tensor> stepped;          // the parameters the warm-up gave gradients
    StepResult outputs;                        // buffers the graph writes
  };
  // A step with an exchange or a skip between its gradients and its update: two graphs.
  bool two_graphs() const { return static_cast<bool>(phases_.exchange) || static_cast<bool>(phases_.skip); }
  void clear_gradients();
  // Points each parameter's .grad at the tensors this entry's graphs write and read, so that work
  // outside them (the exchange) sees this signature's gradients, not another graph's.
  void use_gradients(const Entry& entry);
  StepResult run_without_graph(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets);
  // What runs between the gradients and the update, outside any graph: the exchange, then the
  // skip's decision. The norm to report for a step whose update is skipped, or nothing.
  std::optional<at::Tensor> between_graphs();
  // The gradients phase between the step's start and its loss's tracking, outside a capture.
  at::Tensor start_and_gradients(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& targets);

  c10::Device device_;
  std::vector<at::Tensor> parameters_;
  StepPhases phases_;
  std::function<void(const GraphEvent&)> on_event_;
  std::function<void(const std::string&)> warn_;
  int max_graphs_;
  std::string without_graphs_;
  std::map<std::string, Entry> entries_;
  bool warned_limit_ = false;
  double pending_seconds_ = 0.0;
};

}  // namespace trainc
