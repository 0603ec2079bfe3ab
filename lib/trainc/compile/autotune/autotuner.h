// defines: TuningCandidate, TuningStats, Autotuner
//
// max-autotune's one decision, made the same way for every kind of candidate (attention backends,
// BLAS libraries, launch shapes of generated kernels): run each candidate on the real inputs, time
// it, keep the fastest. Choices are remembered by key, for the rest of the run (the twelve layers
// of a GPT-2 ask the same question once) and on disk (TuningCache), so a later run does not measure
// again. A candidate that throws (a kernel that does not take these inputs) is left out; when one
// ran out of memory the choice is kept for this run only.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainc/compile/autotune/tuning_cache.h"

namespace trainc {

struct TuningCandidate {
  std::string name;
  std::function<void()> run;  // one call on the real inputs; results are thrown away
};

struct TuningStats {
  int measured = 0;       // choices measured in this run
  int from_cache = 0;     // choices read from the tuning cache
  double seconds = 0.0;   // spent measuring
  std::string unrecorded; // why a choice could not be written to the tuning cache (the first reason)
};

class Autotuner {
 public:
  // Seconds one call of the work takes (compat/device_timing's time_on_device in a run).
  using Measure = std::function<double(const std::function<void()>&)>;

  Autotuner(TuningCache cache, Measure measure) : cache_(std::move(cache)), measure_(std::move(measure)) {}

  // The fastest candidate's name for `key`: remembered, read from the cache, or measured now.
  // Empty when every candidate threw.
  std::optional<std::string> choose(const std::string& key, const std::vector<TuningCandidate>& candidates);

  // What was measured and read since the last call.
  TuningStats take_stats();
  const TuningCache& cache() const { return cache_; }

 private:
  TuningCache cache_;
  Measure measure_;
  std::map<std::string, std::optional<std::string>> chosen_;
  TuningStats stats_;
};

}  // namespace trainc
