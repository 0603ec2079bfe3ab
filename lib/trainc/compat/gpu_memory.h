// defines: peak_gpu_memory_bytes — the most GPU memory LibTorch's caching allocator has held in
// tensors on `device` since the process started (torch.cuda.max_memory_allocated). Empty on
// builds without CUDA and for CPU devices.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace trainc {

std::optional<int64_t> peak_gpu_memory_bytes(c10::Device device);

}  // namespace trainc
