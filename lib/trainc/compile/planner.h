// defines: CompileOptions, CompilePlan, plan_step, dump_plan, explain_plan, CompileEvent, StepCompiler
//
// The compile planner end to end: capture -> import -> autodiff -> partition (plan_step), and the
// runtime side a training loop talks to (StepCompiler): one compiled step per input signature,
// compiled on first sight, up to a limit; a graph break or the limit makes that signature run
// eagerly, with a warning, unless the config asks for a full graph.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/autotune/autotuner.h"
#include "trainc/compile/backends/registry.h"
#include "trainc/compile/capture/capture.h"
#include "trainc/compile/import/import.h"
#include "trainc/compile/partition/partition.h"
#include "trainc/compile/runtime/compiled_step.h"
#include "trainc/compile/runtime/kernel_cache.h"

namespace trainc {

struct CompileOptions {
  std::string backend = "aot_eager";  // or "inductor"
  bool fullgraph = false;             // a graph break stops the run (exit 2) instead of running eagerly
  std::string dump_dir;               // when set: the graphs (and generated source) of every compile
  int recompile_limit = 8;
  CompilerSettings compiler;          // inductor: the C++ compiler and the kernel cache
  bool autotune = false;              // inductor, modes max-autotune*: measure candidates at a program's first run
};

struct CompilePlan {
  CapturedStep captured;
  ImportedGraph imported;
  JointGraph joint;        // the rest is empty when the import has graph breaks
  StepPrograms programs;
  bool complete() const { return imported.breaks.empty(); }
};

CompilePlan plan_step(Model& model, const LossFunction& loss_fn, const at::Tensor& inputs, const at::Tensor& targets);

// Writes <prefix>-traced.txt, -ir.txt, -joint.txt, -forward.txt and -backward.txt into `dir`.
void dump_plan(const CompilePlan& plan, const std::string& dir, const std::string& prefix);

// What `trainc explain` prints: captured ops, graph breaks, backend and mode (`backend`: the
// choice described, or why none can run), the planned kernels (`fused`: as inductor fuses them).
std::string explain_plan(const CompilePlan& plan, const std::string& backend, const std::vector<std::string>& warnings, bool fused = false);

// One line per graph break: "aten::cumsum (no IR entry) in module l"
std::string describe_breaks(const std::vector<GraphBreak>& breaks);

struct CompileEvent {
  std::string signature;
  std::string reason;   // "first step", "new input signature (compiled before: ...)"
  std::string outcome;  // "compiled", "graph break: running eagerly", "recompile limit: running eagerly", "autotuned"
  double seconds = 0.0;
  std::string detail;   // inductor: what was generated, compiled and found in the kernel cache
  int libraries_compiled = 0;
  int libraries_cached = 0;
};

class StepCompiler {
 public:
  StepCompiler(Model& model, LossFunction loss_fn, CompileOptions options, std::function<void(const CompileEvent&)> on_compile,
               std::function<void(const std::string&)> warn);

  // The micro-batch's loss (detached). Gradients times grad_scale are accumulated into .grad.
  at::Tensor run(const at::Tensor& inputs, const at::Tensor& targets, const GradScale& grad_scale);

  // Seconds spent compiling since the last call (the loop keeps them out of step times).
  double take_compile_seconds();
  double total_compile_seconds() const { return total_seconds_; }

 private:
  at::Tensor run_eagerly(const at::Tensor& inputs, const at::Tensor& targets, const GradScale& grad_scale);
  // After a run that measured or read choices: an "autotuned" event, its seconds counted as compile time.
  void report_tuning(const std::string& signature);

  Model& model_;
  std::vector<at::Tensor> model_tensors_;  // parameters then buffers: the step's leading inputs
  LossFunction loss_fn_;
  CompileOptions options_;
  std::function<void(const CompileEvent&)> on_compile_;
  std::function<void(const std::string&)> warn_;
  std::shared_ptr<Autotuner> tuner_;  // made at the first compile when options_.autotune
  std::map<std::string, std::shared_ptr<CompiledStep>> steps_;  // nullptr: this signature runs eagerly
  int compiles_ = 0;
  bool warned_limit_ = false;
  double pending_seconds_ = 0.0;
  double total_seconds_ = 0.0;
};

}  // namespace trainc
