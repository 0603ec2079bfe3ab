// defines: dedicated_stream (in builds with CUDA)
//
// A CUDA stream of trainc's own for one use on one device, created at the first request and kept
// for the process. ATen hands its pool streams out in turn, so a pool stream may be the one a
// graph is captured or replayed on, and work meant to run beside that graph would queue behind
// it instead. Used by the compat layer's CUDA code only: the header declares nothing without CUDA.
#pragma once

#if TRAINC_WITH_CUDA

#include <c10/cuda/CUDAStream.h>

#include <functional>
#include <string>

namespace trainc {

// The stream for `use` on device `index`, of the device's lowest (ordinary) priority and not
// synchronizing with the legacy default stream. `prepare` runs once, right after the stream is
// made, before any caller gets it; it runs under the helper's lock, so it must not ask for another
// dedicated stream. If it throws, the next request makes a stream afresh.
c10::cuda::CUDAStream dedicated_stream(const std::string& use, c10::DeviceIndex index,
                                       const std::function<void(c10::cuda::CUDAStream)>& prepare = {});

}  // namespace trainc

#endif
