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
// The table is a ring of `window` steps' rates, not the whole run's: a run of a billion steps would
// otherwise compute and hold a billion of them. The host keeps it ahead of the steps it queues
// (before_step): once the steps it queues reach the middle of the window, the half behind them is
// refilled with the rates of the next half, by one copy on the current stream, which every step's
// start (a replay, a warm-up on the graph's stream) is ordered with.
//
// On a GPU one kernel (CUDA source compiled once per process with NVRTC, compile/runtime/cuda_modules),
// a launch per 128 step counts past the first 128; elsewhere the same with ATen's ops.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace trainc {

class DeviceStepStart {
 public:
  // The learning rate of the step that starts with `steps_done` steps done.
  using LearningRateAt = std::function<double(int64_t steps_done)>;
  static constexpr int64_t kDefaultWindow = 4096;  // 16 KB on the device; one refill per 2,048 steps

  // steps_done: the count the next step starts from (a resumed run's step). window: a power of two,
  // at least 2.
  DeviceStepStart(LearningRateAt learning_rate_at, int64_t steps_done, c10::Device device, int64_t window = kDefaultWindow);

  // Before the step that starts with `steps_done` steps done is queued, outside a capture: makes
  // sure the table holds its rate and those of the steps after it to the window's next half. The
  // count never goes back (a step before the last one asked for is refused), and every step queued
  // since the last call was started once.
  void before_step(int64_t steps_done);

  // Writes the learning rate of the step at the count into `learning_rate` (0-dim float32), adds one
  // to the count and to each of `step_counts` (0-dim float32, the optimizer's), on the current stream.
  void start_step(const at::Tensor& learning_rate, const std::vector<at::Tensor>& step_counts);

  // Steps done, as started: a 0-dim int64 tensor on the device, which a step's start advances.
  const at::Tensor& steps_done() const { return steps_done_; }

 private:
  // The first step the table holds: it holds [held_from(), held_from() + window_), at slot step % window_,
  // from the start of the half of the window the last step asked for is in.
  int64_t held_from() const;
  // Writes the rates of steps [first, first + half) into their slots; `first` a multiple of half.
  void fill_half(int64_t first);

  LearningRateAt learning_rate_at_;
  int64_t window_;
  int64_t last_step_;      // the step before_step was last asked for (at first, the count it started from)
  at::Tensor table_;       // float32 [window_], on the device
  at::Tensor steps_done_;  // int64, 0-dim, on the device
};

}  // namespace trainc
