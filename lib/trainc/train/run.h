// defines: RunOptions, run_training, run_explain — what the `trainc` command runs
#pragma once

#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

// Switches of one invocation that are not part of the run config.
struct RunOptions {
  std::string dump_dir;  // --dump-dir: write every compiled step's graphs here as text
};

// Returns the process exit code (kExitOk, kExitInterrupted). Throws UserError for bad input.
int run_training(const RunConfig& config, const std::string& config_source, const std::vector<std::string>& warnings,
                 const RunOptions& options);

// `trainc explain`: plans the compiled step for the config's first batch and prints what the
// planner sees (captured ops, graph breaks, backend and mode, planned kernels). Trains nothing.
int run_explain(const RunConfig& config, const std::string& config_source, const RunOptions& options);

}  // namespace trainc
