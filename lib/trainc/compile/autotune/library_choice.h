// defines: choose_library_variant, describe_call
//
// Which implementation an ATen step of a compiled program runs (runtime/aten_executor's variants),
// decided once per step, at its first run, on the real inputs:
//   - attention and attention_grad on a GPU: with an autotuner (max-autotune) the fastest of the
//     flash, memory-efficient and cuDNN kernels measured; without one, the kernel ATen's own rules
//     pick for these inputs (what scaled_dot_product_attention would run), fixed at the compiled
//     step's first run so that the backward calls that kernel's backward directly;
//   - matmul_bias_gelu and matmul_gelu_grad on a GPU, with an autotuner: the fastest of cuBLASLt's
//     ranked algorithms with its GELU or GELU-gradient epilogue (without one, the executor runs the
//     first);
//   - matmul, matmul_bias and matmul_to_float on a GPU, with an autotuner: the fastest of ATen's
//     call on cuBLAS, on cuBLASLt, and cuBLASLt's first-ranked algorithms called directly
//     (compat/cublaslt_algorithms); the same for each product of the head's training pair
//     (runtime/linear_cross_entropy), measured one by one;
//   - a sum over leading dimensions on a GPU (bias and layer-norm parameter gradients): with an
//     autotuner the faster of ATen's reduction and runtime/column_sums' split over the rows;
//     without one the split for bf16 inputs, ATen's for float32 (the faster of each, measured);
//   - everything else, and the CPU: "" (ATen's default call).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "trainc/compile/autotune/autotuner.h"
#include "trainc/compile/ir/graph.h"

namespace trainc {

// `tuner` null: no measuring (mode default).
std::string choose_library_variant(const ir::Node& node, const std::vector<at::Tensor>& inputs, at::Device device, Autotuner* tuner);

// "attention_grad causal scale 0.125 | bf16[16,12,1024,64]/[786432,64,768,1] ..." : the call and
// its inputs as a tuning key spells them.
std::string describe_call(const ir::Node& node, const std::vector<at::Tensor>& inputs);

}  // namespace trainc
