// defines: Checksum, file_checksum — 64-bit XXH3 content hashes as 16 hex digits
//
// Used where trainc must tell whether bytes are the ones it wrote or named: a checkpoint's files
// (a damaged file is refused rather than loaded), generated kernels in the kernel cache.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace trainc {

// A hash over bytes fed in pieces; the same bytes give the same digest however they are split.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* data, std::size_t size);
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The checksum of a file's bytes; throws UserError (naming the file) when it cannot be read.
std::string file_checksum(const std::string& path);

}  // namespace trainc
