// The test runner: Catch2's, plus a backtrace on stderr when a test crashes, so that a crash on a
// machine without a debugger still says where it happened.
#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_NO_POSIX_SIGNALS  // our handler below replaces Catch's fatal-signal handler
#include <catch2/catch.hpp>

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

namespace {
void print_backtrace_and_die(int signal_number) {
  void* frames[64];
  const int count = backtrace(frames, 64);
  const char header[] = "\nfatal signal in a test; backtrace:\n";
  [[maybe_unused]] auto ignored = write(STDERR_FILENO, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}
}  // namespace

int main(int argc, char* argv[]) {
  for (int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(signal_number, print_backtrace_and_die);
  return Catch::Session().run(argc, argv);
}
