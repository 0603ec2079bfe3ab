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

}  // namespace trainc::test
