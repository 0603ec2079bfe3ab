// defines: DeviceStepStart
//
// A training step's start done on the device, so that nothing runs on the host's behalf between
// two replays of a whole-step CUDA graph (runtime/step_graphs): the count of steps done advances
// by one, the learning rate the update reads is taken from a table of the run's schedule at the
// count it had, and the optimizer's step counts of the parameters the update steps advance. Each
// replay starts with it, as the graph's first node: a graph's second node starts about 11 us after
// its first however short the first is (docs/benchmarks.md, "what a graph's start costs"), so the
// work there is free, where the learning rate's write before each replay, and the step counts'
// increment before the update, each cost a launch on the step's path.
//
// On a GPU one kernel (CUDA source compiled once per process with NVRTC, compile/runtime/cuda_modules),
// a launch per 128 step counts past the first 128; elsewhere the same with ATen's ops.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace trainc {

class DeviceStepStart {
 public:
  // learning_rates[s]: the learning rate of the step that starts with s steps done, for every step
  // of the run (not empty; a count past the table's end reads its last entry). steps_done: the count
  // the next step starts from (a resumed run's step).
  DeviceStepStart(const std::vector<double>& learning_rates, int64_t steps_done, c10::Device device);

  // Writes the learning rate of the step at the count into `learning_rate` (0-dim float32), adds one
  // to the count and to each of `step_counts` (0-dim float32, the optimizer's), on the current stream.
  void start_step(const at::Tensor& learning_rate, const std::vector<at::Tensor>& step_counts);

  // Steps done, as started: a 0-dim int64 tensor on the device, which a step's start advances.
  const at::Tensor& steps_done() const { return steps_done_; }

 private:
  at::Tensor table_;       // float32 [steps], on the device
  at::Tensor steps_done_;  // int64, 0-dim, on the device
};

}  // namespace trainc
