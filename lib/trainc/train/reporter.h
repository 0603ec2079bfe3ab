// defines: Reporter — what a run tells the person or the batch job watching it
//
// Log lines go to stdout through spdlog. metrics.jsonl in output_dir gets one JSON object per
// event (keys as Hugging Face's log_history names them). When stdout is a terminal and
// disable_tqdm is not true, a one-line progress bar with ETA redraws in place below the log;
// otherwise (batch jobs, files) nothing is animated and only the log lines appear.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

namespace trainc {

void configure_logging(const std::string& log_level);

class Reporter {
 public:
  // metrics_path empty: no metrics file (the other ranks of a data-parallel run).
  Reporter(const std::string& metrics_path, bool append, std::optional<bool> disable_tqdm);
  void info(const std::string& line);
  void warn(const std::string& line);
  void record(const nlohmann::json& event);  // one line of metrics.jsonl, flushed at once
  void progress(int64_t step, int64_t total_steps, double seconds_per_step);
  void finish_progress();

 private:
  void clear_bar();
  std::string metrics_path_;
  std::ofstream metrics_;
  bool show_bar_ = false;
  bool bar_drawn_ = false;
};

}  // namespace trainc
