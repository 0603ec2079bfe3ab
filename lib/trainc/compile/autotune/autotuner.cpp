#include "trainc/compile/autotune/autotuner.h"

#include <chrono>
#include <cstdio>
#include <exception>

namespace trainc {
namespace {

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", seconds * 1e3);
  return text;
}

bool offered(const std::vector<TuningCandidate>& candidates, const std::string& name) {
  for (const TuningCandidate& candidate : candidates) {
    if (candidate.name == name) return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> Autotuner::choose(const std::string& key, const std::vector<TuningCandidate>& candidates) {
  if (const auto known = chosen_.find(key); known != chosen_.end()) return known->second;
  if (const std::optional<std::string> recorded = cache_.find(key); recorded && offered(candidates, *recorded)) {
    ++stats_.from_cache;
    return chosen_[key] = recorded;
  }
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::string> best;
  double best_seconds = 0.0;
  std::string measured;
  bool lacked_memory = false;  // a candidate that ran out of memory might run another time
  for (const TuningCandidate& candidate : candidates) {
    std::string outcome;
    try {
      const double seconds = measure_(candidate.run);
      outcome = milliseconds(seconds);
      if (!best || seconds < best_seconds) {
        best = candidate.name;
        best_seconds = seconds;
      }
    } catch (const std::exception& error) {
      std::string reason = error.what();
      lacked_memory = lacked_memory || reason.find("out of memory") != std::string::npos;
      reason = reason.substr(0, reason.find('\n'));
      outcome = "cannot run (" + reason.substr(0, 160) + ")";
    }
    measured += (measured.empty() ? "" : ", ") + candidate.name + " " + outcome;
  }
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats_.measured;
  // The record is worth keeping only when every candidate had its chance; failing to write it
  // costs a later run a measurement, not this run its step.
  if (best && !lacked_memory) {
    try {
      cache_.store(key, *best, measured);
    } catch (const std::exception& error) {
      if (stats_.unrecorded.empty()) stats_.unrecorded = error.what();
    }
  }
  return chosen_[key] = best;
}

TuningStats Autotuner::take_stats() {
  const TuningStats stats = stats_;
  stats_ = TuningStats{};
  return stats;
}

}  // namespace trainc
