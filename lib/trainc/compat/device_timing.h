// defines: time_on_device, device_identity
//
// What the autotuner needs from the device: how long some work takes on it, and a description of
// the device and the libraries that run the work, to key a measurement by.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <string>

namespace trainc {

// The median of `repeats` timed runs of `work`, in seconds, after one untimed run. On a GPU each
// run is timed by CUDA events around it on the current stream (the device's own time, launches
// overlapped), after a 256 MB write that empties the L2 cache (the buffer is held while measuring);
// on the CPU by the wall clock.
double time_on_device(c10::Device device, const std::function<void()>& work, int repeats);

// "NVIDIA H200 (sm_90), CUDA runtime 13000, cuDNN 91300, LibTorch 2.11.0" on a GPU;
// "cpu, LibTorch 1.13.1" on the CPU.
std::string device_identity(c10::Device device);

}  // namespace trainc
