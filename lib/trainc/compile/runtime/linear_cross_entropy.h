// defines: linear_cross_entropy, linear_cross_entropy_grad, linear_cross_entropy_and_dlogits,
//          linear_cross_entropy_grad_from_dlogits, HeadGemmAlgorithms, head_product_into, HeadGemm, head_gemms
//
// A language model's head and its loss in one op: the cross-entropy of each row of
// logits = x @ weight^T against its target, and the gradients of x and the weight, without the
// float32 logits of every row at once. The logits are made in x's dtype (bf16 under autocast, as
// the eager linear layer makes them). bf16 logits on a GPU go through one-pass CUDA kernels
// (runtime/cross_entropy_rows); otherwise each chunk of rows is raised to the loss's dtype
// (float32) for the log-sum-exp, about 512 MB at a time, instead of a float32 copy of all of them.
// On a GPU, the vocabulary is padded with zero rows of the weight to a multiple of 64, so every
// GEMM has aligned leading dimensions (50,257 columns of bf16 send cuBLAS to kernels for
// unaligned data, several times slower); the padding columns are never part of a softmax. The
// dlogits pair below pads on every device: its buffer's layout is fixed in the IR.
// Label smoothing s: loss = lse - (1 - s) * z[target] - (s / V) * sum(z). A target outside
// [0, V) (ignore_index) gives a finite, meaningless loss: the caller masks such rows, and their
// gradient arrives as 0.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc {

// The training pair's products on a GPU, each ATen's mm (-1) or one of cuBLASLt's ranked algorithms
// (compat/cublaslt_algorithms), as max-autotune chose them: the logits for
// linear_cross_entropy_and_dlogits; x's gradient, then the weight's, for
// linear_cross_entropy_grad_from_dlogits (only the one it makes when it makes one). Empty: ATen's
// for all.
using HeadGemmAlgorithms = std::vector<int>;

// Float32 logits raised at a time: 512 MB.
constexpr int64_t kLinearCrossEntropyChunk = int64_t{1} << 27;

// x [N, C], weight [V, C], targets i64 [N] -> loss [N] in `loss_dtype`.
at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, double smoothing,
                                at::ScalarType loss_dtype, int64_t chunk_elements = kLinearCrossEntropyChunk);

// The same and grad [N] (the loss's gradient) -> [N * C + V * C] in x's dtype: the gradient of x,
// then of the weight, flattened. The logits are recomputed.
at::Tensor linear_cross_entropy_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, const at::Tensor& grad,
                                     double smoothing, int64_t chunk_elements = kLinearCrossEntropyChunk);

// For training: the losses as linear_cross_entropy gives them and, while the logits are at hand,
// each row's gradient of its own loss over them, D = softmax - (1 - s) * onehot - s / V (rounded to
// x's dtype, in the place of the logits), in one buffer laid out as ir::linear_cross_entropy_layout
// says. The backward then needs no logits: with g the losses' gradient,
//   grad x = g * (D @ weight)   and   grad weight = D^T @ (g * x)   (g scaling rows),
// two GEMMs where linear_cross_entropy_grad needs three (the logits again first).
at::Tensor linear_cross_entropy_and_dlogits(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, double smoothing,
                                            at::ScalarType loss_dtype, int64_t chunk_elements = kLinearCrossEntropyChunk,
                                            const HeadGemmAlgorithms& algorithms = {});

// That buffer, x, weight and grad [N] -> as linear_cross_entropy_grad, but with the weight's
// gradient over the layout's padded vocabulary: [N * C + P * C], the rows past V zero. The GEMM
// writes it in place, where a copy of the V rows it needs cost GPT-2 77 MB a step. `which`: both
// gradients, or x's alone [N * C], or the weight's alone [P * C], in x's dtype or (weight_float)
// in float32: on a GPU the GEMM's accumulator as it is, where rounding it to bf16 and widening
// it again for the float32 parameter took the small GPT 22 us a step (docs/compile.md).
at::Tensor linear_cross_entropy_grad_from_dlogits(const at::Tensor& packed, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                                                  const HeadGemmAlgorithms& algorithms = {},
                                                  ir::HeadGradients which = ir::HeadGradients::both);

// out = a . b as the head's products run it: by cuBLASLt's ranked algorithm `algorithm`, or for
// -1 by ATen's mm; a float32 `out` of half-precision operands gets their float32 product (on a GPU
// cuBLASLt's first-ranked algorithm for -1, ranked for `sm_count_target` SMs when that is > 0;
// elsewhere the product rounded, then widened).
void head_product_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, int algorithm, int sm_count_target = 0);

// One of those products, out = a . b, on operands shaped and laid out as the op's own (their
// values are not the op's): what max-autotune measures to choose its algorithm.
struct HeadGemm {
  at::Tensor out, a, b;
};

// The products of a linear_cross_entropy_and_dlogits or linear_cross_entropy_grad_from_dlogits node
// on these inputs, in HeadGemmAlgorithms' order; none for other ops.
std::vector<HeadGemm> head_gemms(ir::Op op, const std::vector<at::Tensor>& inputs, at::ScalarType loss_dtype,
                                 ir::HeadGradients which = ir::HeadGradients::both);

}  // namespace trainc
