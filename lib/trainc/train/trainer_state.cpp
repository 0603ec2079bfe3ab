#include "trainc/train/trainer_state.h"

#include "trainc/common/error.h"

namespace trainc {

nlohmann::json TrainerState::to_json() const {
  nlohmann::json json = {
      {"global_step", global_step},   {"epoch", epoch},         {"max_steps", max_steps},
      {"logging_steps", logging_steps}, {"eval_steps", eval_steps}, {"save_steps", save_steps},
      {"log_history", log_history},
  };
  json["best_metric"] = best_metric ? nlohmann::json(*best_metric) : nlohmann::json(nullptr);
  json["best_model_checkpoint"] = best_model_checkpoint ? nlohmann::json(*best_model_checkpoint) : nlohmann::json(nullptr);
  return json;
}

TrainerState TrainerState::from_json(const nlohmann::json& json, const std::string& source) {
  try {
    TrainerState state;
    state.global_step = json.at("global_step").get<int64_t>();
    if (state.global_step < 0) throw UserError(source + ": global_step is " + std::to_string(state.global_step) + ", expected >= 0");
    state.epoch = json.at("epoch").get<double>();
    state.max_steps = json.at("max_steps").get<int64_t>();
    state.logging_steps = json.at("logging_steps").get<int64_t>();
    state.eval_steps = json.at("eval_steps").get<int64_t>();
    state.save_steps = json.at("save_steps").get<int64_t>();
    state.log_history = json.at("log_history");
    if (!json.at("best_metric").is_null()) state.best_metric = json.at("best_metric").get<double>();
    if (!json.at("best_model_checkpoint").is_null()) state.best_model_checkpoint = json.at("best_model_checkpoint").get<std::string>();
    return state;
  } catch (const nlohmann::json::exception& error) {
    throw UserError(source + ": not a valid trainer state: " + error.what());
  }
}

}  // namespace trainc
