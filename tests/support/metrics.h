// defines: read_metrics — the records of a run's metrics.jsonl, in order
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trainc::test {

std::vector<nlohmann::json> read_metrics(const std::string& output_dir);

}  // namespace trainc::test
