#include "support/kernel_cache.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>

namespace trainc::test {
namespace {

// A folder under $TMPDIR (or /tmp) for this process, removed at exit. POSIX calls only: the CUDA
// test binaries avoid std::filesystem (tests/CMakeLists.txt says why).
class PrivateCache {
 public:
  PrivateCache() {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/trainc-test-cache-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("cannot create a temporary folder from " + name);
    path_ = name;
  }
  ~PrivateCache() {
    const auto remove_entry = [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); };
    ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

CompilerSettings test_compiler_settings() {
  static const PrivateCache cache;
  CompilerSettings settings = compiler_settings_from_environment();
  settings.cache_dir = cache.path();
  return settings;
}

}  // namespace trainc::test
