// defines: side_product_sm_target, small_layers_sm_target
//
// The multiprocessors a weight-gradient GEMM queued on the side stream (passes/stream_plan) aims
// its kernel at, through cuBLASLt's SM count target (0: all of them). cuBLASLt's kernels for the
// whole GPU hold SMs until they end, and the main stream's kernels beside them (a layer's input
// gradients: short, latency-bound kernels where the layers are small) wait for those SMs. So where
// the layers' products are small, a side-stream product aims at half the GPU
// (SideStream::product_sm_target), leaving the other half to the main stream. Small: the layer's
// activations, `rows` tokens by `width` features, make fewer 128 x 128 tiles than twice that half
// (the small GPT's 2,048 x 256: 32 tiles; its MLP's 2,048 x 1,024: 128; GPT-2's 16,384 x 768: 768,
// whose layers fill the GPU with work of their own). Measured on the small GPT's step
// (docs/compile.md): the head's weight GEMM at half the SMs 1.09 -> 1.06 ms; the layers' weight
// GEMMs too, 1.006 -> 0.983 ms (a quarter of the SMs: 0.991; an eighth: 1.04).
#pragma once

#include <cstdint>

#include "trainc/compile/optimizations.h"

namespace trainc {

// The rule alone: `half` (the side stream's target, 0 outside its work) where rows x width make
// fewer 128 x 128 tiles than 2 * half, else 0.
int small_layers_sm_target(int half, int64_t rows, int64_t width);

// The target for a product queued now: the rule at SideStream::product_sm_target(), 0 when the
// switch `which` (head_grad_sms for the head's product, side_product_sms for the layers') is off.
int side_product_sm_target(int64_t rows, int64_t width, Optimization which);

}  // namespace trainc
