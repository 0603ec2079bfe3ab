// Which kernels runtime/cuda_modules may launch as programmatic dependents: those whose definition
// in the source begins with TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); as its first statement. Anything else
// (no wait, a wait after other work, a call, a longer name, a kernel a macro pastes together, a
// definition that waits only in a comment or in one branch of an #if) is launched as before, so
// the check must say no.
#include <catch2/catch.hpp>

#include "trainc/compile/runtime/cuda_modules.h"

using trainc::kernel_waits_for_previous;

TEST_CASE("a kernel is launched as a dependent only where its body begins by waiting for the kernel before it", "[unit]") {
  const std::string source = R"(
extern "C" __global__ void __launch_bounds__(256) trainc_a(const float* __restrict__ x, float* y) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  y[threadIdx.x] = x[threadIdx.x];
}
extern "C" __global__ void trainc_b(float* y,
    int n)
{
    TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
}
extern "C" __global__ void trainc_late(float* y) {
  y[0] = 1.0f;
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
}
extern "C" __global__ void trainc_none(float* y) { y[0] = 1.0f; }
extern "C" __global__ void xtrainc_none(float* y) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
}
static __device__ void helper(float* y) { trainc_none(y); }
#define KERNELS(W) extern "C" __global__ void trainc_pasted##W(float* y) { TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); }
KERNELS(8)
// extern "C" __global__ void trainc_commented(float* y) { TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); }
/* extern "C" __global__ void trainc_commented(float* y) { TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); } */
extern "C" __global__ void trainc_commented(float* y) { y[0] = 1.0f; }
#if __CUDA_ARCH__ >= 900
extern "C" __global__ void trainc_branches(float* y) { TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); }
#else
extern "C" __global__ void trainc_branches(float* y) { y[0] = 1.0f; }
#endif
)";
  CHECK(kernel_waits_for_previous(source, "trainc_a"));
  CHECK(kernel_waits_for_previous(source, "trainc_b"));          // its signature over two lines, the brace on its own
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_late"));  // work before the wait
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_none"));  // no wait; also called by name, and the end of a longer name
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_pasted8"));
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_missing"));
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_commented"));  // only its commented-out definitions wait
  CHECK_FALSE(kernel_waits_for_previous(source, "trainc_branches"));   // one of its two definitions does not
}
