#include "trainc/config/emit.h"

#include <algorithm>

#include "trainc/config/fields.h"

namespace trainc {

YAML::Node to_yaml(const RunConfig& config) {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node model(YAML::NodeType::Map);
  YAML::Node data(YAML::NodeType::Map);
  for (const FieldInfo& field : config_fields()) {
    if (!why_not_read(field, config).empty()) continue;
    YAML::Node& target = field.section == "model" ? model : field.section == "data" ? data : root;
    target[field.name] = field.emit(config);
  }
  root["model"] = model;
  root["data"] = data;
  return root;
}

std::string to_yaml_text(const RunConfig& config) {
  YAML::Emitter out;
  out << to_yaml(config);
  return std::string(out.c_str()) + "\n";
}

}  // namespace trainc
