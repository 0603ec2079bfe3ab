#include "trainc/compat/dedicated_stream.h"

#if TRAINC_WITH_CUDA

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <map>
#include <mutex>
#include <utility>

namespace trainc {

c10::cuda::CUDAStream dedicated_stream(const std::string& use, c10::DeviceIndex index,
                                       const std::function<void(c10::cuda::CUDAStream)>& prepare) {
  static std::mutex mutex;
  // Never destroyed: the streams outlive every other static that may still queue work at exit.
  static auto& streams = *new std::map<std::pair<std::string, c10::DeviceIndex>, c10::cuda::CUDAStream>();
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(use, index);
  if (const auto found = streams.find(key); found != streams.end()) return found->second;
  c10::cuda::CUDAGuard on_device(index);
  cudaStream_t raw = nullptr;
  int least_priority = 0, greatest_priority = 0;
  C10_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  C10_CUDA_CHECK(cudaStreamCreateWithPriority(&raw, cudaStreamNonBlocking, least_priority));
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromExternal(raw, index);
  try {
    if (prepare) prepare(stream);
  } catch (...) {
    cudaStreamDestroy(raw);  // no unprepared stream left for the next caller
    throw;
  }
  streams.emplace(key, stream);
  return stream;
}

}  // namespace trainc

#endif
