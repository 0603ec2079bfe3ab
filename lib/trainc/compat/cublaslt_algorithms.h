// defines: lt_algorithm_count, lt_matmul_out, lt_algorithm_name, lt_algorithm_index, lt_algorithm_list_name,
//          lt_algorithm_list, lt_prepare_stream, cublaslt_version
//
// cuBLASLt's algorithms for one matrix product, called directly, so that max-autotune can measure
// them and keep the fastest: ATen asks cuBLASLt's heuristic for one algorithm and runs it; the
// heuristic ranks several, and its first is not always the fastest on the real shapes.
//
// A product here is out = a . b (+ bias per column of out), a [m, k] and b [k, n] bf16 or f16
// matrices, each with one unit stride (row- or column-major, as a transposed view is), every
// address and leading dimension a multiple of 16 bytes; out [m, n] contiguous, in the operands'
// dtype or in float32, accumulated in float32 as ATen's products are (split-K partial sums added in
// a half-precision output only where ATen allows its own products to: allowBF16ReductionCuBLAS).
// Anything else is not run here.
// Epilogues (`LtEpilogue`), GELU being its tanh approximation throughout:
//   - none: out = a . b, plus `bias` where it is given;
//   - gelu: out = gelu(a . b + bias), the float32 sum's GELU, and the sum itself, rounded, written
//     to `aux` ([m, n] contiguous, out's dtype): what GELU's backward reads;
//   - gelu_grad, without a bias: out = gelu'(aux) * (a . b), aux being that kept sum (cuBLASLt's
//     DGELU; its DGELU_BGRAD, which also sums out's columns, runs a separate epilogue kernel on an
//     H200 that costs 3x the GEMM, so the bias gradient is left to a column sum).
//
// The functions come from the cuBLASLt that LibTorch's CUDA library loaded (the one ATen's own
// products run on), looked up in the process rather than linked a second time.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

namespace trainc {

enum class LtEpilogue { none, gelu, gelu_grad };

// How many algorithms the heuristic offers for this product, best-ranked first, at most `limit`;
// 0 where cuBLASLt cannot run it directly (above; on the CPU, in a build without CUDA). `bias`:
// [n] contiguous in out's dtype, or undefined. Asked before a CUDA graph's capture: the device's
// handle and workspace are made by the first question.
int lt_algorithm_count(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, at::ScalarType out_dtype, int limit,
                       LtEpilogue epilogue = LtEpilogue::none);

// Writes the product into `out` with algorithm `index` of that ranking. False, with nothing run,
// where the operands are not ones this runs or the ranking is shorter (the caller then runs ATen's).
// `sm_count_target` > 0: the ranking is the heuristic's for a kernel that uses that many of the
// GPU's multiprocessors (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), for a product that runs beside
// other work; not the ranking lt_algorithm_count counts.
// Capturable into a CUDA graph: the workspace is one buffer per device, made by lt_algorithm_count,
// the first call outside a capture or lt_prepare_stream (inside a capture before any of those, the
// call is left to ATen), shared by the products of every stream but the prepared ones, which run
// one after another; a prepared stream has its own. A problem first met inside a capture is ranked
// there: cuBLASLt's heuristic runs on the host and records nothing.
bool lt_matmul_out(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, int index,
                   LtEpilogue epilogue = LtEpilogue::none, const at::Tensor& aux = at::Tensor(), int sm_count_target = 0);

// "cublaslt-algo-2": a compiled program's variant name for algorithm 2 of the ranking, and back.
std::string lt_algorithm_name(int index);
std::optional<int> lt_algorithm_index(const std::string& variant);

// "cublaslt-algos 3,-1": the variant of an op that runs several products, the algorithm of each
// (-1: ATen's call), and back.
std::string lt_algorithm_list_name(const std::vector<int>& indices);
std::optional<std::vector<int>> lt_algorithm_list(const std::string& variant);

// Gives CUDA stream `stream` (a cudaStream_t) of `device` a workspace of its own, now, for products
// that run beside other streams' (compat/side_stream), so that a capture recording products there
// runs them here (nothing without cuBLASLt).
void lt_prepare_stream(int device, void* stream);

// cuBLASLt's version number (130100 for 13.1.0): a ranking's index means something only for it.
// Empty where it is not loaded.
std::string cublaslt_version();

}  // namespace trainc
