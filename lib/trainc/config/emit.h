// defines: to_yaml, to_yaml_text
//
// The resolved config as YAML: TrainingArguments keys at the top level, then `model:` and `data:`
// with the keys the chosen model and data kind read. Loading the text back gives an equal
// RunConfig (tested), so output_dir/run_config.yaml reproduces a run.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "trainc/config/training_arguments.h"

namespace trainc {

YAML::Node to_yaml(const RunConfig& config);
std::string to_yaml_text(const RunConfig& config);

}  // namespace trainc
