// defines: column_sums_supported, column_sums, column_sums_version
//
// Sums over the leading dimensions of a tensor on a GPU, in float32 and in a fixed order: the
// gradients of biases and of layer-norm parameters, a sum over every token of a [tokens, width]
// matrix. Viewed as [rows, columns], each thread block takes a tile of columns (32 threads across,
// each reading 16 bytes of consecutive columns at a time) and a split of the rows (8 threads down);
// each split's sums go to a workspace, and a second kernel adds the splits in order. Splitting the
// rows gives a GPU enough blocks for narrow matrices (GPT-2's 768 columns make 3 tiles) and keeps
// the result the same from run to run, which atomics would not. The kernels are CUDA source
// compiled once per process with NVRTC through the kernel cache (runtime/cuda_modules).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace trainc {

// Whether these kernels sum `x` over `axes`: CUDA, bf16 or float32, contiguous, 16-byte aligned,
// `axes` the leading dimensions, and the rest a multiple of 16 bytes wide.
bool column_sums_supported(const at::Tensor& x, const std::vector<int64_t>& axes);

// x summed over its leading `count` dimensions, in float32. `x` must be supported (above).
at::Tensor column_sums(const at::Tensor& x, int64_t count);

// A hash of the kernels' source: part of a tuning key, so that a changed kernel is measured again.
const std::string& column_sums_version();

}  // namespace trainc
