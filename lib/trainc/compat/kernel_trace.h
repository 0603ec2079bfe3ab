// defines: KernelTrace
//
// A profiler trace of a window of training steps: every ATen call on the CPU and, on a GPU, every
// kernel and copy with its duration, saved as a Chrome trace (JSON, for chrome://tracing or
// Perfetto; scripts/bench/trace_summary.py totals the kernels). Unlike TRAINC_PROFILE_KERNELS,
// nothing is synchronized between steps, so the trace shows the step as it runs.
//
//   TRAINC_PROFILE_TRACE=<file.json>        where to save the trace (unset: no trace)
//   TRAINC_PROFILE_TRACE_STEPS=<first>:<n>  steps first .. first+n-1, counted from 1 (default 11:3)
// A data-parallel run traces rank 0 only.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

namespace trainc {

class KernelTrace {
 public:
  // The trace the environment asks for, or nullptr. A malformed window is a UserError naming the
  // variable.
  static std::unique_ptr<KernelTrace> from_environment(c10::Device device);

  // Around each step, with its number counted from 1: starts the profiler at the window's first
  // step and saves the trace after its last one.
  void before_step(int64_t step);
  void after_step(int64_t step);
  // After the last step: saves what was traced when the run ended inside the window.
  void finish();

  KernelTrace(std::string path, int64_t first, int64_t count, c10::Device device);

 private:
  std::string path_;
  int64_t first_;
  int64_t last_;
  c10::Device device_;
  bool active_ = false;
};

}  // namespace trainc
