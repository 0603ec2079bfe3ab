#include "trainc/compat/gpu_memory.h"

#if TRAINC_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace trainc {

std::optional<int64_t> peak_gpu_memory_bytes(c10::Device device) {
#if TRAINC_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[0].peak;  // index 0: the aggregate over all pools
  }
#endif
  (void)device;
  return std::nullopt;
}

}  // namespace trainc
