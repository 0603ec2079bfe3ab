#include "support/metrics.h"

#include <sstream>

#include "support/command.h"

namespace trainc::test {

std::vector<nlohmann::json> read_metrics(const std::string& output_dir) {
  std::vector<nlohmann::json> events;
  std::istringstream lines(read_text(output_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) events.push_back(nlohmann::json::parse(line));
  return events;
}

std::vector<double> losses(const std::vector<nlohmann::json>& records) {
  std::vector<double> values;
  for (const auto& record : records) {
    if (record.contains("loss")) values.push_back(record["loss"].get<double>());
  }
  return values;
}

}  // namespace trainc::test
