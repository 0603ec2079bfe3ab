#include "trainc/common/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "trainc/common/error.h"

namespace trainc {
namespace {

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

struct Checksum::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

Checksum::Checksum() : state_(std::make_unique<State>()) { XXH3_64bits_reset(state_->xxh); }
Checksum::~Checksum() = default;

void Checksum::update(const void* data, std::size_t size) { XXH3_64bits_update(state_->xxh, data, size); }

std::string Checksum::hex() const { return hex64(XXH3_64bits_digest(state_->xxh)); }

std::string file_checksum(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError(path + ": cannot read");
  Checksum checksum;
  std::vector<char> buffer(1 << 20);
  while (file) {
    file.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    checksum.update(buffer.data(), static_cast<std::size_t>(file.gcount()));
  }
  if (file.bad()) throw UserError(path + ": cannot read");
  return checksum.hex();
}

}  // namespace trainc
