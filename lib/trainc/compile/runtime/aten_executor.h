// defines: execute_with_aten, execute_node, gemm_algorithm_count, attention_scale, lse_pair_backend, to_scalar_type, to_dtype
//
// Runs an IR graph op by op through ATen: the execution engine of the aot_eager backend and the
// reference that generated kernels are tested against. Inputs are given in the order of the
// graph's input nodes; the result holds the graph's outputs in order.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "trainc/compat/library_variants.h"
#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

at::ScalarType to_scalar_type(DType dtype);
DType to_dtype(at::ScalarType type);  // IrError for a type the IR does not have

// Values made from attributes alone (constant, iota, bernoulli) are created on `device`; the
// two-argument form uses the first input's device (the CPU when there are no inputs).
// The inputs are the executor's: each is released after its last use.
std::vector<at::Tensor> execute_with_aten(const Graph& graph, std::vector<at::Tensor> inputs, at::Device device);
std::vector<at::Tensor> execute_with_aten(const Graph& graph, const std::vector<at::Tensor>& inputs);

// One node through ATen, its inputs given (for executors that run only some nodes this way).
at::Tensor execute_node(const Node& node, const std::vector<at::Tensor>& inputs, at::Device device);

// An attention node's softmax scale: its attribute, or 1/sqrt(head_dim) when that is 0.
double attention_scale(const Attributes& attrs, int64_t head_dim);

// The kernel attention_and_lse and attention_grad_from_lse (inputs q, k, v first) call directly:
// ATen's pick for training, as attention_choice calls it; none where ATen's own call runs. Both ops
// decide it from the same inputs, so they agree.
std::optional<AttentionBackend> lse_pair_backend(const std::vector<at::Tensor>& inputs, const Attributes& attrs);

// The same through a named implementation of the call: an attention backend ("flash",
// "efficient", "cudnn", "math"; compat/library_variants) for attention and attention_grad, a BLAS
// library ("cublas", "cublaslt") or one of cuBLASLt's algorithms called directly
// ("cublaslt-algo-N", compat/cublaslt_algorithms) for matmul, matmul_bias, matmul_to_float and
// matmul_bias_gelu and matmul_gelu_grad (whose epilogues only cuBLASLt has; by default its
// first-ranked algorithm), one
// per product ("cublaslt-algos N,-1") for the head's training pair (runtime/linear_cross_entropy), "aten" or
// "split_rows" (runtime/column_sums) for a sum over leading dimensions, the kernel lse_pair_backend
// decided (or "aten" for none) for attention_and_lse and attention_grad_from_lse, decided once
// instead of at every run. Empty: ATen's own call, as above, except for a matmul_to_float queued
// on the side stream where the layers are small (runtime/side_product_sms): cuBLASLt's, aimed at
// half the SMs. A named variant (max-autotune's measured choice) always runs as it was measured.
at::Tensor execute_node(const Node& node, const std::vector<at::Tensor>& inputs, at::Device device, const std::string& variant);

// matmul, matmul_bias, matmul_to_float, matmul_bias_gelu and matmul_gelu_grad: the ops that are one
// product of matrices, which cuBLASLt's algorithms can run.
bool is_matrix_product(Op op);

// How many of cuBLASLt's algorithms can run this matmul, matmul_bias, matmul_to_float, matmul_bias_gelu
// or matmul_gelu_grad directly
// (variants "cublaslt-algo-0" onwards), at most `limit`; 0 for other ops and inputs it cannot take.
int gemm_algorithm_count(const Node& node, const std::vector<at::Tensor>& inputs, int limit);

}  // namespace trainc::ir
