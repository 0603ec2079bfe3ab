// defines: CommandResult, run_command, run_trainc, wait_for, ScratchDir — helpers for end-to-end tests
#pragma once

#include <functional>
#include <string>

namespace trainc::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `command` through /bin/sh, capturing stdout, stderr and the exit code.
CommandResult run_command(const std::string& command);

// Runs the real trainc binary with `arguments` (already shell-quoted where needed).
CommandResult run_trainc(const std::string& arguments);

// Polls `condition` every 20 ms for up to `seconds`; whether it became true.
bool wait_for(const std::function<bool()>& condition, double seconds);

// A fresh directory under the system temp dir, removed when the object goes away.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const;  // returns the path

 private:
  std::string path_;
};

std::string read_text(const std::string& path);

}  // namespace trainc::test
