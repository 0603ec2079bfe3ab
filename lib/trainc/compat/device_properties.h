// defines: multiprocessor_count — how many streaming multiprocessors (SMs) GPU `device` has, for
// rules that size work to the GPU. 0 for CPU devices and in builds without CUDA.
#pragma once

#include <c10/core/Device.h>

namespace trainc {

int multiprocessor_count(c10::Device device);

}  // namespace trainc
