#include "trainc/config/value_codec.h"

#include <algorithm>
#include <array>

namespace trainc {

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return "\"" + node.Scalar() + "\"";
}

bool parse_bool_text(const std::string& text, bool* out) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"y", "yes", "t", "true", "on", "1"}) {
    if (lower == yes) return *out = true, true;
  }
  for (const char* no : {"n", "no", "f", "false", "off", "0"}) {
    if (lower == no) return *out = false, true;
  }
  return false;
}

std::string format_double(double value) {
  std::array<char, 64> buffer{};
  auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  std::string text(buffer.data(), result.ptr);
  // Keep floats recognizable as floats in the YAML we write: 3 -> 3.0.
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

}  // namespace trainc
