#include "trainc/train/reporter.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "trainc/common/error.h"

namespace trainc {
namespace {

// %L: "" for info lines, "warning: " / "error: " / "debug: " for the others.
class LevelPrefix : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&, spdlog::memory_buf_t& dest) override {
    const char* prefix = "";
    switch (message.level) {
      case spdlog::level::warn: prefix = "warning: "; break;
      case spdlog::level::err: case spdlog::level::critical: prefix = "error: "; break;
      case spdlog::level::debug: case spdlog::level::trace: prefix = "debug: "; break;
      default: break;
    }
    dest.append(prefix, prefix + std::strlen(prefix));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelPrefix>(); }
};

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", static_cast<long>(total / 3600), static_cast<long>(total / 60 % 60),
                static_cast<long>(total % 60));
  return text;
}

}  // namespace

void configure_logging(const std::string& log_level) {
  spdlog::drop("trainc");
  auto logger = spdlog::stdout_logger_mt("trainc");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelPrefix>('L').set_pattern("[%H:%M:%S] %L%v");
  logger->set_formatter(std::move(formatter));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  const std::string level = log_level == "passive" ? "info" : log_level == "warning" ? "warn" : log_level;
  spdlog::set_level(spdlog::level::from_str(level));
}

Reporter::Reporter(const std::string& metrics_path, bool append, std::optional<bool> disable_tqdm)
    : metrics_path_(metrics_path),
      metrics_(metrics_path.empty() ? std::ofstream() : std::ofstream(metrics_path, append ? std::ios::app : std::ios::trunc)) {
  if (!metrics_path.empty() && !metrics_) throw UserError(metrics_path + ": cannot open for writing", kExitFailure);
  show_bar_ = !disable_tqdm.value_or(false) && ::isatty(STDOUT_FILENO);
}

void Reporter::clear_bar() {
  if (!bar_drawn_) return;
  std::fputs("\r\033[2K", stdout);
  std::fflush(stdout);
  bar_drawn_ = false;
}

void Reporter::info(const std::string& line) {
  clear_bar();
  spdlog::info(line);
}

void Reporter::warn(const std::string& line) {
  clear_bar();
  spdlog::warn(line);
}

void Reporter::record(const nlohmann::json& event) {
  if (!metrics_.is_open()) return;
  metrics_ << event.dump() << "\n";
  if (!metrics_.flush()) throw UserError(metrics_path_ + ": cannot write (disk full?)", kExitFailure);
}

void Reporter::progress(int64_t step, int64_t total_steps, double seconds_per_step) {
  if (!show_bar_) return;
  constexpr int kWidth = 30;
  const double fraction = total_steps > 0 ? static_cast<double>(step) / static_cast<double>(total_steps) : 0.0;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stdout, "\r\033[2K[%s] %ld/%ld  %3.0f%%  ETA %s", bar.c_str(), static_cast<long>(step),
               static_cast<long>(total_steps), 100.0 * fraction,
               format_duration(seconds_per_step * static_cast<double>(total_steps - step)).c_str());
  std::fflush(stdout);
  bar_drawn_ = true;
}

void Reporter::finish_progress() { clear_bar(); }

}  // namespace trainc
