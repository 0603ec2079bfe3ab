// defines: test_compiler_settings — the C++ compiler settings for tests that generate kernels
#pragma once

#include "trainc/compile/runtime/kernel_cache.h"

namespace trainc::test {

// The environment's compiler, with a kernel cache private to this test process (removed at exit),
// so every test run compiles what it generates.
CompilerSettings test_compiler_settings();

}  // namespace trainc::test
