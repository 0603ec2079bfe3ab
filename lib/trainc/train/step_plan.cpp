#include "trainc/train/step_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "trainc/common/error.h"
#include "trainc/config/value_codec.h"
#include "trainc/train/lr_schedule.h"

namespace trainc {
namespace {

int64_t resolve_interval(double value, int64_t total_steps) {
  if (value <= 0) return 0;
  if (value < 1) return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(value * static_cast<double>(total_steps))));
  return static_cast<int64_t>(value);
}

}  // namespace

int64_t batch_count(int64_t samples, int64_t batch_size, bool drop_last) {
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

StepPlan plan_steps(const TrainingArguments& args, int64_t train_samples) {
  StepPlan plan;
  plan.batches_per_epoch = batch_count(train_samples, args.per_device_train_batch_size, args.dataloader_drop_last);
  if (plan.batches_per_epoch == 0) {
    throw UserError("per_device_train_batch_size: " + std::to_string(args.per_device_train_batch_size) +
                    " is larger than the training set (" + std::to_string(train_samples) +
                    " samples) and dataloader_drop_last is true, so an epoch has no batch");
  }
  const int64_t accumulation = args.gradient_accumulation_steps;
  plan.steps_per_epoch = std::max<int64_t>(1, (plan.batches_per_epoch + accumulation - 1) / accumulation);
  const double epoch_steps = std::ceil(args.num_train_epochs * static_cast<double>(plan.steps_per_epoch));
  if (args.max_steps <= 0 && epoch_steps > 1e15) {
    throw UserError("num_train_epochs: got " + format_double(args.num_train_epochs) + ", which makes " + format_double(epoch_steps) +
                    " optimizer steps; expected at most 1e15 (or set max_steps)");
  }
  plan.total_steps = args.max_steps > 0 ? args.max_steps : static_cast<int64_t>(epoch_steps);
  plan.total_steps = std::max<int64_t>(1, plan.total_steps);
  plan.warmup_steps = resolve_warmup_steps(args, plan.total_steps);
  plan.logging_steps = resolve_interval(args.logging_steps, plan.total_steps);
  plan.eval_steps = resolve_interval(args.eval_steps.value_or(args.logging_steps), plan.total_steps);
  plan.save_steps = resolve_interval(args.save_steps, plan.total_steps);
  return plan;
}

}  // namespace trainc
