// defines: prepare_output_dir, remove_earlier_checkpoints
//
// A run's output_dir made ready before it writes anything, as Hugging Face's Trainer treats it: a
// directory that exists and is not empty is refused unless the run resumes from it or
// overwrite_output_dir says to replace what an earlier run wrote there (its checkpoints, metrics
// and run config; anything else the user keeps there stays). The earlier run's metrics and run
// config are removed at once; its checkpoints only once this run has saved one of its own or
// finished, so that a run that fails before then keeps the earlier run's work. Temporary
// directories left by a run killed while saving or deleting a checkpoint are removed. A path that
// is not a directory, or that cannot be looked at or created, is a UserError naming it. The run
// then holds a lock on output_dir (the file .trainc.lock) until it ends: a second run there is
// refused.
#pragma once

#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

std::vector<std::string> prepare_output_dir(const TrainingArguments& args);

// Removes the earlier run's checkpoints (prepare_output_dir's) and empties the list; one named
// like `saved_checkpoint` (this run's save of the same step replaced it) stays.
void remove_earlier_checkpoints(std::vector<std::string>& earlier_checkpoints, const std::string& saved_checkpoint = "");

}  // namespace trainc
