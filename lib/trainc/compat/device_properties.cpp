#include "trainc/compat/device_properties.h"

#if TRAINC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace trainc {

int multiprocessor_count(c10::Device device) {
#if TRAINC_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.has_index() ? device.index() : at::cuda::current_device())->multiProcessorCount;
#endif
  (void)device;
  return 0;
}

}  // namespace trainc
