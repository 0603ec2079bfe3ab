// defines: read_metrics, losses — the records of a run's metrics.jsonl, in order
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trainc::test {

std::vector<nlohmann::json> read_metrics(const std::string& output_dir);

// The `loss` of every record that has one (the logged training steps), in order.
std::vector<double> losses(const std::vector<nlohmann::json>& records);

}  // namespace trainc::test
