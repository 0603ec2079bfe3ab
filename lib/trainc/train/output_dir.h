// defines: prepare_output_dir
//
// A run's output_dir made ready before it writes anything, as Hugging Face's Trainer treats it: a
// directory that exists and is not empty is refused unless the run resumes from it or
// overwrite_output_dir says to replace what an earlier run wrote there (its checkpoints, metrics
// and run config; anything else the user keeps there stays). Temporary directories left by a run
// killed while saving or deleting a checkpoint are removed. A path that is not a directory, or
// that cannot be looked at or created, is a UserError naming it. The run then holds a lock on
// output_dir (the file .trainc.lock) until it ends: a second run there is refused.
#pragma once

#include "trainc/config/training_arguments.h"

namespace trainc {

void prepare_output_dir(const TrainingArguments& args);

}  // namespace trainc
