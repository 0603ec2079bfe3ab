#include "trainc/train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace trainc {
namespace {

std::atomic<int> g_signal{0};
struct sigaction g_previous_int, g_previous_term;

void on_signal(int number) {
  if (g_signal.load() != 0 && number == SIGINT) {
    const char message[] = "\ntrainc: second interrupt: exiting now without saving\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
    ::_exit(128 + SIGINT);
  }
  g_signal.store(number);
  const char message[] = "\ntrainc: interrupt: finishing this step, then saving a checkpoint (interrupt again to quit now)\n";
  [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
}

}  // namespace

InterruptWatch::InterruptWatch() {
  g_signal.store(0);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

InterruptWatch::~InterruptWatch() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

bool InterruptWatch::requested() const { return g_signal.load() != 0; }
int InterruptWatch::signal_number() const { return g_signal.load(); }

}  // namespace trainc
