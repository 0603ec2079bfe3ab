#include "trainc/compile/planner.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainc/common/error.h"
#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/device_properties.h"
#include "trainc/compat/device_timing.h"
#include "trainc/compat/library_variants.h"
#include "trainc/compile/backends/inductor.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/passes/attention_lse_in_forward.h"
#include "trainc/compile/passes/dlogits_in_forward.h"
#include "trainc/compile/passes/gelu_epilogue.h"
#include "trainc/compile/passes/gelu_grad_epilogue.h"
#include "trainc/compile/runtime/guards.h"
#include "trainc/compile/runtime/side_product_sms.h"
#include "trainc/models/model.h"

namespace trainc {

namespace fs = std::filesystem;

CompilePlan plan_step(Model& model, const LossFunction& loss_fn, const at::Tensor& inputs, const at::Tensor& targets) {
  CompilePlan plan;
  const std::vector<ScriptedOp> switches = model.grad_mode_switches();
  // A forward that runs autograd itself (torch.autograd.grad, .backward()) cannot be traced: not
  // without autograd, and with it the gradients it made would be kept as constants. Its step runs
  // eagerly, untraced (an empty captured graph), for the break below.
  if (std::any_of(switches.begin(), switches.end(), runs_autograd)) {
    plan.captured.graph = std::make_shared<torch::jit::Graph>();
  } else {
    plan.captured = capture_loss(model, loss_fn, inputs, targets);
    plan.imported = import_graph(plan.captured);
  }
  // What a trace of the scripted forward cannot keep: each op a graph break, "what at place; why".
  const auto add_breaks = [&plan](const std::vector<ScriptedOp>& ops, const std::string& what, const std::string& why) {
    for (const ScriptedOp& op : ops) {
      plan.imported.breaks.push_back({op.op, what + (op.place.empty() ? "" : " at " + op.place) + "; " + why, "(the scripted forward)"});
    }
  };
  add_breaks(model.host_value_reads(), "reads a tensor's value on the host", "a trace would keep the first batch's branch or value");
  add_breaks(switches, "switches, reads or runs autograd",
             "a trace, taken without autograd, keeps neither the switch, nor the mode, nor autograd's work");
  if (!plan.complete()) return plan;
  std::vector<bool> requires_grad;
  for (const StepInput& input : plan.captured.inputs) requires_grad.push_back(input.requires_grad);
  plan.joint = differentiate(plan.imported.graph, requires_grad);
  // Eager autograd refuses a loss without a gradient path (trainer.cpp); a compiled step would
  // train nothing, silently.
  if (plan.joint.gradient_inputs.empty()) throw UserError(no_gradient_path_message(model.describe()));
  if (optimization_enabled(Optimization::dlogits_in_forward)) plan.joint.graph = ir::dlogits_in_forward(plan.joint.graph);
  // Attention kernels called directly, keeping their statistics: a GPU with a LibTorch that has them,
  // and attention_choice (direct calls) left on.
  if (inputs.is_cuda() && attention_backends(inputs.device()).size() > 1 && optimization_enabled(Optimization::attention_lse) &&
      optimization_enabled(Optimization::attention_choice)) {
    plan.joint.graph = ir::attention_lse_in_forward(plan.joint.graph);
  }
  // A linear layer's GELU in its GEMM's epilogue, and its backward in the epilogue of the GEMM
  // before it in the backward: cuBLASLt's, on a GPU.
  if (inputs.is_cuda() && !cublaslt_version().empty()) {
    if (optimization_enabled(Optimization::gelu_epilogue)) plan.joint.graph = ir::gelu_epilogue(plan.joint.graph);
    if (optimization_enabled(Optimization::gelu_grad_epilogue)) {
      const int half = multiprocessor_count(inputs.device()) / 2;
      const auto small_layer = [half](int64_t rows, int64_t width) { return small_layers_sm_target(half, rows, width) > 0; };
      plan.joint.graph = ir::gelu_grad_epilogue(plan.joint.graph, small_layer);
    }
  }
  plan.programs = partition(plan.joint);
  return plan;
}

void dump_plan(const CompilePlan& plan, const std::string& dir, const std::string& prefix) {
  fs::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    const fs::path path = fs::path(dir) / (prefix + "-" + name + ".txt");
    std::ofstream out(path);
    out << text;
    if (!out) throw UserError("--dump-dir: cannot write " + path.string(), kExitFailure);
  };
  write("traced", plan.captured.graph->toString());
  write("ir", ir::to_text(plan.imported.graph));
  if (!plan.complete()) {
    write("breaks", describe_breaks(plan.imported.breaks));
    return;
  }
  write("joint", ir::to_text(plan.joint.graph));
  write("forward", ir::to_text(plan.programs.forward));
  write("backward", ir::to_text(plan.programs.backward));
}

std::string describe_breaks(const std::vector<GraphBreak>& breaks) {
  std::string text;
  for (const GraphBreak& b : breaks) text += b.op + " (" + b.reason + ") in module " + b.module + "\n";
  return text;
}

namespace {

// "412 kernels (300 pointwise, 40 reductions, 3 random, 69 extern: matmul 49, ...), 120 views"
std::string describe_program(const ir::Graph& graph) {
  std::map<ir::OpKind, int> kinds;
  std::map<std::string, int> externs;
  for (const ir::Node& node : graph.nodes()) {
    const ir::OpKind kind = ir::op_kind(node.op);
    ++kinds[kind];
    if (kind == ir::OpKind::kExtern) ++externs[ir::op_name(node.op)];
  }
  const int pointwise = kinds[ir::OpKind::kUnary] + kinds[ir::OpKind::kBinary] + kinds[ir::OpKind::kTernary];
  const int kernels = pointwise + kinds[ir::OpKind::kReduction] + kinds[ir::OpKind::kExtern] + kinds[ir::OpKind::kRandom] +
                      kinds[ir::OpKind::kConstant];
  std::ostringstream text;
  text << kernels << " ATen kernels (" << pointwise << " pointwise, " << kinds[ir::OpKind::kReduction] << " reductions, "
       << kinds[ir::OpKind::kConstant] << " fills, " << kinds[ir::OpKind::kRandom] << " random, " << kinds[ir::OpKind::kExtern]
       << " extern";
  std::string separator = ": ";
  for (const auto& [name, count] : externs) {
    text << separator << name << " " << count;
    separator = ", ";
  }
  text << "), " << kinds[ir::OpKind::kView] << " views, " << kinds[ir::OpKind::kInput] << " inputs";
  return text.str();
}

int64_t bytes_of(const ir::TensorType& type) {
  const int64_t element = type.dtype == ir::DType::f64 || type.dtype == ir::DType::i64 ? 8
                          : type.dtype == ir::DType::f32                               ? 4
                          : type.dtype == ir::DType::b8                                ? 1
                                                                                       : 2;
  return type.numel() * element;
}

}  // namespace

std::string explain_plan(const CompilePlan& plan, const std::string& backend, const std::vector<std::string>& warnings, bool fused) {
  std::ostringstream text;
  int total = 0;
  for (const auto& [op, count] : plan.imported.aten_op_counts) total += count;
  text << "captured     " << total << " ops of " << plan.imported.aten_op_counts.size() << " kinds\n";
  for (const auto& [op, count] : plan.imported.aten_op_counts) text << "               " << op << " " << count << "\n";
  if (plan.complete()) {
    text << "graph breaks none\n";
  } else {
    text << "graph breaks " << plan.imported.breaks.size() << " (this step would run eagerly)\n";
    std::istringstream lines(describe_breaks(plan.imported.breaks));
    for (std::string line; std::getline(lines, line);) text << "               " << line << "\n";
  }
  text << "backend      " << backend << "\n";
  for (const std::string& warning : warnings) text << "               warning: " << warning << "\n";
  text << "ir           " << plan.imported.graph.size() << " nodes";
  if (!plan.imported.updated_buffers.empty()) text << ", updates " << plan.imported.updated_buffers.size() << " buffers";
  text << "\n";
  if (!plan.complete()) return text.str();
  int64_t saved_bytes = 0;
  const ir::Graph& forward = plan.programs.forward;
  for (std::size_t i = static_cast<std::size_t>(plan.programs.forward_results); i < forward.outputs().size(); ++i) {
    saved_bytes += bytes_of(forward.type(forward.outputs()[i]));
  }
  text << "joint        " << plan.joint.graph.size() << " nodes, gradients for " << plan.joint.gradient_inputs.size() << " parameters\n";
  text << "forward      " << describe_program(plan.programs.forward) << "\n";
  text << "backward     " << describe_program(plan.programs.backward) << "\n";
  if (fused) {
    text << "fused fwd    " << describe_fused_program(plan.programs.forward) << "\n";
    text << "fused bwd    " << describe_fused_program(plan.programs.backward) << "\n";
  }
  text << "saved        " << plan.programs.saved << " tensors (" << std::fixed;
  text.precision(1);
  text << static_cast<double>(saved_bytes) / 1e6 << " MB) cross from forward to backward; " << plan.programs.recomputed
       << " values are recomputed in the backward instead\n";
  return text.str();
}

// --- StepCompiler --------------------------------------------------------------------------------

StepCompiler::StepCompiler(Model& model, LossFunction loss_fn, CompileOptions options, std::function<void(const CompileEvent&)> on_compile,
                           std::function<void(const std::string&)> warn)
    : model_(model),
      model_tensors_(model_tensors(model)),
      loss_fn_(std::move(loss_fn)),
      options_(std::move(options)),
      on_compile_(std::move(on_compile)),
      warn_(std::move(warn)) {}

double StepCompiler::take_compile_seconds() {
  const double seconds = pending_seconds_;
  pending_seconds_ = 0.0;
  return seconds;
}

at::Tensor StepCompiler::run_eagerly(const at::Tensor& inputs, const at::Tensor& targets, const GradScale& grad_scale) {
  const at::Tensor loss = loss_fn_(inputs, targets);
  if (!loss.requires_grad()) throw UserError(no_gradient_path_message(model_.describe()));
  if (grad_scale.tensor.defined()) {
    (loss * grad_scale.tensor).backward();
  } else {
    (grad_scale.value == 1.0 ? loss : loss * grad_scale.value).backward();
  }
  return loss.detach();
}

at::Tensor StepCompiler::run(const at::Tensor& inputs, const at::Tensor& targets, const GradScale& grad_scale) {
  const std::string signature = input_signature(inputs, targets);
  auto found = steps_.find(signature);
  if (found == steps_.end()) {
    if (compiles_ >= options_.recompile_limit) {
      if (!warned_limit_) {
        warn_("compile: " + std::to_string(compiles_) + " input signatures compiled, the limit; new signatures (now " + signature +
              ") run eagerly");
        warned_limit_ = true;
      }
      return run_eagerly(inputs, targets, grad_scale);
    }
    CompileEvent event;
    event.signature = signature;
    if (steps_.empty()) {
      event.reason = "first step";
    } else {
      event.reason = "new input signature; compiled before:";
      for (const auto& [known, step] : steps_) event.reason += " [" + known + "]";
    }
    const auto start = std::chrono::steady_clock::now();
    CompilePlan plan = plan_step(model_, loss_fn_, inputs, targets);
    ++compiles_;
    const std::string prefix = "compile-" + std::to_string(compiles_);
    if (!options_.dump_dir.empty()) dump_plan(plan, options_.dump_dir, prefix);
    std::shared_ptr<CompiledStep> step;
    if (plan.complete() && options_.backend == "inductor") {
      if (options_.autotune && !tuner_) {
        const at::Device device = inputs.device();
        tuner_ = std::make_shared<Autotuner>(TuningCache(kernel_cache_directory(options_.compiler, kAutotuneFolder)),
                                             [device](const std::function<void()>& work) { return time_on_device(device, work, 7); });
      }
      InductorReport report;
      step = compile_inductor_step(std::move(plan.programs), plan.imported.updated_buffers, plan.joint.gradient_inputs, options_.compiler, inputs.device(),
                                   options_.dump_dir.empty() ? "" : (fs::path(options_.dump_dir) / prefix).string(), report, tuner_);
      event.outcome = "compiled";
      event.detail = report.summary();
      event.libraries_compiled = report.libraries_compiled;
      event.libraries_cached = report.libraries_cached;
    } else if (plan.complete()) {
      step = std::make_shared<CompiledStep>(std::move(plan.programs), plan.imported.updated_buffers, plan.joint.gradient_inputs);
      event.outcome = "compiled";
    } else {
      const std::string breaks = describe_breaks(plan.imported.breaks);
      if (options_.fullgraph) {
        throw UserError("torch_compile_fullgraph: true, but the step has graph breaks:\n" + breaks +
                        "set torch_compile_fullgraph: false to run such steps eagerly", kExitUsage);
      }
      warn_("compile: graph break, this step runs eagerly: " + breaks.substr(0, breaks.size() - 1));
      event.outcome = "graph break: running eagerly";
    }
    event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pending_seconds_ += event.seconds;
    total_seconds_ += event.seconds;
    found = steps_.emplace(signature, step).first;
    on_compile_(event);
  }
  if (!found->second) return run_eagerly(inputs, targets, grad_scale);
  // The model's parameters and buffers keep their identity through a run: gathered once.
  std::vector<at::Tensor> tensors = model_tensors_;
  tensors.push_back(inputs);
  tensors.push_back(targets);
  const at::Tensor loss = found->second->run(tensors, grad_scale);
  if (tuner_) report_tuning(signature);
  return loss;
}

void StepCompiler::report_tuning(const std::string& signature) {
  const TuningStats stats = tuner_->take_stats();
  if (stats.measured == 0 && stats.from_cache == 0) return;
  CompileEvent event;
  event.signature = signature;
  event.reason = "max-autotune, first run of the compiled step";
  event.outcome = "autotuned";
  event.seconds = stats.seconds;
  event.detail = std::to_string(stats.measured) + " choices measured, " + std::to_string(stats.from_cache) + " read from the tuning cache (" +
                 tuner_->cache().directory() + ")";
  if (!stats.unrecorded.empty()) warn_("autotune: could not record a choice in the tuning cache: " + stats.unrecorded);
  pending_seconds_ += stats.seconds;
  total_seconds_ += stats.seconds;
  on_compile_(event);
}

}  // namespace trainc
