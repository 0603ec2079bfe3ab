// defines: FusedProgram
//
// The inductor backend's executor for one program, on the CPU or a GPU: its schedule runs step by
// step, fused kernels through a launcher (the generated library's functions on the CPU, the
// loaded module's kernels on a GPU) and the remaining nodes (matmul, convolution, random draws,
// ...) through ATen. Values a kernel stores live in the program's
// arena as the memory plan assigns them; the arena is allocated on the first run and reused by
// every later one. Views, constants and iota become tensors only when an ATen call or an output
// needs them: kernels read them in place.
//
// With TRAINC_PROFILE_KERNELS=1 in the environment, each step's wall time is summed over runs and
// the busiest steps are printed to stderr when the program is destroyed (docs/debugging.md).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainc/compile/codegen/kernel_layout.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/memory_plan.h"

namespace trainc {

// Runs kernel `kernel` of the rendered program on `arguments` (its arguments' data pointers).
using KernelLauncher = std::function<void(std::size_t kernel, void* const* arguments, std::size_t count)>;

class FusedProgram {
 public:
  FusedProgram(ir::Graph graph, Schedule schedule, MemoryPlan plan, const codegen::RenderedProgram& rendered, KernelLauncher launcher,
               at::Device device);

  ~FusedProgram();
  FusedProgram(const FusedProgram&) = delete;
  FusedProgram& operator=(const FusedProgram&) = delete;

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs);

 private:
  const at::Tensor& value(std::vector<at::Tensor>& values, ir::ValueId id) const;

  ir::Graph graph_;
  Schedule schedule_;
  MemoryPlan plan_;
  KernelLauncher launcher_;
  at::Device device_;
  std::vector<std::vector<ir::ValueId>> arguments_;  // per kernel: bases read, then stores
  std::vector<int> reads_;                           // per kernel
  std::vector<std::vector<bool>> aligned_;           // per kernel, per argument: needs a 16-byte aligned pointer
  std::vector<std::vector<ir::ValueId>> release_;    // per step: values no later step reads
  std::vector<at::Tensor> arena_;                    // per slot, allocated on the first run
  std::vector<std::string> step_labels_;             // per step, when profiling
  std::vector<double> step_seconds_;                 // per step, summed over runs, when profiling
};

}  // namespace trainc
