// defines: resolve_and_validate
//
// Hugging Face's TrainingArguments.__post_init__ rules, plus checks of the model and data
// sections. Resolves what can be resolved without the dataset or the hardware (a compile backend
// or mode implies torch_compile; eval_steps falls back to logging_steps; metric_for_best_model
// defaults to loss ...). Step counts below 1 stay ratios until the trainer knows the total steps;
// the compile backend left unset is chosen from the hardware when training starts.
#pragma once

#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

// Throws UserError on the first invalid setting. Returns warnings (deprecated keys, overrides).
std::vector<std::string> resolve_and_validate(RunConfig& config);

}  // namespace trainc
