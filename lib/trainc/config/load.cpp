#include "trainc/config/load.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "trainc/common/error.h"
#include "trainc/config/fields.h"

namespace trainc {
namespace {

std::string position(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string unknown_key_message(const std::string& key_path, const std::string& section) {
  const std::string name = key_path.substr(key_path.rfind('.') == std::string::npos ? 0 : key_path.rfind('.') + 1);
  const std::string suggestion = closest_key(name, section_keys(section));
  std::string message = "unknown key '" + key_path + "'";
  if (!suggestion.empty()) message += "; did you mean '" + (section.empty() ? "" : section + ".") + suggestion + "'?";
  return message + " (docs/config.md lists every key)";
}

// `seen`: the full keys set so far in the file, where. YAML leaves a repeated key to the reader; the
// second would silently replace the first, and "model.n_layer" at the top level is the same key as
// n_layer under model:.
void apply_section(RunConfig& config, const YAML::Node& map, const std::string& section, const std::string& source,
                   std::map<std::string, YAML::Mark>& seen) {
  for (const auto& item : map) {
    const std::string name = item.first.Scalar();
    const std::string key = section.empty() ? name : section + "." + name;
    const std::string where = position(source, item.first.Mark());
    if (!item.first.IsScalar()) {
      const char* got = item.first.IsMap() ? "a mapping" : item.first.IsSequence() ? "a list" : "null";
      throw UserError(where + ": expected a key name, got " + got);
    }
    const auto [first, inserted] = seen.emplace(key, item.first.Mark());
    if (!inserted) throw UserError(where + ": " + key + ": set twice (first at " + position(source, first->second) + ")");
    if (section.empty() && (name == "model" || name == "data")) {
      if (item.second.IsNull()) continue;
      if (!item.second.IsMap()) throw UserError(where + ": " + name + ": expected a mapping of " + name + " keys");
      apply_section(config, item.second, name, source, seen);
      continue;
    }
    const FieldInfo* field = find_field(key);
    if (field == nullptr) throw UserError(where + ": " + unknown_key_message(key, section));
    try {
      field->parse(config, item.second, key);
    } catch (const UserError& error) {
      throw UserError(position(source, item.second.Mark()) + ": " + error.what());
    }
    config.explicitly_set.insert(key);
  }
}

}  // namespace

YAML::Node parse_yaml_text(const std::string& text, const std::string& source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& error) {
    throw UserError(position(source, error.mark) + ": YAML syntax error: " + error.msg);
  }
  if (documents.size() > 1) {
    throw UserError(source + ": holds " + std::to_string(documents.size()) +
                    " YAML documents (separated by ---); expected one run config");
  }
  return documents.empty() ? YAML::Node() : documents.front();
}

YAML::Node read_yaml_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw UserError(path + ": is a directory; expected a YAML config file");
  std::ifstream file(path);
  if (!file) throw UserError(path + ": cannot read the config file (does it exist?)");
  std::stringstream text;
  text << file.rdbuf();
  const std::string contents = text.str();
  // yaml-cpp reads a NUL byte as a bad escape at the wrong place: a binary file, or a damaged one.
  if (const std::size_t nul = contents.find('\0'); nul != std::string::npos) {
    const auto line = 1 + std::count(contents.begin(), contents.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw UserError(path + ":" + std::to_string(line) + ": holds a NUL byte; expected a YAML text file");
  }
  return parse_yaml_text(contents, path);
}

void apply_yaml(RunConfig& config, const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file keeps every default
  if (!root.IsMap()) throw UserError(source + ": expected a mapping of config keys at the top level");
  std::map<std::string, YAML::Mark> seen;
  apply_section(config, root, "", source, seen);
}

std::string key_from_flag(const std::string& flag) {
  if (flag.rfind("--", 0) != 0 || flag.size() == 2) return "";
  std::string key = flag.substr(2);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

void apply_override(RunConfig& config, const std::string& flag, const std::optional<std::string>& value) {
  const std::string key = key_from_flag(flag);
  const FieldInfo* field = find_field(key);
  if (field == nullptr) {
    const std::string section = key.find('.') == std::string::npos ? "" : key.substr(0, key.find('.'));
    const bool known_section = section.empty() || section == "model" || section == "data";
    std::string message = "unknown flag " + flag;
    const std::string suggestion =
        known_section ? closest_key(key.substr(section.empty() ? 0 : section.size() + 1), section_keys(section)) : "";
    if (!suggestion.empty()) {
      const FieldInfo* suggested = find_field(section.empty() ? suggestion : section + "." + suggestion);
      if (suggested != nullptr) message += "; did you mean " + suggested->flag() + "?";
    }
    throw UserError(message + " (trainc --help lists every flag)");
  }
  YAML::Node node;
  if (!value) {
    if (!field->is_bool) throw UserError(flag + ": expected a value (" + field->type_name + ")");
    node = YAML::Node("true");
  } else if (field->is_structured) {
    // Lists and mappings are read as YAML ("[256, 128]", "{num_cycles: 2}"); "a,b" is a list too.
    // A mapping has no such shorthand: "5" stays a scalar, which the mapping's codec names as such.
    const bool flow = !value->empty() && ((*value)[0] == '[' || (*value)[0] == '{');
    if (flow) {
      node = parse_yaml_text(*value, flag);
    } else {
      node = field->type_name == "mapping" ? YAML::Node(*value) : parse_yaml_text("[" + *value + "]", flag);
    }
  } else if (*value == "null" || *value == "None" || *value == "~") {
    node = YAML::Node(YAML::NodeType::Null);
  } else {
    node = YAML::Node(*value);
  }
  field->parse(config, node, flag);
  config.explicitly_set.insert(key);
}

}  // namespace trainc
