#include "trainc/config/resolve.h"

#include "trainc/config/load.h"
#include "trainc/config/validate.h"
#include "trainc/default_config.h"

namespace trainc {

RunConfig build_run_config(const std::optional<std::string>& config_path,
                           const std::vector<CommandLineOverride>& overrides, std::vector<std::string>* warnings) {
  RunConfig config;
  if (config_path) {
    apply_yaml(config, read_yaml_file(*config_path), *config_path);
  } else {
    apply_yaml(config, parse_yaml_text(kDefaultConfigYaml, kBuiltinConfigName), kBuiltinConfigName);
  }
  for (const CommandLineOverride& item : overrides) apply_override(config, item.flag, item.value);
  std::vector<std::string> found = resolve_and_validate(config);
  if (warnings != nullptr) warnings->insert(warnings->end(), found.begin(), found.end());
  return config;
}

}  // namespace trainc
