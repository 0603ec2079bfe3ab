// defines: json_field, json_whole_number, json_number — a JSON file's fields read with their types checked
//
// nlohmann's own errors name neither the file nor the key, and it casts a number too large for
// int64 to garbage; these name both (`source`: the file, or the file and the record) and say what
// was expected.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace trainc {

// The field `key` of `json`; UserError when it is absent.
const nlohmann::json& json_field(const nlohmann::json& json, const char* key, const std::string& source);
// An integer >= minimum that fits int64.
int64_t json_whole_number(const nlohmann::json& json, const char* key, const std::string& source, int64_t minimum);
// Any number.
double json_number(const nlohmann::json& json, const char* key, const std::string& source);

}  // namespace trainc
