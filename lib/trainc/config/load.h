// defines: read_yaml_file, parse_yaml_text, apply_yaml, apply_override
//
// Building a RunConfig: built-in defaults < YAML file < command line. Each step checks keys and
// types as it goes, so every error names where the bad value came from: the file with line and
// column, or the command-line flag.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>

#include "trainc/config/training_arguments.h"

namespace trainc {

// A missing or unreadable file, or a YAML syntax error (file:line:column), is a UserError.
YAML::Node read_yaml_file(const std::string& path);
YAML::Node parse_yaml_text(const std::string& text, const std::string& source);

// Applies a parsed document: top-level TrainingArguments keys plus `model:` and `data:` sections.
// `source` (a file name) prefixes errors.
void apply_yaml(RunConfig& config, const YAML::Node& root, const std::string& source);

// Applies one command-line flag. `flag` is spelled as typed ("--learning-rate", "--model.n_layer");
// a missing value means `true` for booleans and is an error otherwise.
void apply_override(RunConfig& config, const std::string& flag, const std::optional<std::string>& value);

// "--model.n-layer" -> "model.n_layer"; "" if `flag` does not start with "--".
std::string key_from_flag(const std::string& flag);

}  // namespace trainc
