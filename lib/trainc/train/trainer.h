// defines: Trainer
//
// The training loop, as Hugging Face's Trainer runs it: optimizer steps of
// gradient_accumulation_steps micro-batches, clipping, the schedule, then log / evaluate / save
// by their strategies. Exact resume: weights, optimizer, RNG states and the step counter come
// back from the checkpoint, and the data order is a function of (data seed, epoch), so a resumed
// run continues with the very batches the uninterrupted run would have used.
#pragma once

#include <torch/optim/optimizer.h>

#include <chrono>
#include <memory>
#include <string>

#include "trainc/compat/kernel_trace.h"
#include "trainc/compile/planner.h"
#include "trainc/compile/runtime/step_graphs.h"
#include "trainc/config/training_arguments.h"
#include "trainc/data/dataset.h"
#include "trainc/distributed/data_parallel.h"
#include "trainc/distributed/world.h"
#include "trainc/models/model.h"
#include "trainc/train/device_loss_scale.h"
#include "trainc/train/device_step_start.h"
#include "trainc/train/loss_scaler.h"
#include "trainc/train/lr_schedule.h"
#include "trainc/train/precision.h"
#include "trainc/train/reporter.h"
#include "trainc/train/run.h"
#include "trainc/train/step_plan.h"
#include "trainc/train/trainer_state.h"

namespace trainc {

class Trainer {
 public:
  Trainer(const RunConfig& config, std::string config_source, std::vector<std::string> warnings, RunOptions options = {});
  int train();    // returns the exit code
  int explain();  // `trainc explain`: prints the compile plan of the first batch

 private:
  // Device, data, model, optimizer, schedule and compile backend: everything checked before the
  // output directory is touched.
  void setup();
  void start_compiler();
  void print_header() const;
  // One optimizer step. The loss and gradient norm stay on the device: no host sync.
  void run_step(std::vector<Batch>& micro_batches, torch::Tensor& loss, torch::Tensor& grad_norm);
  // Forward and backward of each micro-batch (eager autograd, or the compiled step): gradients
  // accumulate into .grad; returns the mean loss, detached.
  torch::Tensor accumulate_gradients(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& targets);
  // Throws (exit 1) if any step so far had a non-finite loss. A host sync: called at every step on
  // the CPU, and before each log record, evaluation and save on a GPU.
  void check_finite_loss();
  // Whether the step's update runs, after its gradients (and their exchange): under fp16, the
  // gradients are unscaled and the scaler decides, as GradScaler does, with one host sync a step.
  bool update_runs();
  // fp16: stops the run (exit 1) once overflows have exhausted the loss scale (LossScaler::exhausted).
  void check_loss_scale();
  // The learning rate of the step that starts with `steps_done` steps done: the schedule's factor
  // times learning_rate (the one rule for each step's rate, its log record and the device's table).
  // The schedule stands still on steps fp16 skipped, as Hugging Face's scheduler does: the steps
  // skipped so far are subtracted, which holds for steps ahead (the device's table) only because
  // fp16's steps never start on the device (start_compiler).
  double learning_rate_at(int64_t steps_done) const;
  // A 0-dim device tensor's value averaged over the ranks (a collective when data-parallel), on the host.
  double mean_over_ranks(const torch::Tensor& value) const;
  void log_step(double epoch);
  nlohmann::json run_evaluation(double epoch);
  void maybe_save(bool force);  // force: save even under save_strategy best (an interrupt)
  void record(nlohmann::json event, double epoch);

  RunConfig config_;
  std::string config_source_;
  RunOptions options_;
  std::vector<std::string> warnings_;
  const TrainingArguments& args_;  // config_.args
  World world_;                                  // this process's rank among the data-parallel ones
  std::unique_ptr<DataParallel> data_parallel_;  // set when WORLD_SIZE > 1
  std::string ddp_backend_;                      // ddp_backend, or the device's default
  torch::Device device_{torch::kCPU};
  Precision precision_;
  LossScaler scaler_{false};
  std::unique_ptr<DeviceLossScale> device_scale_;  // fp16: the scale the backward and the unscaling read
  DataSplits data_;
  std::unique_ptr<Model> model_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  LossFunction loss_fn_;  // one micro-batch: autocast forward, then the loss in float32
  std::optional<BackendChoice> backend_;
  std::unique_ptr<StepCompiler> compiler_;  // set when a compiling backend runs the steps
  std::unique_ptr<StepGraphs> step_graphs_;  // set when the steps run as CUDA graphs
  std::unique_ptr<DeviceStepStart> step_start_;  // set when those steps start on the device
  std::unique_ptr<KernelTrace> trace_;       // set when TRAINC_PROFILE_TRACE asks for a profiler trace
  StepPlan plan_;
  LrSchedule schedule_;
  TrainerState state_;
  std::unique_ptr<Reporter> reporter_;
  std::string config_yaml_;
  std::vector<std::string> earlier_checkpoints_;  // an overwritten run's, removed at this run's first save or its end
  std::optional<std::string> last_good_checkpoint_;  // this run's latest save, or the checkpoint it resumed from
  uint64_t data_seed_ = 0;

  // Since the last log record (device tensors: read only when a record is written).
  torch::Tensor loss_since_log_;
  int64_t steps_since_log_ = 0;
  int64_t samples_since_log_ = 0;
  torch::Tensor last_grad_norm_;
  std::chrono::steady_clock::time_point last_log_time_;
  // Whole run.
  torch::Tensor loss_total_;
  torch::Tensor first_nonfinite_step_;  // -1, or the first step whose loss was not finite
  int64_t steps_this_run_ = 0;
  int64_t samples_this_run_ = 0;
  std::optional<double> pending_best_;  // metric of the latest evaluation, for the next save
};

}  // namespace trainc
