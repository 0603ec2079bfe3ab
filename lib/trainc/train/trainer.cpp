#include "trainc/train/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "trainc/common/error.h"
#include "trainc/common/format.h"
#include "trainc/compile/runtime/guards.h"
#include "trainc/compat/gpu_memory.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/config/emit.h"
#include "trainc/config/fields.h"
#include "trainc/config/value_codec.h"
#include "trainc/data/batch_loader.h"
#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/checkpoint.h"
#include "trainc/train/evaluate.h"
#include "trainc/train/grad_clip.h"
#include "trainc/train/interrupt.h"
#include "trainc/train/loss_tracking.h"
#include "trainc/train/lr_schedule.h"
#include "trainc/train/optimizer.h"
#include "trainc/train/output_dir.h"
#include "trainc/train/resume.h"

namespace trainc {
namespace fs = std::filesystem;
namespace {

std::string format_count(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f", value);
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Trainer::Trainer(const RunConfig& config, std::string config_source, std::vector<std::string> warnings, RunOptions options)
    : config_(config),
      config_source_(std::move(config_source)),
      options_(std::move(options)),
      warnings_(std::move(warnings)),
      args_(config_.args) {}

void Trainer::print_header() const {
  const int64_t accumulation = args_.gradient_accumulation_steps;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"config", config_source_},
      {"model", model_->describe() + " (" + std::to_string(model_->parameter_count()) + " parameters)"},
      {"data", data_.description},
      {"device", device_.str() + ", " + precision_.name + ", " + std::to_string(at::get_num_threads()) + " CPU threads, LibTorch " +
                     kTorchVersionText},
      {"batch", std::to_string(args_.per_device_train_batch_size) + " x " + std::to_string(accumulation) + " accumulation" +
                    (world_.distributed() ? " x " + std::to_string(world_.size) + " processes" : "") + " = " +
                    std::to_string(args_.per_device_train_batch_size * accumulation * world_.size) + " samples/step"},
      {"steps", std::to_string(plan_.total_steps) + " (" + std::to_string(plan_.steps_per_epoch) + " per epoch), warmup " +
                    std::to_string(plan_.warmup_steps)},
      {"optimizer", args_.optim + (args_.optim == "adamw_torch_fused" && !device_.is_cuda() ? " (the fused kernel is a GPU's; multi-tensor on the CPU)" : "") +
                        ", lr " + format_number(args_.learning_rate) + " " + args_.lr_scheduler_type +
                        ", weight_decay " + format_number(args_.weight_decay) + ", max_grad_norm " +
                        format_number(args_.max_grad_norm)},
      {"compile", backend_ ? "backend " + backend_->describe() + (backend_->whole_step_graph()          ? ", whole step as a CUDA graph"
                                                               : !backend_->graphs_declined.empty() ? ", without CUDA graphs"
                                                                                                    : "")
                           : "off (eager)"},
      {"output_dir", args_.output_dir},
  };
  if (!precision_.tf32_note.empty()) rows.insert(rows.begin() + 4, {"tf32", precision_.tf32_note});
  if (world_.distributed()) {
    rows.insert(rows.begin() + 4, {"processes", std::to_string(world_.size) + " data-parallel (" + ddp_backend_ + ", rendezvous " +
                                                    world_.master_addr + ":" + std::to_string(world_.master_port) +
                                                    "); each reads 1/" + std::to_string(world_.size) + " of every epoch"});
  }
  for (const auto& [key, value] : rows) {
    std::string padded = key;
    padded.resize(11, ' ');
    reporter_->info(padded + value);
  }
}

torch::Tensor Trainer::accumulate_gradients(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& targets) {
  const auto count = static_cast<double>(inputs.size());
  // The compiled backward is seeded with the same factor eager backward() gets; fp16's read from
  // the device, where a CUDA graph's replay reads the scale of its own step. One for every micro-batch.
  const GradScale seed = compiler_ && device_scale_ ? GradScale(device_scale_->seed(count)) : GradScale(1.0 / count);
  torch::Tensor loss;  // the sum so far, made by the first micro-batch's loss
  const auto add = [&loss](const torch::Tensor& term) { loss = loss.defined() ? loss + term : term.to(torch::kFloat); };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    // Data-parallel: the last micro-batch's backward starts the gradient all-reduces, except in
    // a CUDA graph, which records no collective (they run between its graphs: run_step).
    if (data_parallel_ && !step_graphs_ && i + 1 == inputs.size()) data_parallel_->expect_gradients();
    if (compiler_) {
      const torch::Tensor micro_loss = compiler_->run(inputs[i], targets[i], seed);
      // One micro-batch: its loss as the program returns it. Dividing by 1 and adding to a zeroed
      // sum change nothing, and in a CUDA graph they were three launches on the step's path.
      if (inputs.size() == 1 && micro_loss.scalar_type() == torch::kFloat) return micro_loss;
      add(micro_loss / count);
      continue;
    }
    const torch::Tensor micro_loss = loss_fn_(inputs[i], targets[i]) / count;
    if (!micro_loss.requires_grad()) throw UserError(no_gradient_path_message(model_->describe()));
    (device_scale_ ? micro_loss * device_scale_->scale() : micro_loss).backward();
    add(micro_loss.detach());
  }
  return loss;
}

double Trainer::learning_rate_at(int64_t steps_done) const {
  return args_.learning_rate * schedule_(steps_done - scaler_.skipped_steps());
}

void Trainer::run_step(std::vector<Batch>& micro_batches, torch::Tensor& loss, torch::Tensor& grad_norm) {
  std::vector<torch::Tensor> inputs, targets;
  for (const Batch& batch : micro_batches) {
    inputs.push_back(batch.inputs);
    targets.push_back(batch.targets);
  }
  const double learning_rate = learning_rate_at(state_.global_step);
  if (device_scale_) device_scale_->set(scaler_.scale());  // changed by the last step's overflow or growth
  if (step_graphs_) {
    // A write on the device before the replay reads it, or, for a step that starts on the device
    // (which takes its rate from the schedule's table, kept ahead of it here), the host's record only.
    if (step_start_) {
      step_start_->before_step(state_.global_step);
      record_learning_rate(*optimizer_, learning_rate);
    } else {
      set_learning_rate(*optimizer_, learning_rate);
    }
    const StepResult result = step_graphs_->run(inputs, targets);
    loss = result.loss;
    grad_norm = result.grad_norm;
    return;
  }
  loss = accumulate_gradients(inputs, targets);
  if (data_parallel_) data_parallel_->finish_gradients();  // the means, in .grad
  // The norm of a skipped step's gradients is still logged.
  const bool take_step = update_runs();
  grad_norm = clip_grad_norm(parameters_, args_.max_grad_norm);
  if (take_step) {
    set_learning_rate(*optimizer_, learning_rate);
    optimizer_->step();
  }
  optimizer_->zero_grad();
}

bool Trainer::update_runs() {
  return !device_scale_ || scaler_.update(device_scale_->unscale(parameters_));
}

void Trainer::check_loss_scale() {
  if (!scaler_.exhausted()) return;
  // A forward that made NaN or inf is the likelier cause, and its message names the step it began at.
  check_finite_loss();
  throw UserError("fp16: gradients not finite at step " + std::to_string(state_.global_step) + " and the loss scale halved to " +
                      format_number(scaler_.scale(), 3) + ", below float32's normal range: no scale makes them finite, so the " +
                      "model itself makes NaN or inf in its backward (" + std::to_string(scaler_.skipped_steps()) +
                      " steps skipped in all); stopping. Last good checkpoint: " + last_good_checkpoint_.value_or("none") +
                      " (try bf16 or a lower learning_rate)",
                  kExitFailure);
}

void Trainer::check_finite_loss() {
  const int64_t bad_step = first_nonfinite_step_.item<int64_t>();
  if (bad_step < 0) return;
  throw UserError("non-finite loss at step " + std::to_string(bad_step) + "; stopping. Last good checkpoint: " +
                      last_good_checkpoint_.value_or("none") + " (try a lower learning_rate or a max_grad_norm)",
                  kExitFailure);
}

void Trainer::record(nlohmann::json event, double epoch) {
  event["epoch"] = epoch;
  event["step"] = state_.global_step;
  state_.log_history.push_back(event);
  reporter_->record(event);
}

double Trainer::mean_over_ranks(const torch::Tensor& value) const {
  return (data_parallel_ ? data_parallel_->mean(value) : value).item<double>();
}

void Trainer::log_step(double epoch) {
  if (steps_since_log_ == 0) return;
  check_finite_loss();
  const double seconds = seconds_since(last_log_time_);
  // The mean over the ranks, as Hugging Face logs it (a collective: every rank logs at the same steps).
  const double loss = mean_over_ranks(loss_since_log_) / static_cast<double>(steps_since_log_);
  const double grad_norm = last_grad_norm_.item<double>();
  const double learning_rate = learning_rate_at(state_.global_step);
  const double samples_per_second = static_cast<double>(samples_since_log_) / std::max(seconds, 1e-9);
  const double step_time_ms = 1000.0 * seconds / static_cast<double>(steps_since_log_);
  nlohmann::json event = {{"loss", loss},
                          {"grad_norm", grad_norm},
                          {"learning_rate", learning_rate},
                          {"samples_per_second", samples_per_second},
                          {"step_time_ms", step_time_ms}};
  if (scaler_.enabled()) event["loss_scale"] = scaler_.scale();
  std::string throughput = format_count(samples_per_second) + " samples/s";
  if (data_.language_model) {
    const double tokens_per_second = samples_per_second * static_cast<double>(data_.sample_shape[0]);
    event["tokens_per_second"] = tokens_per_second;
    throughput = format_count(tokens_per_second) + " tokens/s";
  }
  record(event, epoch);
  reporter_->info("step " + std::to_string(state_.global_step) + "/" + std::to_string(plan_.total_steps) + "  epoch " +
                  format_number(epoch, 3) + "  loss " + format_number(loss) + "  lr " + format_number(learning_rate, 3) +
                  "  grad_norm " + format_number(grad_norm, 3) + (scaler_.enabled() ? "  loss_scale " + format_number(scaler_.scale(), 17) : "") +
                  "  " + throughput + "  " +
                  format_number(step_time_ms, 3) + " ms/step");
  loss_since_log_.zero_();
  steps_since_log_ = 0;
  samples_since_log_ = 0;
  last_log_time_ = std::chrono::steady_clock::now();
}

nlohmann::json Trainer::run_evaluation(double epoch) {
  if (!data_.eval) return nullptr;
  check_finite_loss();
  nlohmann::json metrics =
      evaluate(*model_, *data_.eval, args_.per_device_eval_batch_size, device_, precision_, data_.language_model);
  record(metrics, epoch);
  std::string line = "eval step " + std::to_string(state_.global_step) + "  eval_loss " + format_number(metrics["eval_loss"]);
  if (metrics.contains("eval_accuracy")) line += "  eval_accuracy " + format_number(metrics["eval_accuracy"]);
  if (metrics.contains("eval_perplexity")) line += "  eval_perplexity " + format_number(metrics["eval_perplexity"]);
  reporter_->info(line);
  if (args_.metric_for_best_model) {
    const std::string key = best_metric_key(*args_.metric_for_best_model);
    if (!metrics.contains(key)) {
      std::vector<std::string> available;
      for (const auto& item : metrics.items()) available.push_back(item.key());
      throw UserError("metric_for_best_model: evaluation reports no " + key + "; it reports " + join(available, ", "));
    }
    pending_best_ = metrics[key].get<double>();
  }
  return metrics;
}

void Trainer::maybe_save(bool force) {
  const bool improves = pending_best_ && (!state_.best_metric || (args_.greater_is_better.value_or(false)
                                                                       ? *pending_best_ > *state_.best_metric
                                                                       : *pending_best_ < *state_.best_metric));
  if (args_.save_strategy == "best" && !improves && !force) return;
  const std::string path = (fs::path(args_.output_dir) / ("checkpoint-" + std::to_string(state_.global_step))).string();
  if (improves) {
    state_.best_metric = pending_best_;
    state_.best_model_checkpoint = path;
  }
  pending_best_.reset();
  check_finite_loss();  // never save the weights of a run that has diverged
  state_.loss_scale = scaler_.checkpointed();
  // Each rank's dropout stream, so that every rank resumes exactly (a collective).
  const std::vector<torch::Tensor> rank_rng_states =
      data_parallel_ ? data_parallel_->all_gather(at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state())
                     : std::vector<torch::Tensor>{};
  if (world_.is_main()) {  // the replicas hold the same weights; one writes them
    const std::string saved = save_checkpoint(args_.output_dir, *model_, args_.save_only_model ? nullptr : optimizer_.get(), args_.optim,
                                              state_, config_yaml_, rank_rng_states);
    remove_earlier_checkpoints(earlier_checkpoints_, saved);
    if (args_.save_total_limit) rotate_checkpoints(args_.output_dir, *args_.save_total_limit, state_.best_model_checkpoint);
    reporter_->info("saved " + path);
  }
  last_good_checkpoint_ = path;  // every rank's, for the non-finite loss's message
  if (data_parallel_) data_parallel_->barrier();  // no rank runs ahead of a checkpoint being written
}

int Trainer::train() {
  const auto run_start = std::chrono::steady_clock::now();
  setup();
  // Everything is checked before the output directory is touched: a run that fails here leaves it as it was.
  std::optional<std::string> resume_dir;
  if (args_.resume_from_checkpoint) {
    resume_dir = resume_checkpoint_dir(args_, warnings_);
    load_model_weights(*resume_dir, *model_);
    state_ = load_training_state(*resume_dir, *optimizer_, args_.optim, world_.rank);
    check_resumed_step(*resume_dir, state_);
    if (state_.loss_scale) {
      scaler_ = LossScaler(args_.fp16, *state_.loss_scale);
    } else if (args_.fp16) {
      warnings_.push_back(*resume_dir + " has no scaler.json (saved by a run without fp16, or by a trainc that did not keep the scale): the loss scale starts again at " +
                          format_number(scaler_.scale(), 17));
    }
    last_good_checkpoint_ = resume_dir;
    state_.max_steps = plan_.total_steps;
    find_best_checkpoint_beside(state_, *resume_dir, warnings_);
  }
  config_yaml_ = to_yaml_text(config_);
  // Rank 0 owns output_dir; the other ranks log warnings only (Hugging Face's log_level_replica).
  if (world_.is_main()) {
    earlier_checkpoints_ = prepare_output_dir(args_);
    std::ofstream(fs::path(args_.output_dir) / "run_config.yaml") << config_yaml_;
  }
  configure_logging(world_.is_main() ? args_.log_level : "warning");
  reporter_ = std::make_unique<Reporter>(world_.is_main() ? (fs::path(args_.output_dir) / "metrics.jsonl").string() : "", false,
                                         args_.disable_tqdm);
  for (const auto& event : state_.log_history) reporter_->record(event);  // metrics.jsonl as of the checkpoint
  for (const std::string& warning : warnings_) reporter_->warn(warning);
  print_header();
  if (backend_) {
    for (const std::string& warning : backend_->warnings) reporter_->warn(warning);
  }
  start_compiler();
  if (resume_dir) reporter_->info("resumed from " + *resume_dir + " at step " + std::to_string(state_.global_step));

  const auto on_device = torch::TensorOptions().device(device_);
  loss_since_log_ = torch::zeros({}, on_device.dtype(torch::kDouble));
  loss_total_ = torch::zeros({}, on_device.dtype(torch::kDouble));
  first_nonfinite_step_ = torch::full({}, -1, on_device.dtype(torch::kLong));
  last_grad_norm_ = torch::zeros({}, on_device);
  last_log_time_ = std::chrono::steady_clock::now();
  InterruptWatch interrupts;
  if (world_.rank == 0) trace_ = KernelTrace::from_environment(device_);  // one trace file, not one per rank
  const int64_t accumulation = args_.gradient_accumulation_steps;
  int64_t epoch = state_.global_step / plan_.steps_per_epoch;
  int64_t step_in_epoch = state_.global_step % plan_.steps_per_epoch;
  auto epoch_value = [&] { return static_cast<double>(epoch) + static_cast<double>(step_in_epoch) / static_cast<double>(plan_.steps_per_epoch); };
  int stop_signal = 0;  // the signal that stopped the run (received here or, data-parallel, by any rank)
  while (state_.global_step < plan_.total_steps && stop_signal == 0) {
    // Whole-step graphs copy a batch from pinned host memory straight into their input buffers.
    BatchLoader loader(*data_.train, rank_share(data_.train->epoch_order(data_seed_, epoch), world_),
                       args_.per_device_train_batch_size, args_.dataloader_drop_last, step_in_epoch * accumulation,
                       args_.dataloader_num_workers, device_, /*copy_to_device=*/!step_graphs_);
    while (state_.global_step < plan_.total_steps) {
      const auto step_start = std::chrono::steady_clock::now();
      std::vector<Batch> micro_batches;
      while (static_cast<int64_t>(micro_batches.size()) < accumulation) {
        std::optional<Batch> batch = loader.next();
        if (!batch) break;
        micro_batches.push_back(std::move(*batch));
      }
      if (micro_batches.empty()) break;  // end of the epoch
      int64_t samples = 0;  // over all ranks
      for (const Batch& batch : micro_batches) samples += batch.size() * world_.size;
      torch::Tensor loss, grad_norm;
      if (trace_) trace_->before_step(state_.global_step + 1);
      run_step(micro_batches, loss, grad_norm);
      // Compile and capture times are reported on their own (compile_seconds, capture_seconds), not as step time.
      double setup_seconds = 0.0;
      if (compiler_) setup_seconds += compiler_->take_compile_seconds();
      if (step_graphs_) setup_seconds += step_graphs_->take_capture_seconds();
      last_log_time_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(setup_seconds));
      ++state_.global_step;
      ++step_in_epoch;
      if (trace_) trace_->after_step(state_.global_step);
      if (!step_start_) track_step_loss(loss, state_.global_step, loss_since_log_, loss_total_, first_nonfinite_step_);  // else the step's own
      if (!device_.is_cuda()) check_finite_loss();  // free on the CPU: stop at the very step
      check_loss_scale();  // before any save, so that no checkpoint keeps a scale a resume would refuse
      ++steps_since_log_;
      ++steps_this_run_;
      samples_since_log_ += samples;
      samples_this_run_ += samples;
      last_grad_norm_ = grad_norm;
      state_.epoch = epoch_value();
      const double seconds = seconds_since(step_start);
      const bool last_step = state_.global_step == plan_.total_steps;
      const bool epoch_done = step_in_epoch == plan_.steps_per_epoch;
      // The epoch strategies act at the last step too when max_steps (or a fractional
      // num_train_epochs) stops training inside an epoch, as Hugging Face's Trainer ends the epoch
      // it stopped in: a run saved by epoch keeps its work.
      const bool epoch_ends = epoch_done || last_step;

      const bool log_now = (args_.logging_strategy == "steps" && state_.global_step % plan_.logging_steps == 0) ||
                           (args_.logging_first_step && state_.global_step == 1) ||
                           (args_.logging_strategy == "epoch" && epoch_ends);
      if (log_now) log_step(state_.epoch);
      nlohmann::json eval_metrics;
      if ((args_.eval_strategy == "steps" && state_.global_step % plan_.eval_steps == 0) ||
          (args_.eval_strategy == "epoch" && epoch_ends)) {
        eval_metrics = run_evaluation(state_.epoch);
      }
      const bool save_now = (args_.save_strategy == "steps" && (state_.global_step % plan_.save_steps == 0 || last_step)) ||
                            (args_.save_strategy == "epoch" && epoch_ends) ||
                            (args_.save_strategy == "best" && !eval_metrics.is_null());
      // A signal to any rank stops every rank at this step (they agree at each step when distributed).
      stop_signal = data_parallel_ ? data_parallel_->agree_on_signal(interrupts.signal_number()) : interrupts.signal_number();
      if (stop_signal != 0) {
        log_step(state_.epoch);
        maybe_save(/*force=*/true);
        break;
      }
      if (save_now) maybe_save(/*force=*/false);
      reporter_->progress(state_.global_step, plan_.total_steps, seconds);
      if (epoch_done) break;
    }
    if (stop_signal != 0) break;
    ++epoch;
    step_in_epoch = 0;
  }
  reporter_->finish_progress();
  if (trace_) trace_->finish();  // a run that ended inside the window saves the steps it traced
  check_finite_loss();
  if (stop_signal != 0) {
    reporter_->info("stopped by signal " + std::to_string(stop_signal) + (interrupts.signal_number() != stop_signal ? " (to another rank)" : "") +
                    " at step " + std::to_string(state_.global_step) +
                    (args_.save_only_model ? "; its checkpoint holds the weights only (save_only_model), so the run cannot resume from it"
                                           : "; resume with --resume-from-checkpoint true"));
    return 128 + stop_signal;
  }

  const double runtime = seconds_since(run_start);
  remove_earlier_checkpoints(earlier_checkpoints_);  // a run that saved nothing has still replaced the earlier one
  if (args_.load_best_model_at_end && state_.best_model_checkpoint) {
    load_model_weights(*state_.best_model_checkpoint, *model_);
    reporter_->info("loaded the best model (" + *args_.metric_for_best_model + " " + format_number(*state_.best_metric) +
                    ") from " + *state_.best_model_checkpoint);
  }
  nlohmann::json summary = {{"train_runtime", runtime},
                            {"train_samples_per_second", static_cast<double>(samples_this_run_) / runtime},
                            {"train_steps_per_second", static_cast<double>(steps_this_run_) / runtime},
                            {"train_loss", steps_this_run_ > 0 ? mean_over_ranks(loss_total_) / static_cast<double>(steps_this_run_) : 0.0}};
  if (compiler_) summary["compile_seconds"] = compiler_->total_compile_seconds();
  std::string memory;
  if (const auto peak = peak_gpu_memory_bytes(device_)) {
    summary["peak_memory_gb"] = static_cast<double>(*peak) / 1e9;
    memory = ", peak GPU memory " + format_number(summary["peak_memory_gb"], 3) + " GB";
  }
  record(summary, state_.epoch);
  reporter_->info("done: " + std::to_string(state_.global_step) + " steps in " + format_number(runtime, 3) + " s, " +
                  format_count(summary["train_samples_per_second"]) + " samples/s, train_loss " +
                  format_number(summary["train_loss"]) + memory);
  if (scaler_.skipped_steps() > 0) {
    reporter_->info("fp16: " + std::to_string(scaler_.skipped_steps()) + " of " + std::to_string(state_.global_step) +
                    " steps skipped for overflowed gradients (no update, the schedule held)" +
                    (scaler_.enabled() ? "; loss scale now " + format_number(scaler_.scale(), 17) : ""));
  }
  // A record read back from a checkpoint holds null where the value was not finite.
  const auto metric = [](const nlohmann::json& value) { return value.is_number() ? value.get<double>() : std::nan(""); };
  for (auto it = state_.log_history.rbegin(); it != state_.log_history.rend(); ++it) {
    if (!it->contains("eval_loss")) continue;
    std::string line = "final eval (step " + std::to_string((*it)["step"].get<int64_t>()) + "): eval_loss " +
                       format_number(metric((*it)["eval_loss"]));
    if (it->contains("eval_accuracy")) {
      line += ", eval_accuracy " + format_number(metric((*it)["eval_accuracy"])) + " (" +
              format_number(100.0 * metric((*it)["eval_accuracy"]), 4) + "% correct)";
    }
    if (it->contains("eval_perplexity")) line += ", eval_perplexity " + format_number(metric((*it)["eval_perplexity"]));
    reporter_->info(line);
    break;
  }
  if (data_parallel_) data_parallel_->close();
  return kExitOk;
}

}  // namespace trainc
