// defines: InductorReport, compile_inductor_step, build_fused_program, describe_fused_program
//
// The inductor backend, end to end for one compiled step on the CPU or a GPU: each program
// (forward and backward) is rewritten (passes/slice_grads_to_concat, transpose_products, sink_pointwise), scheduled into
// fused kernels (passes/fusion), given a memory plan
// (passes/memory_plan), rendered as C++ (codegen/cpp_kernels) and built into a shared library
// through the kernel cache (runtime/kernel_cache), or for a GPU rendered as CUDA
// (codegen/cuda_kernels) and compiled with NVRTC (runtime/cuda_modules); the two programs compile
// in parallel. The step then runs on runtime/fused_program.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainc/compile/partition/partition.h"
#include "trainc/compile/runtime/compiled_step.h"
#include "trainc/compile/runtime/fused_program.h"
#include "trainc/compile/runtime/kernel_cache.h"

namespace trainc {

struct InductorReport {
  int kernels = 0;             // generated kernels, both programs
  int fused_nodes = 0;         // nodes they compute
  int aten_calls = 0;          // nodes left to ATen
  int libraries_compiled = 0;  // built by the C++ compiler in this compile
  int libraries_cached = 0;    // loaded from the kernel cache
  int64_t arena_bytes = 0;     // memory plan: the arenas
  int64_t planned_bytes = 0;   // what the planned values take unshared
  int side_stream_steps = 0;   // ATen calls a CUDA graph records on a second stream (passes/stream_plan)
  std::string summary() const;
};

// `dump_prefix`: when set, the generated sources are written to <dump_prefix>-forward.cpp and
// <dump_prefix>-backward.cpp. `tuner`: set in mode max-autotune (the programs measure their
// candidates at their first run).
std::shared_ptr<CompiledStep> compile_inductor_step(StepPrograms programs, std::vector<int> updated_buffers, std::vector<int> gradient_inputs,
                                                    const CompilerSettings& settings, at::Device device, const std::string& dump_prefix,
                                                    InductorReport& report, std::shared_ptr<Autotuner> tuner = nullptr);

// One program through the whole pipeline (what compile_inductor_step does for each of its two).
std::shared_ptr<FusedProgram> build_fused_program(const ir::Graph& program, const CompilerSettings& settings, InductorReport& report,
                                                  at::Device device = at::kCPU, std::shared_ptr<Autotuner> tuner = nullptr);

// For `trainc explain`: "12 generated kernels computing 140 nodes (7 with reductions), 9 ATen
// calls (matmul 6, ...); memory plan: 3.1 MB arena for 9.4 MB of intermediates"
std::string describe_fused_program(const ir::Graph& graph);

}  // namespace trainc
