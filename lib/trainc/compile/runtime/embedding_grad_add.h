// defines: embedding_grad_add, embedding_grad_add_kernels_take
//
// The op passes/embedding_grad_add makes: a table's gradient from elsewhere (a tied head's) widened
// into a new table of the embedding gradient's dtype (float32 or float64: the pass takes no other),
// then each row of an embedding's gradient added at its index. On a GPU,
// two kernels compiled once per process with NVRTC (runtime/cuda_modules): the widening, 16 bytes
// a load, and the scatter, a warp a row adding 4 floats per atomic (one vector atomic on Hopper).
// ATen's copy of bf16 into float32 and its index_add_ took 0.21 ms of GPT-2's step for this; they
// remain for other dtypes, layouts and devices. Atomic adds sum a row's repeats in any order:
// float32 rounding differs from run to run, as with ATen's index_add_ on a GPU.
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// base [V, D] (any floating dtype), grad [..., D], indices i64 [...] -> grad's dtype [V, D]:
// base + the sum of grad's rows at their indices. `in_place`: base, of grad's dtype, is that
// table: the rows are added into it and it is returned (the tied head's float32 weight gradient,
// which nothing else reads: no 51 MB copy of the small GPT's table a step).
at::Tensor embedding_grad_add(const at::Tensor& base, const at::Tensor& grad, const at::Tensor& indices, bool in_place = false);

// Whether embedding_grad_add runs the kernels for these (else ATen's copy and index_add_): CUDA,
// all on one device, a contiguous bf16 or float32 base [V, D], float32 gradient rows of D
// contiguous elements, D a multiple of 4 (8 for a bf16 base), 16-byte aligned, i64 indices.
bool embedding_grad_add_kernels_take(const at::Tensor& base, const at::Tensor& grad, const at::Tensor& indices);

}  // namespace trainc
