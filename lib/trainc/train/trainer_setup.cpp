// Trainer::setup and Trainer::start_compiler — everything a run needs before its first step:
// device, precision, data, model, optimizer, schedule and compile backend, all checked before the
// output directory is touched; then the compiler and the whole-step CUDA graphs that run the steps.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/torch.h>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "trainc/common/error.h"
#include "trainc/common/format.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/guards.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/config/fields.h"
#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/evaluate.h"
#include "trainc/train/grad_clip.h"
#include "trainc/train/loss.h"
#include "trainc/train/loss_tracking.h"
#include "trainc/train/lr_schedule.h"
#include "trainc/train/optimizer.h"
#include "trainc/train/trainer.h"

namespace trainc {

void Trainer::setup() {
  world_ = world_from_environment();
  device_ = torch::cuda::is_available() && !args_.use_cpu ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world_.local_rank))
                                                          : torch::Device(torch::kCPU);
  if (device_.is_cuda() && world_.local_rank >= static_cast<int>(torch::cuda::device_count())) {
    throw UserError("LOCAL_RANK=" + std::to_string(world_.local_rank) + ": this host has " + std::to_string(torch::cuda::device_count()) +
                    " CUDA devices; start at most that many processes per host");
  }
  // This rank's GPU becomes the current one, where anything made for plain "cuda" lands too.
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->setDevice(device_);
  precision_ = resolve_precision(args_, device_);
  scaler_ = LossScaler(args_.fp16);
  if (args_.fp16) device_scale_ = std::make_unique<DeviceLossScale>(device_);
  // LibTorch counts physical cores for its default thread count, which leaves half of a
  // hyper-threaded or virtual machine idle (1 thread on 2 vCPUs). Unless OMP_NUM_THREADS says
  // otherwise, use every CPU this process may run on.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > at::get_num_threads()) at::set_num_threads(CPU_COUNT(&cpus));
  }
  if (args_.torch_compile) backend_ = select_backend(args_, device_.is_cuda() ? "cuda" : "cpu");
  // The kernel cache's folder, made or refused before anything is written: inductor compiles into
  // it, and on a GPU trainc's own kernels (runtime/runtime_kernels) do, whatever the backend.
  if (device_.is_cuda() || (backend_ && backend_->backend == "inductor")) {
    kernel_cache_directory(compiler_settings_from_environment(), device_.is_cuda() ? kCudaKernelsFolder : kCpuKernelsFolder);
  }
  ddp_backend_ = args_.ddp_backend.value_or(device_.is_cuda() ? "nccl" : "gloo");
  if (world_.distributed()) DataParallel::check_backend(ddp_backend_, device_);  // before loading anything
  torch::manual_seed(static_cast<uint64_t>(args_.seed));
  data_seed_ = static_cast<uint64_t>(args_.data_seed.value_or(args_.seed));
  data_ = load_data(config_.data, config_.model, args_.seed);
  if (args_.eval_strategy != "no" && !data_.eval) {
    throw UserError("eval_strategy: " + args_.eval_strategy + " needs held-out data; set data.eval_path or a data.validation_split > 0 "
                    "large enough to hold at least one sample");
  }
  if (args_.metric_for_best_model) {
    const std::vector<std::string> reported = evaluation_metrics(data_.language_model);
    const std::string key = best_metric_key(*args_.metric_for_best_model);
    if (std::find(reported.begin(), reported.end(), key) == reported.end()) {
      throw UserError("metric_for_best_model: got \"" + *args_.metric_for_best_model + "\", but evaluation of " +
                      (data_.language_model ? "a language model" : "a classifier") + " reports no " + key + "; expected one of " +
                      join(reported, ", ") + " (the eval_ prefix may be left out)");
    }
  }
  try {
    model_ = make_model(config_.model, {data_.language_model, data_.sample_shape, data_.token_bound}, args_.gradient_checkpointing);
    model_->to(device_);
  } catch (const c10::Error& error) {
    // Sizes each valid alone (hidden_sizes [2147483647], say) can ask for terabytes.
    const std::string what = error.what_without_backtrace();
    if (what.find("allocate") == std::string::npos && what.find("out of memory") == std::string::npos &&
        what.find("size calculation overflowed") == std::string::npos) {
      throw;
    }
    throw UserError("model: the " + config_.model.name + " model the config describes is too large for " + (device_.is_cuda() ? "GPU" : "host") +
                    " memory (" + what.substr(0, what.find('\n')) + "); expected " +
                    (config_.model.name == "torchscript" ? "a module this machine can hold" : "smaller sizes under model:"));
  }
  model_->set_training(true);
  if (backend_ && backend_->whole_step_graph()) {
    // What in the forward waits for the GPU inside a captured step, every kind found in one warning.
    std::vector<std::string> waits;
    const auto add_waits = [&waits](const std::vector<ScriptedOp>& ops, const std::string& what) {
      if (ops.empty()) return;
      const std::string first = ops[0].op + (ops[0].place.empty() ? "" : " at " + ops[0].place);
      waits.push_back(what + " (" + first + (ops.size() > 1 ? ", and " + std::to_string(ops.size() - 1) + " more" : "") + ")");
    };
    add_waits(model_->host_value_reads(), "reads a tensor's value on the host");
    add_waits(model_->value_sized_results(), "makes a tensor sized by its input's values");
    // Only an eager step copies: a compiled program keeps the values where the step runs. The step
    // is eager under backend cudagraphs, and where the planner breaks on a switch of autograd.
    if (backend_->backend == "cudagraphs" || !model_->grad_mode_switches().empty()) {
      add_waits(model_->host_copies(), "copies a tensor to the host");
    }
    if (!waits.empty()) {
      decline_step_graph(*backend_, "model.path " + config_.model.path.value_or("?"), join(waits, ", and "), args_.torch_compile_fullgraph);
    }
  }
  for (const auto& item : model_->named_parameters()) {
    if (item.second.requires_grad()) parameters_.push_back(item.second);
  }
  if (parameters_.empty()) throw UserError("model: " + model_->describe() + " has no parameters to train; expected at least one");
  if (world_.distributed()) {
    // Rendezvous only after everything above was checked: a bad config fails every rank at once.
    data_parallel_ =
        std::make_unique<DataParallel>(world_, ddp_backend_, device_, std::chrono::seconds(args_.ddp_timeout), parameters_);
    std::vector<torch::Tensor> replicated;
    for (const auto& item : model_->named_parameters()) replicated.push_back(item.second.detach());
    for (const auto& item : model_->named_buffers()) replicated.push_back(item.second.detach());
    data_parallel_->broadcast(replicated);  // every replica starts from rank 0's weights
    torch::manual_seed(static_cast<uint64_t>(args_.seed) + static_cast<uint64_t>(world_.rank));  // dropout differs per rank
  }
  optimizer_ = make_optimizer(args_, *model_, /*capturable=*/backend_ && backend_->whole_step_graph());
  // Each rank steps through its share of an epoch (rank_share), so the plan counts a share.
  plan_ = plan_steps(args_, (data_.train->size() + world_.size - 1) / world_.size);
  schedule_ = make_lr_schedule(args_.lr_scheduler_type, args_.lr_scheduler_kwargs, plan_.warmup_steps, plan_.total_steps,
                               args_.learning_rate);
  state_.max_steps = plan_.total_steps;
  state_.logging_steps = plan_.logging_steps;
  state_.eval_steps = plan_.eval_steps;
  state_.save_steps = plan_.save_steps;
  loss_fn_ = [this](const torch::Tensor& inputs, const torch::Tensor& targets) {
    torch::Tensor logits;
    {
      AutocastScope autocast(precision_.device, precision_.autocast, precision_.dtype);
      logits = model_->forward(inputs);
    }
    return cross_entropy_loss(logits, targets, args_.label_smoothing_factor);
  };
}

void Trainer::start_compiler() {
  if (backend_ && backend_->whole_step_graph()) {
    auto on_event = [this](const GraphEvent& event) {
      record({{"cuda_graph", event.outcome}, {"input_signature", event.signature}, {"capture_seconds", event.seconds}}, state_.epoch);
      reporter_->info("cuda graph: " + event.outcome +
                      (event.outcome == "captured" ? " in " + format_number(event.seconds, 3) + " s" : "") + " (" + event.signature + ")");
    };
    StepPhases phases;
    phases.gradients = [this](const auto& inputs, const auto& targets) { return accumulate_gradients(inputs, targets); };
    // Data-parallel: the all-reduce runs between the gradients' graph and the update's.
    if (data_parallel_) phases.exchange = [this] { data_parallel_->finish_gradients(); };
    // fp16: after it, the gradients are unscaled and the host decides whether the update runs, as
    // run_step decides without graphs. A skipped step logs the norm of its overflowed gradients.
    if (device_scale_) {
      phases.skip = [this]() -> std::optional<torch::Tensor> {
        if (update_runs()) return std::nullopt;
        return clip_grad_norm(parameters_, args_.max_grad_norm);
      };
    }
    // Capturable: the step reads the learning rate from a device tensor, written by the step's own
    // start (below) or before the replay.
    phases.update = [this] { return clipped_step(*optimizer_, parameters_, args_.max_grad_norm); };
    auto* on_device = dynamic_cast<DeviceStateOptimizer*>(optimizer_.get());
    // Not under fp16: a step it skips holds the schedule and the step counts, which only the host
    // learns of, between the two graphs; the host then writes each step's rate before its replay.
    if (on_device != nullptr && optimization_enabled(Optimization::device_step_start) && !device_scale_) {
      step_start_ = std::make_unique<DeviceStepStart>([this](int64_t step) { return learning_rate_at(step); }, state_.global_step, device_);
      phases.start = [this, on_device](bool captured, const std::vector<torch::Tensor>& stepped) {
        step_start_->start_step(on_device->device_learning_rate(),
                                captured ? on_device->step_counts_advanced_before_next_step(stepped) : std::vector<torch::Tensor>{});
      };
      phases.track = [this](const torch::Tensor& loss) {
        track_step_loss(loss, step_start_->steps_done(), loss_since_log_, loss_total_, first_nonfinite_step_);
      };
    }
    step_graphs_ = std::make_unique<StepGraphs>(device_, parameters_, std::move(phases), on_event,
                                                [this](const std::string& warning) { reporter_->warn(warning); }, /*max_graphs=*/8,
                                                setting_without_graphs(*backend_));
  }
  // cudagraphs records eager autograd; the other backends run compiled programs.
  if (!backend_ || backend_->backend == "eager" || backend_->backend == "cudagraphs") return;
  if (const std::string disabled = disabled_optimizations_warning(); !disabled.empty()) reporter_->warn(disabled);
  CompileOptions options;
  options.backend = backend_->backend;
  options.fullgraph = args_.torch_compile_fullgraph;
  options.dump_dir = options_.dump_dir;
  if (options.backend == "inductor") options.compiler = compiler_settings_from_environment();
  options.autotune = backend_->autotunes();
  auto on_compile = [this, inductor = options.backend == "inductor"](const CompileEvent& event) {
    nlohmann::json fields = {{"compile_seconds", event.seconds},
                             {"compile_reason", event.reason},
                             {"compile_outcome", event.outcome},
                             {"input_signature", event.signature}};
    if (inductor) {
      fields["kernel_libraries_compiled"] = event.libraries_compiled;
      fields["kernel_libraries_cached"] = event.libraries_cached;
    }
    record(fields, state_.epoch);
    reporter_->info("compile: " + event.outcome + " in " + format_number(event.seconds, 3) + " s (" + event.reason + "; " +
                    event.signature + ")" + (event.detail.empty() ? "" : "; " + event.detail));
  };
  compiler_ = std::make_unique<StepCompiler>(*model_, loss_fn_, options, on_compile,
                                             [this](const std::string& warning) { reporter_->warn(warning); });
}

}  // namespace trainc
