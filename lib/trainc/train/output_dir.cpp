#include "trainc/train/output_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "trainc/common/error.h"
#include "trainc/train/checkpoint.h"

namespace trainc {
namespace fs = std::filesystem;
namespace {

constexpr const char kLockFile[] = ".trainc.lock";

// Two runs writing one output_dir would interleave their checkpoints and metrics, and one that
// overwrites would delete the other's. The run holds an advisory lock on a file in output_dir
// while it lives; the kernel releases it when the process ends, however it ends.
void lock_output_dir(const fs::path& dir) {
  const fs::path path = dir / kLockFile;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("output_dir: cannot create " + path.string() + " (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      throw UserError("output_dir: cannot lock " + path.string() + " (" + reason +
                      "); trainc locks output_dir so that two runs never write it at once");
    }
    char holder[32] = {};
    const ssize_t got = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    throw UserError("output_dir: " + dir.string() + " is in use by another trainc run (pid " +
                    (got > 0 ? std::string(holder, static_cast<std::size_t>(got)) : std::string("unknown")) +
                    "); wait for it to end or choose another output_dir");
  }
  // The pid only names the holder in another run's message; the lock is what counts, so a failed
  // write is let be. The descriptor stays open, and so the lock held, until the process ends.
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
}

}  // namespace

std::vector<std::string> prepare_output_dir(const TrainingArguments& args) {
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
  // Whether an earlier run (or the user) left anything there; the lock file does not count.
  const auto holds_anything = [&] {
    if (!fs::is_directory(dir)) return false;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename() != kLockFile) return true;
    }
    return false;
  };
  const auto refuse_unless_allowed = [&](bool non_empty) {
    if (non_empty && !resuming && !args.overwrite_output_dir) {
      throw UserError("output_dir: " + args.output_dir +
                      " is not empty; set overwrite_output_dir: true to replace its checkpoints and metrics, or "
                      "resume_from_checkpoint: true to continue the run in it");
    }
  };
  refuse_unless_allowed(exists && holds_anything());  // before the lock file is made there
  fs::create_directories(dir, error);
  if (error) throw unusable("create", error);
  lock_output_dir(dir);  // before anything in it is replaced
  const bool non_empty = holds_anything();  // again under the lock: a run that held it may have written there
  refuse_unless_allowed(non_empty);
  std::vector<std::string> earlier_checkpoints;
  if (non_empty && !resuming) {
    // Replace what a previous run wrote; leave anything else the user keeps there. Its metrics and
    // run config go now (this run writes its own at once); its checkpoints stay until this run
    // has one of its own, so that a run that fails early leaves the earlier run's work.
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (checkpoint_step(entry.path().string()) >= 0) earlier_checkpoints.push_back(entry.path().string());
      if (name == "metrics.jsonl" || name == "run_config.yaml") fs::remove(entry.path());
    }
  }
  remove_stale_checkpoint_files(args.output_dir);
  return earlier_checkpoints;
}

void remove_earlier_checkpoints(std::vector<std::string>& earlier_checkpoints, const std::string& saved_checkpoint) {
  for (const std::string& path : earlier_checkpoints) {
    // A checkpoint of the same step was replaced by this run's save: it is this run's now.
    if (fs::path(path).filename() == fs::path(saved_checkpoint).filename()) continue;
    if (fs::exists(path)) remove_checkpoint(path);
  }
  earlier_checkpoints.clear();
}

}  // namespace trainc
