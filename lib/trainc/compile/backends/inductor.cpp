#include "trainc/compile/backends/inductor.h"

#include <fstream>
#include <map>
#include <sstream>

#include "trainc/common/error.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/codegen/cpp_kernels.h"
#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/passes/attention_bias_sums.h"
#include "trainc/compile/passes/embedding_grad_add.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/head_gradients_apart.h"
#include "trainc/compile/passes/head_weight_grad_to_float.h"
#include "trainc/compile/passes/memory_plan.h"
#include "trainc/compile/passes/products_to_float.h"
#include "trainc/compile/passes/rematerialize.h"
#include "trainc/compile/passes/sink_pointwise.h"
#include "trainc/compile/passes/sums_of_widened.h"
#include "trainc/compile/passes/slice_grads_to_concat.h"
#include "trainc/compile/passes/transpose_products.h"
#include "trainc/compile/runtime/cuda_modules.h"
#include "trainc/compile/runtime/fused_program.h"

namespace trainc {
namespace {

std::string megabytes(int64_t bytes) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(1);
  text << static_cast<double>(bytes) / 1e6 << " MB";
  return text.str();
}

struct ProgramBuild {
  ir::Graph graph;  // the program after the rewrites, each pointwise node sunk to its first use
  Schedule schedule;
  StreamPlan streams;
  MemoryPlan plan;
  codegen::RenderedProgram rendered;
};

// What the ATen calls a second stream runs may read before the main stream waits for them.
constexpr int64_t kSideStreamBatchBytes = int64_t{256} << 20;

// Counts what `build` generates into `report` (libraries are counted when built).
void account(const ProgramBuild& build, InductorReport& report) {
  report.kernels += static_cast<int>(build.schedule.kernels.size());
  report.fused_nodes += build.schedule.fused_nodes();
  report.aten_calls += static_cast<int>(build.schedule.steps.size() - build.schedule.kernels.size());
  report.arena_bytes += build.plan.arena_bytes();
  report.planned_bytes += build.plan.planned_bytes;
  for (int32_t batch : build.streams.batch) report.side_stream_steps += batch >= 0 ? 1 : 0;
}

LibrarySource library_source(const codegen::RenderedProgram& rendered) {
  LibrarySource source{rendered.prelude, {}};
  for (const codegen::RenderedKernel& kernel : rendered.kernels) source.kernels.push_back(kernel.source);
  return source;
}

// `name` ("forward", "backward") names a GPU program's kernels.
ProgramBuild plan_program(const ir::Graph& program, at::Device device, const std::string& name = "") {
  ProgramBuild build;
  build.graph = ir::transpose_products(ir::slice_grads_to_concat(program));
  if (optimization_enabled(Optimization::sum_to_float)) build.graph = ir::sums_of_widened(build.graph);
  // On a GPU, a fused q-k-v projection's bias gradient summed as attention's gradients are stacked.
  if (device.is_cuda() && optimization_enabled(Optimization::attention_bias_sums)) build.graph = ir::attention_bias_sums(build.graph);
  // Only where one GEMM writes the float32 product: elsewhere the cast would run inside the extern
  // op instead of fusing into the kernel that reads it.
  if (matmul_to_float_in_one_gemm(device) && optimization_enabled(Optimization::matmul_to_float)) {
    build.graph = ir::products_to_float(build.graph);
  }
  if (optimization_enabled(Optimization::embedding_grad_add)) build.graph = ir::embedding_grad_add(build.graph);
  // The head's weight gradient a step of its own, which a second stream can run (passes/stream_plan).
  if (device.is_cuda() && optimization_enabled(Optimization::side_stream)) build.graph = ir::head_gradients_apart(build.graph);
  // That step's GEMM writes the float32 table gradient, the tied embedding's rows added into it in place.
  if (matmul_to_float_in_one_gemm(device) && optimization_enabled(Optimization::matmul_to_float)) {
    build.graph = ir::head_weight_grad_to_float(build.graph);
  }
  build.graph = ir::sink_pointwise(build.graph);
  ir::verify(build.graph);
  // On a GPU, sums over leading dimensions (parameter gradients) join the kernels that make what
  // they sum; the C++ renderer has no column sums.
  const bool column_sums = device.is_cuda() && optimization_enabled(Optimization::fused_column_sums);
  build.schedule = schedule_kernels(build.graph, {}, column_sums);
  // On a GPU, values stored only for later kernels to load are recomputed there when that is
  // cheap: its kernels wait on memory, not arithmetic (GPT-2: 58.4 -> 54.8 ms, 17.7 -> 11.4 GB).
  // Two CPU cores are the other way round: the small gpt's inductor step went 3-9% slower.
  Rematerialized copied =
      device.is_cuda() && optimization_enabled(Optimization::rematerialize) ? rematerialize_loads(build.graph, build.schedule) : Rematerialized{};
  if (copied.copied_values > 0) {
    build.graph = std::move(copied.graph);
    ir::verify(build.graph);
    build.schedule = schedule_kernels(build.graph, copied.copies, column_sums);
  }
  // On a GPU, the ATen calls only the outputs wait for (weight gradients) overlap the rest.
  if (device.is_cuda() && optimization_enabled(Optimization::side_stream)) {
    build.streams = plan_streams(build.graph, build.schedule, kSideStreamBatchBytes, optimization_enabled(Optimization::main_stream_tail));
  }
  build.plan = plan_memory(build.graph, build.schedule, build.streams);
  build.rendered = device.is_cuda() ? codegen::render_cuda_kernels(build.graph, build.schedule, name)
                                    : codegen::render_cpp_kernels(build.graph, build.schedule);
  return build;
}

// NVRTC modules of rendered programs (each with kernels), through the cubin cache; a launcher each.
std::vector<KernelLauncher> cuda_launchers(const std::vector<const codegen::RenderedProgram*>& programs, const CompilerSettings& settings,
                                           InductorReport& report) {
  std::vector<CudaSource> sources;
  for (const codegen::RenderedProgram* program : programs) {
    sources.push_back({program->text(), program->symbols()});
  }
  const std::vector<CudaModuleBuild> modules = build_cuda_modules(sources, settings);
  std::vector<KernelLauncher> launchers;
  for (std::size_t i = 0; i < programs.size(); ++i) {
    ++(modules[i].cache_hit ? report.libraries_cached : report.libraries_compiled);
    std::vector<std::pair<int64_t, int>> launches;  // grid, block; in the order of symbols()
    for (const codegen::RenderedKernel& kernel : programs[i]->kernels) launches.emplace_back(kernel.grid, kernel.block);
    for (const codegen::RenderedKernel& kernel : programs[i]->kernels) {
      if (!kernel.finish_symbol.empty()) launches.emplace_back(kernel.finish_grid, kernel.finish_block);
    }
    launchers.push_back([module = modules[i].module, launches](std::size_t k, void* const* arguments, std::size_t count) {
      module->launch(k, launches[k].first, launches[k].second, arguments, count);
    });
  }
  return launchers;
}

// max-autotune on a GPU: each program's kernels rendered and compiled under every tuned launch
// shape, for the program to measure at its first run.
std::vector<LaunchVariants> launch_variants(const std::vector<const ProgramBuild*>& builds, const std::vector<std::string>& names,
                                            const CompilerSettings& settings, InductorReport& report) {
  const std::vector<codegen::LaunchShape>& shapes = codegen::tuned_launch_shapes();
  std::vector<codegen::RenderedProgram> rendered;
  std::vector<const codegen::RenderedProgram*> with_kernels;
  for (std::size_t p = 0; p < builds.size(); ++p) {
    for (const codegen::LaunchShape& shape : shapes) rendered.push_back(codegen::render_cuda_kernels(builds[p]->graph, builds[p]->schedule, names[p], shape));
  }
  for (const codegen::RenderedProgram& program : rendered) {
    if (!program.kernels.empty()) with_kernels.push_back(&program);
  }
  std::vector<KernelLauncher> launchers = cuda_launchers(with_kernels, settings, report);
  std::vector<LaunchVariants> variants(builds.size());
  std::size_t next = 0;
  for (std::size_t p = 0; p < builds.size(); ++p) {
    if (builds[p]->schedule.kernels.empty()) continue;
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      const codegen::RenderedProgram& program = rendered[p * shapes.size() + s];
      // A repeated kernel's source names the kernel whose code it launches: that code, per kernel.
      std::map<std::string, std::string> code_of_symbol;
      std::vector<std::string> code;
      for (const codegen::RenderedKernel& kernel : program.kernels) code_of_symbol.emplace(kernel.symbol, kernel.source);
      for (const codegen::RenderedKernel& kernel : program.kernels) code.push_back(code_of_symbol.at(kernel.symbol));
      variants[p].names.push_back(shapes[s].name());
      variants[p].launchers.push_back(std::move(launchers[next++]));
      variants[p].code.push_back(std::move(code));
    }
  }
  return variants;
}

// Compiles the programs' kernels (those that have any; the C++ compiler for the CPU, NVRTC for a
// GPU, both through their caches) and gives each program the launcher of its kernels.
std::vector<KernelLauncher> build_launchers(const std::vector<const ProgramBuild*>& builds, const CompilerSettings& settings, at::Device device,
                                            InductorReport& report) {
  std::vector<KernelLauncher> launchers(builds.size());
  std::vector<std::size_t> with_kernels;
  for (std::size_t p = 0; p < builds.size(); ++p) {
    if (!builds[p]->rendered.kernels.empty()) with_kernels.push_back(p);
  }
  if (device.is_cuda()) {
    std::vector<const codegen::RenderedProgram*> rendered;
    for (std::size_t p : with_kernels) rendered.push_back(&builds[p]->rendered);
    std::vector<KernelLauncher> built = cuda_launchers(rendered, settings, report);
    for (std::size_t i = 0; i < with_kernels.size(); ++i) launchers[with_kernels[i]] = std::move(built[i]);
    return launchers;
  }
  std::vector<LibrarySource> sources;
  for (std::size_t p : with_kernels) sources.push_back(library_source(builds[p]->rendered));
  const std::vector<LibraryBuild> libraries = build_kernel_libraries(sources, settings);
  for (std::size_t i = 0; i < with_kernels.size(); ++i) {
    ++(libraries[i].cache_hit ? report.libraries_cached : report.libraries_compiled);
    using KernelFunction = void (*)(void* const*);
    std::vector<KernelFunction> functions;
    for (const codegen::RenderedKernel& kernel : builds[with_kernels[i]]->rendered.kernels) {
      functions.push_back(reinterpret_cast<KernelFunction>(libraries[i].library->symbol(kernel.symbol)));
    }
    launchers[with_kernels[i]] = [library = libraries[i].library, functions](std::size_t k, void* const* arguments, std::size_t) {
      functions[k](arguments);
    };
  }
  return launchers;
}

}  // namespace

std::string InductorReport::summary() const {
  std::ostringstream text;
  text << kernels << " kernels computing " << fused_nodes << " nodes, " << aten_calls << " ATen calls; " << libraries_compiled
       << " libraries compiled, " << libraries_cached << " from the kernel cache; arena " << megabytes(arena_bytes) << " for "
       << megabytes(planned_bytes) << " of intermediates";
  if (side_stream_steps > 0) text << "; " << side_stream_steps << " ATen calls on a second stream in CUDA graphs";
  return text.str();
}

std::string describe_fused_program(const ir::Graph& program) {
  const ProgramBuild build = plan_program(program, at::kCPU);
  const ir::Graph& graph = build.graph;
  const Schedule& schedule = build.schedule;
  const MemoryPlan& plan = build.plan;
  int reductions = 0;
  for (const FusedKernel& kernel : schedule.kernels) reductions += kernel.has_reduction() ? 1 : 0;
  std::map<std::string, int> aten;
  int aten_calls = 0;
  for (const ScheduleStep& step : schedule.steps) {
    if (step.kind != ScheduleStep::Kind::aten) continue;
    ++aten[ir::op_name(graph.node(step.index).op)];
    ++aten_calls;
  }
  std::ostringstream text;
  text << schedule.kernels.size() << " generated kernels computing " << schedule.fused_nodes() << " nodes (" << reductions
       << " with reductions), " << aten_calls << " ATen calls";
  std::string separator = " (";
  for (const auto& [name, count] : aten) {
    text << separator << name << " " << count;
    separator = ", ";
  }
  if (!aten.empty()) text << ")";
  text << "; memory plan: " << megabytes(plan.arena_bytes()) << " arena for " << megabytes(plan.planned_bytes) << " of intermediates";
  return text.str();
}

std::shared_ptr<FusedProgram> build_fused_program(const ir::Graph& program, const CompilerSettings& settings, InductorReport& report,
                                                  at::Device device, std::shared_ptr<Autotuner> tuner) {
  ProgramBuild build = plan_program(program, device);
  account(build, report);
  KernelLauncher launcher = build_launchers({&build}, settings, device, report).front();
  LaunchVariants variants;
  if (tuner && device.is_cuda()) variants = std::move(launch_variants({&build}, {""}, settings, report).front());
  return std::make_shared<FusedProgram>(std::move(build.graph), std::move(build.schedule), std::move(build.plan), build.rendered,
                                        std::move(launcher), device, std::move(tuner), std::move(variants), std::move(build.streams));
}

std::shared_ptr<CompiledStep> compile_inductor_step(StepPrograms programs, std::vector<int> updated_buffers, std::vector<int> gradient_inputs,
                                                    const CompilerSettings& settings, at::Device device, const std::string& dump_prefix,
                                                    InductorReport& report, std::shared_ptr<Autotuner> tuner) {
  ProgramBuild forward = plan_program(programs.forward, device, "fwd");
  ProgramBuild backward = plan_program(programs.backward, device, "bwd");
  ProgramBuild* builds[] = {&forward, &backward};
  const char* names[] = {"forward", "backward"};
  const std::string extension = device.is_cuda() ? ".cu" : ".cpp";
  for (int p = 0; p < 2; ++p) {
    const ProgramBuild& build = *builds[p];
    if (!dump_prefix.empty()) {
      const std::string path = dump_prefix + "-" + names[p] + extension;
      std::ofstream out(path);
      out << build.rendered.text();
      if (!out) throw UserError("--dump-dir: cannot write " + path, kExitFailure);
    }
    account(build, report);
  }
  std::vector<KernelLauncher> launchers = build_launchers({&forward, &backward}, settings, device, report);
  std::vector<LaunchVariants> variants(2);
  if (tuner && device.is_cuda()) variants = launch_variants({&forward, &backward}, {"fwd", "bwd"}, settings, report);
  std::shared_ptr<FusedProgram> fused[2];
  for (int p = 0; p < 2; ++p) {
    ProgramBuild& build = *builds[p];
    fused[p] = std::make_shared<FusedProgram>(std::move(build.graph), std::move(build.schedule), std::move(build.plan), build.rendered,
                                              std::move(launchers[static_cast<std::size_t>(p)]), device, tuner,
                                              std::move(variants[static_cast<std::size_t>(p)]), std::move(build.streams));
  }
  const auto runner = [device](std::shared_ptr<FusedProgram> program) {
    return [program, device](std::vector<at::Tensor> inputs, at::Device on) {
      TRAINC_CHECK(on.type() == device.type(), "inductor's kernels were generated for " + device.str() + ", the step's tensors are on " + on.str());
      return program->run(std::move(inputs));
    };
  };
  return std::make_shared<CompiledStep>(std::move(programs), std::move(updated_buffers), std::move(gradient_inputs), runner(fused[0]),
                                        runner(fused[1]));
}

}  // namespace trainc
