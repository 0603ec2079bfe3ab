#include "support/kernel_cache.h"

#include "support/posix_scratch_dir.h"

namespace trainc::test {

CompilerSettings test_compiler_settings() {
  static const PosixScratchDir cache("trainc-test-cache");
  CompilerSettings settings = compiler_settings_from_environment();
  settings.cache_dir = cache.path();
  return settings;
}

}  // namespace trainc::test
