#include "trainc/config/fields.h"

#include <algorithm>
#include <sstream>
#include <type_traits>

#include "trainc/config/value_codec.h"

namespace trainc {
namespace {

template <typename T>
constexpr bool is_structured_v = false;
template <typename T>
constexpr bool is_structured_v<std::vector<T>> = true;
template <>
constexpr bool is_structured_v<StringMap> = true;

template <typename Section, typename T>
FieldInfo make_field(const std::string& section, const std::string& name, T Section::*member,
                     Section RunConfig::*section_member, const T& default_value, const char* choices,
                     const char* applies_to, const char* help) {
  FieldInfo field;
  field.section = section;
  field.name = name;
  field.type_name = ValueCodec<T>::type_name();
  field.choices = split_choices(choices);
  field.applies_to = split_choices(applies_to);
  field.help = help;
  field.is_bool = std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>;
  field.is_structured = is_structured_v<T>;
  field.default_value = ValueCodec<T>::emit(default_value);
  const std::vector<std::string> valid = field.choices;
  field.parse = [member, section_member, valid](RunConfig& config, const YAML::Node& node, const std::string& where) {
    T value = ValueCodec<T>::parse(node, where);
    if (!valid.empty()) {
      // Enumerations are strings, optional strings or lists of strings; check each element.
      YAML::Node emitted = ValueCodec<T>::emit(value);
      std::vector<std::string> items;
      if (emitted.IsSequence()) {
        for (const auto& item : emitted) items.push_back(item.Scalar());
      } else if (emitted.IsScalar()) {
        items.push_back(emitted.Scalar());
      }
      for (const std::string& item : items) {
        if (std::find(valid.begin(), valid.end(), item) == valid.end()) {
          throw UserError(where + ": got \"" + item + "\", expected one of: " + join(valid, ", "));
        }
      }
    }
    (config.*section_member).*member = std::move(value);
  };
  field.emit = [member, section_member](const RunConfig& config) {
    return ValueCodec<T>::emit((config.*section_member).*member);
  };
  return field;
}

std::vector<FieldInfo> build_fields() {
  std::vector<FieldInfo> fields;
  const TrainingArguments args_defaults;
  const ModelConfig model_defaults;
  const DataConfig data_defaults;
#define TRAINC_ARGS_FIELD(type, name, default_value, choices, applies_to, help) \
  fields.push_back(make_field<TrainingArguments, type>("", #name, &TrainingArguments::name, &RunConfig::args, \
                                                       args_defaults.name, choices, applies_to, help));
#define TRAINC_MODEL_FIELD(type, name, default_value, choices, applies_to, help) \
  fields.push_back(make_field<ModelConfig, type>("model", #name, &ModelConfig::name, &RunConfig::model, \
                                                 model_defaults.name, choices, applies_to, help));
#define TRAINC_DATA_FIELD(type, name, default_value, choices, applies_to, help) \
  fields.push_back(make_field<DataConfig, type>("data", #name, &DataConfig::name, &RunConfig::data, \
                                                data_defaults.name, choices, applies_to, help));
  TRAINC_TRAINING_ARGUMENTS(TRAINC_ARGS_FIELD)
  TRAINC_MODEL_CONFIG(TRAINC_MODEL_FIELD)
  TRAINC_DATA_CONFIG(TRAINC_DATA_FIELD)
#undef TRAINC_ARGS_FIELD
#undef TRAINC_MODEL_FIELD
#undef TRAINC_DATA_FIELD
  return fields;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

#define TRAINC_FIELD_EQUAL(type, name, default_value, choices, applies_to, help) &&name == other.name
bool TrainingArguments::operator==(const TrainingArguments& other) const {
  return true TRAINC_TRAINING_ARGUMENTS(TRAINC_FIELD_EQUAL);
}
bool ModelConfig::operator==(const ModelConfig& other) const { return true TRAINC_MODEL_CONFIG(TRAINC_FIELD_EQUAL); }
bool DataConfig::operator==(const DataConfig& other) const { return true TRAINC_DATA_CONFIG(TRAINC_FIELD_EQUAL); }
#undef TRAINC_FIELD_EQUAL

std::string FieldInfo::flag() const {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return "--" + (section.empty() ? dashed : section + "." + dashed);
}

const std::vector<FieldInfo>& config_fields() {
  static const std::vector<FieldInfo> fields = build_fields();
  return fields;
}

const FieldInfo* find_field(const std::string& key) {
  for (const FieldInfo& field : config_fields()) {
    if (field.key() == key) return &field;
  }
  return nullptr;
}

std::vector<std::string> section_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const FieldInfo& field : config_fields()) {
    if (field.section == section) keys.push_back(field.name);
  }
  if (section.empty()) keys.insert(keys.end(), {"model", "data"});
  return keys;
}

std::string why_not_read(const FieldInfo& field, const RunConfig& config) {
  if (!field.applies_to.empty()) {
    const std::string& chosen = field.section == "model" ? config.model.name : config.data.kind;
    if (std::find(field.applies_to.begin(), field.applies_to.end(), chosen) == field.applies_to.end()) {
      return std::string("not read by ") + (field.section == "model" ? "model.name " : "data.kind ") + chosen + "; it applies to " +
             join(field.applies_to, ", ");
    }
  }
  // Keys that hinge on another key's value rather than on the model or data kind alone.
  const std::string key = field.key();
  if (key == "data.block_size" && config.data.kind == "synthetic" && config.model.name != "gpt") {
    return "not read by data.kind synthetic for model.name " + config.model.name + " (its samples are the model's inputs); it applies to gpt";
  }
  if (key == "data.validation_split" && config.data.eval_path) {
    return "not read when data.eval_path is set (the held-out data is that file)";
  }
  return "";
}

std::string closest_key(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(3, key.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(key, candidate);
    // Fewer edits than half the key's letters: a short word is not a typo of an unrelated key.
    if (distance < best_distance && 2 * distance < key.size()) best = candidate, best_distance = distance;
  }
  return best;
}

std::vector<std::string> split_choices(const std::string& joined) {
  std::vector<std::string> parts;
  std::stringstream stream(joined);
  for (std::string part; std::getline(stream, part, '|');) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) joined += (i ? separator : "") + parts[i];
  return joined;
}

}  // namespace trainc
