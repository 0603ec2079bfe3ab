// defines: UserError, ExitCode, TRAINC_CHECK
//
// Two kinds of failure, kept apart on purpose:
//  - UserError: the input (config, flag, data file, checkpoint) is wrong. The message names the
//    key or file, the value seen and what was expected; main() prints it on one line and exits
//    with the error's code (2 for usage/config errors), never with a stack trace.
//  - TRAINC_CHECK: an internal invariant broke. That is a bug in trainc, reported with file:line.
#pragma once

#include <stdexcept>
#include <string>

namespace trainc {

// Process exit codes; docs/cli.md documents them for batch scripts.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // a run failed (bad data found mid-run, non-finite loss, internal error)
  kExitUsage = 2,        // bad config, flag or input file: nothing was trained
  kExitInterrupted = 130 // stopped by SIGINT/SIGTERM after saving a checkpoint
};

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message, int exit_code = kExitUsage)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

[[noreturn]] void fail_check(const char* condition, const char* file, int line, const std::string& detail);

}  // namespace trainc

#define TRAINC_CHECK(cond, detail)                                           \
  do {                                                                       \
    if (!(cond)) ::trainc::fail_check(#cond, __FILE__, __LINE__, (detail)); \
  } while (0)
