#include "trainc/train/trainer_state.h"

#include "trainc/common/error.h"
#include "trainc/common/json_fields.h"

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
  if (!json.is_object()) throw UserError(source + ": not a valid trainer state (expected a JSON object)");
  TrainerState state;
  state.global_step = json_whole_number(json, "global_step", source, 0);
  state.epoch = json_number(json, "epoch", source);
  state.max_steps = json_whole_number(json, "max_steps", source, 0);
  state.logging_steps = json_whole_number(json, "logging_steps", source, 0);
  state.eval_steps = json_whole_number(json, "eval_steps", source, 0);
  state.save_steps = json_whole_number(json, "save_steps", source, 0);
  const nlohmann::json& history = json_field(json, "log_history", source);
  if (!history.is_array()) throw UserError(source + ": log_history is " + history.type_name() + ", expected a list of records");
  // The run reads its records back: the step of each, and the losses and metrics it reports at the end.
  for (std::size_t i = 0; i < history.size(); ++i) {
    const std::string record = "log_history[" + std::to_string(i) + "]";
    if (!history[i].is_object()) throw UserError(source + ": " + record + " is " + history[i].dump() + ", expected a record (a JSON object)");
    json_whole_number(history[i], "step", source + ": " + record, 0);
    for (const char* key : {"loss", "eval_loss", "eval_accuracy", "eval_perplexity"}) {
      // null: a value that was not finite (JSON has no NaN; nlohmann writes it as null).
      if (history[i].contains(key) && !history[i][key].is_null()) json_number(history[i], key, source + ": " + record);
    }
  }
  state.log_history = history;
  if (!json_field(json, "best_metric", source).is_null()) state.best_metric = json_number(json, "best_metric", source);
  const nlohmann::json& best_checkpoint = json_field(json, "best_model_checkpoint", source);
  if (!best_checkpoint.is_null()) {
    if (!best_checkpoint.is_string() || best_checkpoint.get<std::string>().empty()) {
      throw UserError(source + ": best_model_checkpoint is " + best_checkpoint.dump() + ", expected a path or null");
    }
    state.best_model_checkpoint = best_checkpoint.get<std::string>();
  }
  return state;
}

}  // namespace trainc
