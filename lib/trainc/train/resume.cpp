#include "trainc/train/resume.h"

#include <filesystem>
#include <optional>

#include "trainc/common/error.h"
#include "trainc/train/checkpoint.h"

namespace trainc {
namespace fs = std::filesystem;

std::string resume_checkpoint_dir(const TrainingArguments& args, std::vector<std::string>& warnings) {
  std::vector<std::string> incomplete;
  const std::optional<std::string> chosen =
      *args.resume_from_checkpoint == "true" ? newest_checkpoint(args.output_dir, &incomplete) : args.resume_from_checkpoint;
  for (const std::string& skipped : incomplete) {
    warnings.push_back("resume_from_checkpoint: skipping " + skipped + ", an incomplete checkpoint (no trainc_checkpoint.json)");
  }
  if (!chosen) throw UserError("resume_from_checkpoint: true, but output_dir " + args.output_dir + " holds no complete checkpoint-<step>");
  fs::path spelled = fs::path(*chosen).lexically_normal();
  if (!spelled.has_filename() && spelled.has_parent_path()) spelled = spelled.parent_path();
  if (!fs::is_directory(spelled)) throw UserError("resume_from_checkpoint: " + spelled.string() + " is not a directory");
  return spelled.string();
}

void check_resumed_step(const std::string& dir, const TrainerState& state) {
  if (const int64_t named = checkpoint_step(dir); named >= 0 && named != state.global_step) {
    throw UserError(dir + ": named for step " + std::to_string(named) + ", but its trainer_state.json holds global_step " +
                    std::to_string(state.global_step) + " (renamed, or another checkpoint's files?)");
  }
}

void find_best_checkpoint_beside(TrainerState& state, const std::string& resume_dir, std::vector<std::string>& warnings) {
  if (!state.best_model_checkpoint) return;
  const fs::path beside = fs::path(resume_dir).parent_path() / fs::path(*state.best_model_checkpoint).filename();
  if (fs::exists(beside)) {
    state.best_model_checkpoint = beside.string();
  } else if (!fs::exists(*state.best_model_checkpoint)) {
    warnings.push_back("best_model_checkpoint " + *state.best_model_checkpoint + " of " + resume_dir +
                       " is gone; the best is tracked again from this run's evaluations");
    state.best_model_checkpoint.reset();
    state.best_metric.reset();
  }
}

}  // namespace trainc
