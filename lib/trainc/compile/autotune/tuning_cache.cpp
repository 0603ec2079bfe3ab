#include "trainc/compile/autotune/tuning_cache.h"

#include <filesystem>
#include <fstream>

#include "trainc/compile/runtime/kernel_cache.h"

namespace trainc {
namespace {

constexpr const char* kMagic = "trainc autotune 1";

// Keys are one line in the record.
std::string one_line(std::string text) {
  for (char& c : text) c = (c == '\n' || c == '\r') ? ' ' : c;
  return text;
}

}  // namespace

std::string TuningCache::path_of(const std::string& key) const {
  return (std::filesystem::path(directory_) / (content_hash({one_line(key)}) + ".txt")).string();
}

std::optional<std::string> TuningCache::find(const std::string& key) const {
  if (directory_.empty()) return std::nullopt;
  std::ifstream in(path_of(key));
  std::string magic, key_line, choice_line;
  if (!std::getline(in, magic) || !std::getline(in, key_line) || !std::getline(in, choice_line)) return std::nullopt;
  if (magic != kMagic || key_line != "key: " + one_line(key) || choice_line.rfind("choice: ", 0) != 0) return std::nullopt;
  const std::string choice = choice_line.substr(8);
  if (choice.empty()) return std::nullopt;
  return choice;
}

void TuningCache::store(const std::string& key, const std::string& choice, const std::string& measured) const {
  if (directory_.empty()) return;
  const std::string text = std::string(kMagic) + "\nkey: " + one_line(key) + "\nchoice: " + one_line(choice) + "\nmeasured: " + one_line(measured) + "\n";
  publish_file(directory_, std::filesystem::path(path_of(key)).filename().string(), text);
}

}  // namespace trainc
