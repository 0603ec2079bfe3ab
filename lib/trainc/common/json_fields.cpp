#include "trainc/common/json_fields.h"

#include "trainc/common/error.h"

namespace trainc {

const nlohmann::json& json_field(const nlohmann::json& json, const char* key, const std::string& source) {
  const auto found = json.find(key);
  if (found == json.end()) throw UserError(source + ": no " + key + "; damaged, or not written by trainc");
  return *found;
}

int64_t json_whole_number(const nlohmann::json& json, const char* key, const std::string& source, int64_t minimum) {
  const nlohmann::json& value = json_field(json, key, source);
  const bool fits = value.is_number_integer() && (!value.is_number_unsigned() || value.get<uint64_t>() <= INT64_MAX);
  if (!fits || value.get<int64_t>() < minimum) {
    throw UserError(source + ": " + key + " is " + value.dump() + ", expected a whole number >= " + std::to_string(minimum));
  }
  return value.get<int64_t>();
}

double json_number(const nlohmann::json& json, const char* key, const std::string& source) {
  const nlohmann::json& value = json_field(json, key, source);
  if (!value.is_number()) throw UserError(source + ": " + key + " is " + value.dump() + ", expected a number");
  return value.get<double>();
}

}  // namespace trainc
