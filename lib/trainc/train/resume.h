// defines: resume_checkpoint_dir, check_resumed_step, find_best_checkpoint_beside
//
// Where a resumed run starts: the checkpoint resume_from_checkpoint names (a path, or true for the
// newest complete one in output_dir), checked against the state it holds, and the best checkpoint
// its trainer state names, found again from wherever the run was started.
#pragma once

#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"
#include "trainc/train/trainer_state.h"

namespace trainc {

// The checkpoint directory to resume from, spelled without a trailing slash ("out/checkpoint-9/"
// names checkpoint-9, whose step and neighbours are read from the name). UserError when there is
// none; each newer checkpoint passed over as incomplete is added to `warnings`.
std::string resume_checkpoint_dir(const TrainingArguments& args, std::vector<std::string>& warnings);

// UserError when `dir` is named checkpoint-N and `state` holds another step: resume_from_checkpoint:
// true picks the newest by its name, so such a name would resume an older state than the user
// sees, and the next saves would land beside it.
void check_resumed_step(const std::string& dir, const TrainerState& state);

// The best checkpoint sits beside the one resumed from: its path as this run reaches it, so that
// rotation and load_best_model_at_end find it whatever directory the run was started from. When it
// is gone, the best is tracked again, with a warning.
void find_best_checkpoint_beside(TrainerState& state, const std::string& resume_dir, std::vector<std::string>& warnings);

}  // namespace trainc
