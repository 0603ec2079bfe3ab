// defines: LrSchedule, make_lr_schedule, check_lr_scheduler_kwargs, resolve_warmup_steps
//
// Learning-rate schedules as Hugging Face's transformers.optimization defines them: a multiplier
// of the peak learning rate as a function of the optimizer step (0-based, the step about to be
// taken), so lr(step) = learning_rate * multiplier(step). Pure arithmetic, no LibTorch, so the
// curves are tested directly against Hugging Face's formulas.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainc/config/training_arguments.h"

namespace trainc {

using LrSchedule = std::function<double(int64_t step)>;

// Throws UserError naming lr_scheduler_kwargs.<key> for a key the schedule does not read or a
// value of the wrong type.
void check_lr_scheduler_kwargs(const std::string& type, const StringMap& kwargs);

// warmup_steps >= 1 is a count; in (0, 1) a ratio of total steps (rounded up); the deprecated
// warmup_ratio applies only when warmup_steps is 0.
int64_t resolve_warmup_steps(const TrainingArguments& args, int64_t total_steps);

LrSchedule make_lr_schedule(const std::string& type, const StringMap& kwargs, int64_t warmup_steps,
                            int64_t total_steps, double learning_rate);

}  // namespace trainc
