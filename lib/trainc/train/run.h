// defines: run_training — one training run from a resolved config, as the `trainc` command runs it
#pragma once

#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

// Returns the process exit code (kExitOk, kExitInterrupted). Throws UserError for bad input.
int run_training(const RunConfig& config, const std::string& config_source, const std::vector<std::string>& warnings);

}  // namespace trainc
