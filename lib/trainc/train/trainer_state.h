// defines: TrainerState, kCheckpointFormatVersion
//
// What a checkpoint's trainer_state.json holds, with Hugging Face's key names: global_step,
// epoch, log_history, best_metric, best_model_checkpoint (plus the step intervals it used). The
// loss scaler's state is kept beside it, in scaler.json.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "trainc/train/loss_scaler.h"

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
  // scaler.json: set for a run that scales its loss (fp16) or has skipped steps; not part of to_json.
  std::optional<LossScaleState> loss_scale;

  nlohmann::json to_json() const;
  static TrainerState from_json(const nlohmann::json& json, const std::string& source);
};

}  // namespace trainc
