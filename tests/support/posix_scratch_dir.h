// defines: PosixScratchDir — a temporary folder removed at destruction, through POSIX calls only
//
// For the CUDA test binaries, which avoid std::filesystem and the e2e helpers (tests/CMakeLists.txt
// says why); elsewhere support/command.h's ScratchDir does the same.
#pragma once

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>

namespace trainc::test {

class PosixScratchDir {
 public:
  // Under $TMPDIR, else /tmp; `prefix` names it.
  explicit PosixScratchDir(const std::string& prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";  // mkdtemp's template
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temporary folder from " + pattern);
    path_ = pattern;
  }
  ~PosixScratchDir() {
    const auto remove_entry = [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); };
    ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  PosixScratchDir(const PosixScratchDir&) = delete;
  PosixScratchDir& operator=(const PosixScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace trainc::test
