#include "support/kernel_cache.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace trainc::test {
namespace {

// A folder under $TMPDIR (or /tmp) for this process, removed at exit. mkdtemp rather than the e2e
// helpers (support/command), which the CUDA test binary does not link.
class PrivateCache {
 public:
  PrivateCache() {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/trainc-test-cache-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("cannot create a temporary folder from " + name);
    path_ = name;
  }
  ~PrivateCache() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
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
