// defines: cross_entropy_rows_supported, cross_entropy_rows_forward, cross_entropy_rows_backward,
//          cross_entropy_rows_loss_and_dlogits, cross_entropy_rows_one_pass
//
// The cross-entropy of bf16 logits on a GPU, one row per thread block, with no float32 copy of the
// logits: the part of runtime/linear_cross_entropy between its GEMMs. Each thread reads 8 logits at
// a time (16 bytes) when the rows start 16-byte aligned, one otherwise, and keeps a running maximum
// and a sum of exponentials rescaled as the maximum grows (online softmax); the block merges them,
// and lse = max + log(sum). The gradient is (exp(z - lse) - s / V - (1 - s) [j == target]) * grad,
// rounded to bf16 as eager's cast back from float32 rounds it, written over the logits. The forward
// reads a row once; the backward twice (statistics, then the gradient). The training kernel (loss
// and gradient together) copies its row into shared memory first when two such rows fit on an SM
// (GPT-2's 100 KB rows do on an H200), so it reads the row from memory once: with each logit's
// arithmetic cut to a few instructions, 0.80 ms for GPT-2's 16384 rows where the two-pass kernel
// takes 1.18 (docs/benchmarks.md). From its copy it takes the row's maximum first and then each
// exponential once, kept as float16 for the gradient (0.113 → 0.106 ms for the small GPT's 2,048
// rows): its gradient rounds as the two-pass kernels' but for a few percent of the values, which
// land one bf16 step away (the kernel's comment says where else), and its losses agree with theirs
// to float32's rounding of a sum in another order. Holding a row in registers instead was slower
// (1.43 ms): 110 registers a thread left one block per SM, whose loads and writes could not
// overlap. The kernels are CUDA source compiled once per process with NVRTC through the kernel
// cache (runtime/cuda_modules).
#pragma once

#include <ATen/ATen.h>

namespace trainc {

// Whether these kernels take logits like `logits` with a loss of `loss_dtype` (CUDA, bf16 logits,
// float32 loss, rows of unit stride).
bool cross_entropy_rows_supported(const at::Tensor& logits, at::ScalarType loss_dtype);

// logits [N, V] (a view with any row stride), targets i64 [N] -> float32 [N]: each row's loss with
// label smoothing s (a target outside [0, V) reads no logit).
at::Tensor cross_entropy_rows_forward(const at::Tensor& logits, const at::Tensor& targets, double smoothing);

// Overwrites logits [N, V] with the gradient of sum(loss * grad), grad float32 [N].
void cross_entropy_rows_backward(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& grad, double smoothing);

// Both at once for a grad of 1: writes each row's loss into `loss` (float32 [N]) and overwrites the
// logits with the gradient of each row's own loss, in one pass over each row from its copy in
// shared memory where cross_entropy_rows_one_pass says so, else in the backward's two passes.
void cross_entropy_rows_loss_and_dlogits(at::Tensor& logits, const at::Tensor& targets, double smoothing, at::Tensor& loss);

// Whether cross_entropy_rows_loss_and_dlogits reads each row of `logits` once (16-byte aligned
// rows, two of which fit in one SM's shared memory).
bool cross_entropy_rows_one_pass(const at::Tensor& logits);

}  // namespace trainc
