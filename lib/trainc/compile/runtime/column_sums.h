// defines: column_sums_supported, column_sums, column_sums_rows_in_one_split, column_sums_version, stack_column_sums_supported, stack_column_sums
//
// Sums over the leading dimensions of a tensor on a GPU, in float32 and in a fixed order: the
// gradients of biases and of layer-norm parameters, a sum over every token of a [tokens, width]
// matrix. Viewed as [rows, columns], each thread block takes a tile of columns (32 threads across,
// each reading 16 bytes of consecutive columns at a time) and a split of the rows (8 threads down);
// each split's sums go to a workspace, and a second kernel adds the splits in a fixed order (a single
// split's sums are written as the result, with no second kernel). Splitting the
// rows gives a GPU enough blocks for narrow matrices (GPT-2's 768 columns make 3 tiles) and keeps
// the result the same from run to run, which atomics would not. The kernels are CUDA source
// compiled once per process with NVRTC through the kernel cache (runtime/cuda_modules).
//
// The same kernel also stacks attention's dq, dk and dv into the gradient of a fused q-k-v
// projection's output ([B * T, 3 * H * D]) while it sums that gradient's columns (the projection's
// bias gradient): each 16 bytes is read once, written to the stack and added, where a stack and a
// sum of it read the gradient twice. The sums are the ones column_sums gives the stack, bit for bit.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <string>
#include <vector>

namespace trainc {

// Whether these kernels sum `x` over `axes`: CUDA, bf16 or float32, contiguous, 16-byte aligned,
// `axes` the leading dimensions, and the rest a multiple of 16 bytes wide.
bool column_sums_supported(const at::Tensor& x, const std::vector<int64_t>& axes);

// x summed over its leading `count` dimensions, in float32. `x` must be supported (above).
at::Tensor column_sums(const at::Tensor& x, int64_t count);

// Whether stack_column_sums takes `parts` into `stacked`: CUDA, bf16, dq, dk and dv of one shape
// [B, H, T, D] with D contiguous and a multiple of 8, their other strides multiples of 8, and the
// stack contiguous with 3 * B * H * T * D elements; every start 16-byte aligned.
bool stack_column_sums_supported(const std::array<at::Tensor, 3>& parts, const at::Tensor& stacked);

// Writes `parts` into `stacked` as [B, T, 3, H, D] and their column sums over the B * T rows into
// `sums` (float32 [3 * H * D], contiguous). The arguments must be supported (above).
void stack_column_sums(const std::array<at::Tensor, 3>& parts, at::Tensor& stacked, at::Tensor& sums);

// Whether x's rows (the product of its leading `count` dimensions) are few enough to make a single
// split at any width: column_sums(x, count) is then one kernel, its sums written as the result
// without a second kernel adding splits.
bool column_sums_rows_in_one_split(const at::Tensor& x, int64_t count);

// A hash of the kernels' source: part of a tuning key, so that a changed kernel is measured again.
const std::string& column_sums_version();

}  // namespace trainc
