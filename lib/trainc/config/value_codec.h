// defines: ValueCodec<T> — read one typed config value from YAML and write it back
//
// Every config value, from a YAML file or from the command line, goes through these codecs, so
// both sources accept the same spellings and fail with the same messages. `where` is the key
// path shown to the user ("model.n_layer" or "--model.n-layer"). Writing then reading a value
// gives it back exactly (doubles use the shortest round-trip form).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include "trainc/common/error.h"
#include "trainc/config/training_arguments.h"

namespace trainc {

std::string describe_node(const YAML::Node& node);  // "\"abc\"", "a mapping", "a list", "null"
bool parse_bool_text(const std::string& text, bool* out);  // Hugging Face's strtobool spellings
std::string format_double(double value);  // shortest text that reads back as the same double

[[noreturn]] inline void fail_value(const std::string& where, const YAML::Node& node, const std::string& expected) {
  throw UserError(where + ": got " + describe_node(node) + ", expected " + expected);
}

inline std::string scalar_text(const YAML::Node& node, const std::string& where, const std::string& expected) {
  if (!node.IsScalar()) fail_value(where, node, expected);
  return node.Scalar();
}

template <typename T>
struct ValueCodec;

template <>
struct ValueCodec<bool> {
  static const char* type_name() { return "bool"; }
  static bool parse(const YAML::Node& node, const std::string& where) {
    bool value = false;
    if (!parse_bool_text(scalar_text(node, where, "true or false"), &value)) fail_value(where, node, "true or false");
    return value;
  }
  static YAML::Node emit(bool value) { return YAML::Node(value ? "true" : "false"); }
};

template <>
struct ValueCodec<int64_t> {
  static const char* type_name() { return "int"; }
  static int64_t parse(const YAML::Node& node, const std::string& where) {
    const std::string text = scalar_text(node, where, "an integer");
    int64_t value = 0;
    const char* end = text.data() + text.size();
    const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
    auto result = std::from_chars(begin, end, value);
    if (result.ec == std::errc::result_out_of_range) fail_value(where, node, "an integer in [-9223372036854775808, 9223372036854775807]");
    if (text.empty() || result.ec != std::errc() || result.ptr != end) fail_value(where, node, "an integer");
    return value;
  }
  static YAML::Node emit(int64_t value) { return YAML::Node(std::to_string(value)); }
};

template <>
struct ValueCodec<double> {
  static const char* type_name() { return "float"; }
  static double parse(const YAML::Node& node, const std::string& where) {
    const std::string text = scalar_text(node, where, "a number");
    char* end = nullptr;
    errno = 0;
    const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
      fail_value(where, node, "a finite number (e.g. 3e-4)");
    }
    // A literal too small for a double reads as 0, which would silently mean something else.
    if (errno == ERANGE && value == 0.0) fail_value(where, node, "0, or a number that does not round to 0 (the smallest is about 5e-324)");
    return value;
  }
  static YAML::Node emit(double value) { return YAML::Node(format_double(value)); }
};

template <>
struct ValueCodec<std::string> {
  static const char* type_name() { return "string"; }
  static std::string parse(const YAML::Node& node, const std::string& where) {
    if (node.IsNull()) fail_value(where, node, "a string");
    return scalar_text(node, where, "a string");
  }
  static YAML::Node emit(const std::string& value) { return YAML::Node(value); }
};

template <typename T>
struct ValueCodec<std::optional<T>> {
  static std::string type_name() { return std::string(ValueCodec<T>::type_name()) + " or null"; }
  static std::optional<T> parse(const YAML::Node& node, const std::string& where) {
    if (!node.IsDefined() || node.IsNull()) return std::nullopt;
    return ValueCodec<T>::parse(node, where);
  }
  static YAML::Node emit(const std::optional<T>& value) {
    return value ? ValueCodec<T>::emit(*value) : YAML::Node(YAML::NodeType::Null);
  }
};

template <typename T>
struct ValueCodec<std::vector<T>> {
  static std::string type_name() { return std::string("list of ") + ValueCodec<T>::type_name(); }
  static std::vector<T> parse(const YAML::Node& node, const std::string& where) {
    std::vector<T> values;
    if (node.IsScalar()) {  // a single value stands for a list of one
      values.push_back(ValueCodec<T>::parse(node, where));
      return values;
    }
    if (!node.IsSequence()) fail_value(where, node, type_name());
    for (std::size_t i = 0; i < node.size(); ++i) {
      values.push_back(ValueCodec<T>::parse(node[i], where + "[" + std::to_string(i) + "]"));
    }
    return values;
  }
  static YAML::Node emit(const std::vector<T>& values) {
    YAML::Node node(YAML::NodeType::Sequence);
    for (const T& value : values) node.push_back(ValueCodec<T>::emit(value));
    node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
};

template <>
struct ValueCodec<StringMap> {
  static const char* type_name() { return "mapping"; }
  static StringMap parse(const YAML::Node& node, const std::string& where) {
    StringMap values;
    if (node.IsNull()) return values;
    if (!node.IsMap()) fail_value(where, node, "a mapping such as {num_cycles: 2}");
    for (const auto& item : node) {
      const std::string key = scalar_text(item.first, where, "key names (a mapping such as {num_cycles: 2})");
      if (values.count(key)) throw UserError(where + "." + key + ": set twice");
      values[key] = scalar_text(item.second, where + "." + key, "a single value");
    }
    return values;
  }
  static YAML::Node emit(const StringMap& values) {
    YAML::Node node(YAML::NodeType::Map);
    for (const auto& [key, value] : values) node[key] = value;
    node.SetStyle(YAML::EmitterStyle::Flow);
    return node;
  }
};

}  // namespace trainc
