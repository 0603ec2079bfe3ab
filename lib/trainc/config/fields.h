// defines: FieldInfo, config_fields, find_field, why_not_read, closest_key
//
// The flat list of every config key, built from the X-macro tables in training_arguments.h.
// Parsing, command-line flags, --help, --print-config and docs/config.md all walk this list.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

struct FieldInfo {
  std::string section;  // "" for TrainingArguments, "model" or "data"
  std::string name;     // as spelled in YAML
  std::string type_name;
  std::vector<std::string> choices;     // empty: any value of the type
  std::vector<std::string> applies_to;  // empty: every model / data kind
  std::string help;
  bool is_bool = false;
  bool is_structured = false;  // a list or mapping: command-line values are read as YAML
  std::function<void(RunConfig&, const YAML::Node&, const std::string& where)> parse;
  std::function<YAML::Node(const RunConfig&)> emit;
  YAML::Node default_value;

  std::string key() const { return section.empty() ? name : section + "." + name; }
  std::string flag() const;  // "--learning-rate", "--model.n-layer"
};

const std::vector<FieldInfo>& config_fields();
const FieldInfo* find_field(const std::string& key);

// Why `config` does not read `field` ("not read by model.name mlp; it applies to gpt"), or "" when
// it does. Setting such a key is an error, and --print-config leaves it out.
std::string why_not_read(const FieldInfo& field, const RunConfig& config);

// The valid key closest to `key` by edit distance (for "did you mean"), or "" if none is close.
std::string closest_key(const std::string& key, const std::vector<std::string>& candidates);

// The keys valid inside one section ("" for the top level), for suggestions.
std::vector<std::string> section_keys(const std::string& section);

std::vector<std::string> split_choices(const std::string& joined);  // "a|b" -> {a, b}
std::string join(const std::vector<std::string>& parts, const std::string& separator);

}  // namespace trainc
