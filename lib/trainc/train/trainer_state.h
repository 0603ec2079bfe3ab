// defines: TrainerState, kCheckpointFormatVersion
//
// What a checkpoint's trainer_state.json holds, with Hugging Face's key names: global_step,
// epoch, log_history, best_metric, best_model_checkpoint (plus the step intervals it used).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace trainc {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char kCheckpointFormatName[] = "trainc-checkpoint";

struct TrainerState {
  int64_t global_step = 0;
  double epoch = 0.0;
  int64_t max_steps = 0;
  int64_t logging_steps = 0;
  int64_t eval_steps = 0;
  int64_t save_steps = 0;
  nlohmann::json log_history = nlohmann::json::array();
  std::optional<double> best_metric;
  std::optional<std::string> best_model_checkpoint;

  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& json, const std::string& source);
};

}  // namespace trainc
