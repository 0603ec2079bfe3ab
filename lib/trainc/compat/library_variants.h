// defines: AttentionBackend, attention_backend_name, attention_backend_named, aten_attention_backend,
//          attention_backend_accepts, attention_with, attention_grads_with, lse_attention_backend,
//          attention_with_lse, attention_grads_from_lse, BlasLibraryScope, blas_libraries
//
// The implementations LibTorch offers for one library call, each callable by name, so that the
// compiler can pick one at compile time or measure them (max-autotune):
//   - attention: flash, memory-efficient and cuDNN kernels (PyTorch 2.5 on, each with its own
//     backward), and the textbook formula ("math") that every LibTorch runs;
//   - matrix products on CUDA: cuBLAS or cuBLASLt (ATen's preferred BLAS library, PyTorch 2.5 on).
// A variant that cannot run the inputs given (a head size or layout its kernel does not take, or a
// LibTorch without it) throws; callers that measure variants skip it.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainc {

enum class AttentionBackend { math, flash, efficient, cudnn };

const char* attention_backend_name(AttentionBackend backend);  // "flash"
std::optional<AttentionBackend> attention_backend_named(const std::string& name);

// The backends worth measuring on `device` in this build: flash, efficient and cuDNN on a GPU
// with PyTorch 2.5 or later (math there is only ever slower and holds the whole score matrix);
// math alone on the CPU and with LibTorch 1.13.
std::vector<AttentionBackend> attention_backends(c10::Device device);

// The backend ATen's scaled_dot_product_attention picks for these inputs (its own rules: inputs'
// layout, head size, dtype, the GPU; `training`: for a forward whose backward will run, which some
// kernels refuse for head sizes their forward takes); math on LibTorch 1.13.
AttentionBackend aten_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal,
                                        bool training = false);

// Whether flash's kernel, called directly, takes these head sizes: multiples of 8 (ATen's own call
// pads other sizes first, so its rules accept them).
bool flash_callable_directly(const at::Tensor& q, const at::Tensor& v);

// Whether ATen's rules let `backend` run these inputs, called directly. A fused kernel does not
// always check them itself: cuDNN's runs float32 inputs it does not support and returns garbage.
bool attention_backend_accepts(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                               bool causal, bool training = false);

// softmax(q k^T * scale [causal mask]) v over [batch, heads, time, head_dim], without dropout.
at::Tensor attention_with(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                          bool causal);

// dq, dk, dv of that attention given the gradient of its output: the backend's forward (which
// saves what its backward reads) followed by its backward (for flash and cuDNN, attention_with_lse
// and attention_grads_from_lse below).
std::array<at::Tensor, 3> attention_grads_with(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& grad_out, double scale, bool causal);

// The fused kernel ATen picks for these inputs (`training`: as for a forward whose backward will
// run), when it can be called directly: none on the CPU, where ATen picks its math formula, or where
// ATen's own call pads flash's heads.
std::optional<AttentionBackend> direct_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                                         bool causal, bool training);

// Whether `backend`, called directly, can keep its forward's log-sum-exp for its backward: flash,
// or cuDNN with q laid out [B, T, H, D] (lse_attention_backend below).
bool keeps_lse(AttentionBackend backend, const at::Tensor& q);

// For a training step that keeps the forward's log-sum-exp for the backward: the backend both use
// for these inputs. ATen's own pick for training when it is flash, or cuDNN when q is laid out as
// [B, T, H, D] (cuDNN's backward wants the output in q's layout, and the kept output has that one);
// math otherwise, which keeps nothing: the backward then runs the forward again. It depends on the
// inputs' shapes, layouts and dtypes and on ATen's global attention settings (the SDP switches and
// their order), which a step does not change, so a forward and its backward, given q, k and v laid
// out alike, agree without telling each other.
AttentionBackend lse_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal);

// That backend's forward: the output and each row's float32 log-sum-exp, [B, H, T] contiguous.
std::pair<at::Tensor, at::Tensor> attention_with_lse(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     double scale, bool causal);

// Its backward from a kept output and log-sum-exp [B, H, T], without running the forward again.
std::array<at::Tensor, 3> attention_grads_from_lse(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const at::Tensor& out, const at::Tensor& lse, const at::Tensor& grad_out, double scale,
                                                   bool causal);

// The BLAS libraries ATen can run a CUDA matrix product with in this build (empty on the CPU and
// with LibTorch 1.13, where there is one).
std::vector<std::string> blas_libraries(c10::Device device);

// Makes ATen's CUDA matrix products run on `library` ("cublas", "cublaslt") for the scope's
// lifetime; the previous preference comes back on exit.
class BlasLibraryScope {
 public:
  explicit BlasLibraryScope(const std::string& library);
  ~BlasLibraryScope();
  BlasLibraryScope(const BlasLibraryScope&) = delete;
  BlasLibraryScope& operator=(const BlasLibraryScope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace trainc
