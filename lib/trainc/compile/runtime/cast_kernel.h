// defines: bf16_cast_kernel_takes, bf16_cast_kernel
//
// Float32 tensors cast into bf16 ones on a GPU by trainc's own multi-tensor kernel (CUDA source
// compiled once per process with NVRTC, compile/runtime/cuda_modules), for a program's grouped
// parameter casts (runtime/parameter_casts). ATen's foreach copy gives each block 65,536 elements:
// the small GPT's layer weights (3.2M elements in 50 tensors) were about 60 blocks on 132 SMs and
// took 26 us, where the bytes take a few. Here each block converts 4,096 elements, 8 at a time
// (two 16-byte loads, one 16-byte store), rounding to nearest even as ATen's cast does on a GPU.
// Each launch takes up to 127 tensors, passed by value with the launch.
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// Whether the kernel takes these pairs: CUDA, one device, float32 sources and bf16 destinations of
// the same sizes, contiguous and 16-byte aligned.
bool bf16_cast_kernel_takes(at::TensorList destinations, at::TensorList sources);

// destinations[i] = sources[i] rounded to bf16, on the current stream.
void bf16_cast_kernel(at::TensorList destinations, at::TensorList sources);

}  // namespace trainc
