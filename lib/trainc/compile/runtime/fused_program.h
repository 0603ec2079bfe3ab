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
// While a CUDA graph records the program, the steps its stream plan (passes/stream_plan) puts on a
// second stream are recorded there (compat/side_stream), and so are the column-sum finishes of
// kernels whose sums only the outputs are: the graph runs them beside the others.
// Outside a capture every step runs on the current stream, so an eager run launches what it did
// without the plan (its arena is as large: the plan's lifetimes hold there too) and a measured
// library choice is timed alone.
//
// With TRAINC_PROFILE_KERNELS=1 in the environment, each step's wall time is summed over runs and
// the busiest steps are printed to stderr when the program is destroyed (docs/debugging.md).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainc/compile/autotune/autotuner.h"
#include "trainc/compile/codegen/kernel_layout.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/memory_plan.h"
#include "trainc/compile/passes/stream_plan.h"
#include "trainc/compile/runtime/parameter_casts.h"
#include "trainc/compat/side_stream.h"

namespace trainc {

// Runs kernel `kernel` of the rendered program on `arguments` (its arguments' data pointers).
using KernelLauncher = std::function<void(std::size_t kernel, void* const* arguments, std::size_t count)>;

// A program's kernels compiled under several launch shapes (max-autotune on a GPU), per shape: its
// name, its launcher and, per kernel, the code that launcher runs for it (a kernel whose code two
// shapes share is measured once).
struct LaunchVariants {
  std::vector<std::string> names;
  std::vector<KernelLauncher> launchers;
  std::vector<std::vector<std::string>> code;
};

class FusedProgram {
 public:
  // `tuner`: null unless the mode measures candidates (max-autotune); shared by a run's programs.
  FusedProgram(ir::Graph graph, Schedule schedule, MemoryPlan plan, const codegen::RenderedProgram& rendered, KernelLauncher launcher,
               at::Device device, std::shared_ptr<Autotuner> tuner = nullptr, LaunchVariants launch_variants = {},
               StreamPlan streams = {});

  ~FusedProgram();
  FusedProgram(const FusedProgram&) = delete;
  FusedProgram& operator=(const FusedProgram&) = delete;

  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs);

  // Per generated kernel: the launch shape chosen for it (an index into the launch variants' names),
  // -1 for the default launch (no variants, one distinct code, or not run yet).
  const std::vector<int>& chosen_launch_shapes() const { return launch_shape_; }

 private:
  // What step `s` reads directly: an ATen call's inputs, a kernel's bases (views of them included).
  std::vector<ir::ValueId> step_inputs(std::size_t s) const;
  const at::Tensor& value(std::vector<at::Tensor>& values, ir::ValueId id) const;
  // The tensor a kernel stores value `id` into: its arena slot, or a fresh one outside the arena.
  at::Tensor planned(ir::ValueId id) const;
  // The launch shape (an index into launch_variants_) measured fastest for kernel k on these
  // arguments; -1: the default launcher.
  int choose_launch_shape(std::size_t k, const std::vector<void*>& pointers);

  ir::Graph graph_;
  Schedule schedule_;
  MemoryPlan plan_;
  KernelLauncher launcher_;
  at::Device device_;
  std::shared_ptr<Autotuner> tuner_;
  std::vector<std::string> library_variants_;        // per step: the ATen call's implementation ("": ATen's default)
  std::vector<bool> decided_;                        // per step: its library variant or launch shape is settled
  LaunchVariants launch_variants_;
  std::vector<int> launch_shape_;                    // per kernel: index into launch_variants_, -1: launcher_
  std::vector<std::vector<ir::ValueId>> arguments_;  // per kernel: bases read, then stores
  std::vector<int> reads_;                           // per kernel
  std::vector<std::vector<bool>> aligned_;           // per kernel, per argument: needs a 16-byte aligned pointer
  // Kernels with column sums (codegen::RenderedKernel::finish_outputs): per kernel, the values its
  // finish writes, the finish's launch index (-1: none), the floats of partial sums it needs and
  // where they start in the workspace, allocated on the first run, as the arena is. A finish whose
  // values only the program's outputs are (a backward's layer-norm weight gradients) runs on the
  // side stream while later kernels go on, and has a part of the workspace to itself; the others
  // run in line and share one part (each kernel and its finish run before the next kernel).
  std::vector<std::vector<ir::ValueId>> finish_outputs_;
  std::vector<int> finish_launch_;
  std::vector<int64_t> workspace_floats_;
  std::vector<int64_t> workspace_offset_;
  std::vector<bool> finish_on_side_;                 // per kernel
  int64_t workspace_total_floats_ = 0;
  at::Tensor workspace_;
  ParameterCasts parameter_casts_;                   // run before the first step
  std::vector<std::vector<ir::ValueId>> release_;    // per step: values no later step reads
  std::vector<at::Tensor> arena_;                    // per slot, allocated on the first run
  StreamPlan streams_;
  std::vector<int32_t> batch_ends_;                  // per step: the batch it completes on the side stream, -1: none
  std::vector<bool> computed_on_side_;               // per value
  bool large_casts_on_side_ = false;                 // parameter_casts_'s large ones go on the side stream
  int first_large_cast_reader_ = -1;                 // the first step that reads one, -1: none
  std::unique_ptr<SideStream> side_stream_;          // with a stream plan (side_stream on), on a GPU
  std::vector<std::string> step_labels_;             // per step, when profiling
  std::vector<double> step_seconds_;                 // per step, summed over runs, when profiling
};

}  // namespace trainc
