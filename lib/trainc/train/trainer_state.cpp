#include "trainc/train/trainer_state.h"

#include <algorithm>
#include <cstdint>

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

namespace {

// A field of trainer_state.json, its type checked: nlohmann's own errors name neither the file nor
// the key, and it casts a number too large for int64 to garbage.
const nlohmann::json& field(const nlohmann::json& json, const char* key, const std::string& source) {
  const auto found = json.find(key);
  if (found == json.end()) throw UserError(source + ": no " + key + "; not a valid trainer state");
  return *found;
}

int64_t whole_number(const nlohmann::json& json, const char* key, const std::string& source, int64_t minimum) {
  const nlohmann::json& value = field(json, key, source);
  const bool fits = value.is_number_integer() && (!value.is_number_unsigned() || value.get<uint64_t>() <= INT64_MAX);
  if (!fits || value.get<int64_t>() < minimum) {
    throw UserError(source + ": " + key + " is " + value.dump() + ", expected a whole number >= " + std::to_string(minimum));
  }
  return value.get<int64_t>();
}

double number(const nlohmann::json& json, const char* key, const std::string& source) {
  const nlohmann::json& value = field(json, key, source);
  if (!value.is_number()) throw UserError(source + ": " + key + " is " + value.dump() + ", expected a number");
  return value.get<double>();
}

}  // namespace

TrainerState TrainerState::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw UserError(source + ": not a valid trainer state (expected a JSON object)");
  TrainerState state;
  state.global_step = whole_number(json, "global_step", source, 0);
  state.epoch = number(json, "epoch", source);
  state.max_steps = whole_number(json, "max_steps", source, 0);
  state.logging_steps = whole_number(json, "logging_steps", source, 0);
  state.eval_steps = whole_number(json, "eval_steps", source, 0);
  state.save_steps = whole_number(json, "save_steps", source, 0);
  const nlohmann::json& history = field(json, "log_history", source);
  if (!history.is_array()) throw UserError(source + ": log_history is " + history.type_name() + ", expected a list of records");
  // The run reads its records back: the step of each, and the losses and metrics it reports at the end.
  for (std::size_t i = 0; i < history.size(); ++i) {
    const std::string record = "log_history[" + std::to_string(i) + "]";
    if (!history[i].is_object()) throw UserError(source + ": " + record + " is " + history[i].dump() + ", expected a record (a JSON object)");
    whole_number(history[i], "step", source + ": " + record, 0);
    for (const char* key : {"loss", "eval_loss", "eval_accuracy", "eval_perplexity"}) {
      // null: a value that was not finite (JSON has no NaN; nlohmann writes it as null).
      if (history[i].contains(key) && !history[i][key].is_null()) number(history[i], key, source + ": " + record);
    }
  }
  state.log_history = history;
  if (!field(json, "best_metric", source).is_null()) state.best_metric = number(json, "best_metric", source);
  const nlohmann::json& best_checkpoint = field(json, "best_model_checkpoint", source);
  if (!best_checkpoint.is_null()) {
    if (!best_checkpoint.is_string() || best_checkpoint.get<std::string>().empty()) {
      throw UserError(source + ": best_model_checkpoint is " + best_checkpoint.dump() + ", expected a path or null");
    }
    state.best_model_checkpoint = best_checkpoint.get<std::string>();
  }
  return state;
}

}  // namespace trainc
