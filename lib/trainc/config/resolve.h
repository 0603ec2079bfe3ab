// defines: CommandLineOverride, build_run_config, kBuiltinConfigName
//
// The whole config path of one run: defaults < YAML (a file, or the built-in quickstart config
// when no file is given) < command-line overrides, then Hugging Face's resolution and validation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

struct CommandLineOverride {
  std::string flag;                  // as typed, e.g. "--learning-rate"
  std::optional<std::string> value;  // none for a bare boolean flag
};

inline constexpr const char kBuiltinConfigName[] = "<built-in quickstart config>";

RunConfig build_run_config(const std::optional<std::string>& config_path,
                           const std::vector<CommandLineOverride>& overrides, std::vector<std::string>* warnings);

}  // namespace trainc
