#include "trainc/compat/device_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trainc/compat/torch_compat.h"

#if TRAINC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/detail/CUDAHooksInterface.h>
#endif

namespace trainc {
namespace {

#if TRAINC_WITH_CUDA
constexpr int64_t kFlushBytes = int64_t{256} << 20;
#endif

}  // namespace

double time_on_device(c10::Device device, const std::function<void()>& work, int repeats) {
  std::vector<double> seconds;
  work();
#if TRAINC_WITH_CUDA
  if (device.is_cuda()) {
    std::vector<at::cuda::CUDAEvent> events;
    events.reserve(static_cast<std::size_t>(2 * repeats));
    for (int r = 0; r < 2 * repeats; ++r) events.emplace_back(cudaEventDefault);
    // Each timed run starts with the GPU's L2 cache (50-60 MB on a Hopper) holding none of its
    // inputs, as Triton's benchmarks do: run after run on the same inputs would otherwise read
    // them from the cache, which a step's kernels, between other work, mostly do not.
    at::Tensor flush = at::empty({kFlushBytes}, at::TensorOptions().dtype(at::kByte).device(device));
    for (int r = 0; r < repeats; ++r) {
      flush.zero_();
      events[static_cast<std::size_t>(2 * r)].record();
      work();
      events[static_cast<std::size_t>(2 * r + 1)].record();
    }
    events.back().synchronize();
    for (int r = 0; r < repeats; ++r) {
      seconds.push_back(events[static_cast<std::size_t>(2 * r)].elapsed_time(events[static_cast<std::size_t>(2 * r + 1)]) / 1e3);
    }
  }
#endif
  if (seconds.empty()) {
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      work();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
  return seconds[seconds.size() / 2];
}

std::string device_identity(c10::Device device) {
#if TRAINC_WITH_CUDA
  if (device.is_cuda()) {
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index());
    const auto& hooks = at::detail::getCUDAHooks();
    return std::string(properties->name) + " (sm_" + std::to_string(properties->major) + std::to_string(properties->minor) +
           "), CUDA runtime " + std::to_string(hooks.versionCUDART()) + ", cuDNN " + std::to_string(hooks.versionCuDNN()) +
           ", LibTorch " + kTorchVersionText;
  }
#endif
  return device.str() + ", LibTorch " + kTorchVersionText;
}

}  // namespace trainc
