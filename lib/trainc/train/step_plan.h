// defines: StepPlan, plan_steps, batch_count
//
// The run's step counts, resolved from the config and the training set's size before anything
// trains: batches and optimizer steps an epoch, total steps, warmup, and the logging, evaluation
// and saving intervals (ratios below 1 resolved against the total), as Hugging Face's Trainer
// counts them (a last, partial accumulation is a step of its own).
#pragma once

#include <cstdint>

#include "trainc/config/training_arguments.h"

namespace trainc {

// Step counts resolved from the config and the dataset size.
struct StepPlan {
  int64_t batches_per_epoch = 0;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t warmup_steps = 0;
  int64_t logging_steps = 0;  // ratios (< 1) of total_steps resolved to counts, rounded up
  int64_t eval_steps = 0;
  int64_t save_steps = 0;
};

// A UserError when dataloader_drop_last leaves an epoch without a batch.
StepPlan plan_steps(const TrainingArguments& args, int64_t train_samples);

// Batches an epoch of `samples` makes: a last, smaller one unless drop_last.
int64_t batch_count(int64_t samples, int64_t batch_size, bool drop_last);

}  // namespace trainc
