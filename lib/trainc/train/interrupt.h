// defines: InterruptWatch — SIGINT/SIGTERM handling for a training run
//
// The first SIGINT or SIGTERM asks the loop to stop after the current step; the loop then saves a
// checkpoint and exits with 128 + the signal number (130 for SIGINT, 143 for SIGTERM). A second
// SIGINT exits at once with 130, without saving (the last complete checkpoint stays intact).
#pragma once

namespace trainc {

class InterruptWatch {
 public:
  InterruptWatch();   // installs the handlers
  ~InterruptWatch();  // restores the previous ones
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  bool requested() const;
  int signal_number() const;  // 0 until a signal arrived
};

}  // namespace trainc
