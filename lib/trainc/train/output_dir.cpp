#include "trainc/train/output_dir.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "trainc/common/error.h"
#include "trainc/train/checkpoint.h"

namespace trainc {
namespace fs = std::filesystem;

void prepare_output_dir(const TrainingArguments& args) {
  const fs::path dir(args.output_dir);
  const bool resuming = args.resume_from_checkpoint.has_value();
  const auto unusable = [&](const std::string& what, const std::error_code& error) {
    return UserError("output_dir: cannot " + what + " " + args.output_dir + " (" + error.message() +
                     "); expected a directory trainc can create and write in");
  };
  std::error_code error;
  const bool exists = fs::exists(dir, error);
  if (error) throw unusable("look at", error);  // a parent that cannot be searched, say
  if (exists && !fs::is_directory(dir)) {
    throw UserError("output_dir: " + args.output_dir + " exists and is not a directory");
  }
  const bool non_empty = exists && !fs::is_empty(dir);
  if (non_empty && !resuming) {
    if (!args.overwrite_output_dir) {
      throw UserError("output_dir: " + args.output_dir +
                      " is not empty; set overwrite_output_dir: true to replace its checkpoints and metrics, or "
                      "resume_from_checkpoint: true to continue the run in it");
    }
    // Replace what a previous run wrote; leave anything else the user keeps there.
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (checkpoint_step(entry.path().string()) >= 0) remove_checkpoint(entry.path().string());
      if (name == "metrics.jsonl" || name == "run_config.yaml") fs::remove(entry.path());
    }
  }
  fs::create_directories(dir, error);
  if (error) throw unusable("create", error);
  remove_stale_checkpoint_files(args.output_dir);
}

}  // namespace trainc
