#include "trainc/compat/kernel_trace.h"

#include <cstdlib>
#include <set>

#include <torch/csrc/autograd/profiler_kineto.h>

#if TRAINC_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "trainc/common/error.h"

namespace trainc {
namespace {

[[noreturn]] void malformed_window(const std::string& text) {
  throw UserError("TRAINC_PROFILE_TRACE_STEPS=" + text + ": expected <first step>:<number of steps>, both positive integers, e.g. 11:3");
}

// One of the window's two numbers; `text` is the whole setting, for the error.
int64_t positive_integer(const std::string& digits, const std::string& text) {
  std::size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(digits, &used);
  } catch (const std::exception&) {
    malformed_window(text);
  }
  if (used != digits.size() || value < 1) malformed_window(text);
  return value;
}

void synchronize(c10::Device device) {
#if TRAINC_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
  (void)device;
}

}  // namespace

std::unique_ptr<KernelTrace> KernelTrace::from_environment(c10::Device device) {
  const char* path = std::getenv("TRAINC_PROFILE_TRACE");
  if (path == nullptr || *path == '\0') return nullptr;
  int64_t first = 11, count = 3;
  if (const char* steps = std::getenv("TRAINC_PROFILE_TRACE_STEPS"); steps != nullptr && *steps != '\0') {
    const std::string text(steps);
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos) malformed_window(text);
    first = positive_integer(text.substr(0, colon), text);
    count = positive_integer(text.substr(colon + 1), text);
  }
  // A trace of nothing, saved at once: a LibTorch without Kineto (Debian's) or a path that
  // cannot be written stops the run here, not after the steps before the window.
  try {
    namespace profiler = torch::profiler::impl;
    const profiler::ProfilerConfig config(profiler::ProfilerState::KINETO);
    torch::autograd::profiler::prepareProfiler(config, {profiler::ActivityType::CPU});
    torch::autograd::profiler::enableProfiler(config, {profiler::ActivityType::CPU});
    torch::autograd::profiler::disableProfiler()->save(path);
  } catch (const c10::Error& error) {
    throw UserError(std::string("TRAINC_PROFILE_TRACE=") + path + ": cannot save a profiler trace: " + error.msg());
  }
  return std::make_unique<KernelTrace>(path, first, count, device);
}

KernelTrace::KernelTrace(std::string path, int64_t first, int64_t count, c10::Device device)
    : path_(std::move(path)), first_(first), last_(first + count - 1), device_(device) {}

void KernelTrace::before_step(int64_t step) {
  if (step != first_ || active_) return;
  namespace profiler = torch::profiler::impl;
  std::set<profiler::ActivityType> activities = {profiler::ActivityType::CPU};
  if (device_.is_cuda()) activities.insert(profiler::ActivityType::CUDA);
  synchronize(device_);  // the window starts with an idle device: earlier steps' kernels stay out
  const profiler::ProfilerConfig config(profiler::ProfilerState::KINETO);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  active_ = true;
}

void KernelTrace::after_step(int64_t step) {
  if (step == last_) finish();
}

void KernelTrace::finish() {
  if (!active_) return;
  synchronize(device_);  // every kernel of the window has run before the trace is collected
  torch::autograd::profiler::disableProfiler()->save(path_);
  active_ = false;
}

}  // namespace trainc
