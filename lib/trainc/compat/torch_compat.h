// defines: AutocastScope, optimizer_state_key, causal_attention, fused_adamw_update, foreach_mul_, foreach_copy_, matmul_to_float,
//          matmul_to_float_in_one_gemm, kTorchVersionText
//
// The one place where LibTorch versions differ: Debian's LibTorch 1.13 (CPU machines, CI) and the
// PyTorch 2.x wheel's LibTorch (GPU machines). Everything else in trainc is version-agnostic.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace trainc {

inline const std::string kTorchVersionText = TORCH_VERSION;

#define TRAINC_TORCH_2 (TORCH_VERSION_MAJOR >= 2)

// Mixed-precision autocast for the forward pass, restored on scope exit.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, bool enabled, at::ScalarType dtype) : device_(device), enabled_(enabled) {
    if (!enabled_) return;
#if TRAINC_TORCH_2
    previous_enabled_ = at::autocast::is_autocast_enabled(device_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
#else
    if (device_ == c10::DeviceType::CUDA) {
      previous_enabled_ = at::autocast::is_enabled();
      previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(dtype);
    } else {
      previous_enabled_ = at::autocast::is_cpu_enabled();
      previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(dtype);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    // Leaving the outermost scope drops the cast-weight cache, as torch.autocast does.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TRAINC_TORCH_2
    at::autocast::set_autocast_enabled(device_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
#else
    if (device_ == c10::DeviceType::CUDA) {
      at::autocast::set_enabled(previous_enabled_);
      at::autocast::set_autocast_gpu_dtype(previous_dtype_);
    } else {
      at::autocast::set_cpu_enabled(previous_enabled_);
      at::autocast::set_autocast_cpu_dtype(previous_dtype_);
    }
#endif
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// The key of a parameter in torch::optim::Optimizer's per-parameter state map: its TensorImpl
// address, spelled as a string in 1.13 and as the pointer itself in 2.x.
inline auto optimizer_state_key(const at::Tensor& parameter) {
#if TRAINC_TORCH_2
  return static_cast<void*>(parameter.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
#endif
}

// AdamW's update of one parameter group on a GPU in fused multi-tensor kernels, as
// torch.optim.AdamW with fused=True does, reading the (already advanced) step counts from device
// tensors. LearningRate is a device tensor (the capturable optimizers: a CUDA graph replays it) or
// a double (ATen has both overloads). `grad_divisor`, when defined, is a 0-dim float32 device
// tensor each gradient is divided by inside the kernel (ATen's grad_scale, made for unscaling
// mixed-precision gradients: here, clipping's factor inverted). PyTorch 2.x only: returns false on
// 1.13 (no fused AdamW) and on the CPU, and the caller does the same arithmetic otherwise.
template <typename LearningRate>
inline bool fused_adamw_update(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                               at::TensorList steps, const LearningRate& learning_rate, double beta1, double beta2,
                               double weight_decay, double eps, const at::Tensor& grad_divisor = {}) {
#if TRAINC_TORCH_2
  if (!params.front().is_cuda()) return false;
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, learning_rate, beta1, beta2, weight_decay,
                    eps, /*amsgrad=*/false, /*maximize=*/false,
                    grad_divisor.defined() ? std::optional<at::Tensor>(grad_divisor) : std::optional<at::Tensor>());
  return true;
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)steps, (void)learning_rate, (void)beta1, (void)beta2,
      (void)weight_decay, (void)eps, (void)grad_divisor;
  return false;
#endif
}

// Multiplies every tensor of a list by a 0-dim tensor in place: one multi-tensor kernel on
// PyTorch 2.x (_foreach_mul_.Tensor), one kernel per tensor on 1.13. No host sync either way.
inline void foreach_mul_(at::TensorList tensors, const at::Tensor& factor) {
#if TRAINC_TORCH_2
  at::_foreach_mul_(tensors, factor);
#else
  for (const at::Tensor& tensor : tensors) const_cast<at::Tensor&>(tensor).mul_(factor);
#endif
}

// Copies each of `sources` into the tensor of `destinations` at the same place, converting dtypes
// (float32 parameters into their bf16 copies): on PyTorch 2.x one multi-tensor kernel per launch
// of up to a few hundred chunks when each pair has the same sizes and strides (_foreach_copy_),
// one copy per tensor on 1.13.
inline void foreach_copy_(at::TensorList destinations, at::TensorList sources) {
#if TRAINC_TORCH_2
  at::_foreach_copy_(destinations, sources);
#else
  for (std::size_t i = 0; i < destinations.size(); ++i) const_cast<at::Tensor&>(destinations[i]).copy_(sources[i]);
#endif
}

namespace detail {
// Whether ATen has mm's out_dtype overload (PyTorch 2.8 and later): bf16 or f16 operands, a
// float32 result from the GEMM itself. Asked of the declaration, so no version number is assumed.
template <typename Tensor, typename = void>
struct has_mm_out_dtype : std::false_type {};
template <typename Tensor>
struct has_mm_out_dtype<Tensor, std::void_t<decltype(at::mm(std::declval<const Tensor&>(), std::declval<const Tensor&>(), at::kFloat))>>
    : std::true_type {};
}  // namespace detail

// Whether matmul_to_float runs as one GEMM writing float32 for operands on `device`.
inline bool matmul_to_float_in_one_gemm(const at::Device& device) { return detail::has_mm_out_dtype<at::Tensor>::value && device.is_cuda(); }

// The product of two bf16 or f16 matrices in float32, not rounded to the operands' dtype: on a GPU
// with mm's out_dtype, the GEMM accumulates in float32 (as it always does) and stores that; elsewhere
// the rounded product is cast, as eager's autocast computes it.
template <typename Tensor = at::Tensor>
inline at::Tensor matmul_to_float(const Tensor& a, const Tensor& b) {
  if constexpr (detail::has_mm_out_dtype<Tensor>::value) {
    if (a.is_cuda()) return at::mm(a, b, at::kFloat);
  }
  return at::mm(a, b).to(at::kFloat);
}

// Causal self-attention over [batch, heads, time, head_dim]. LibTorch 2.x picks a fused kernel
// (flash, memory-efficient, cuDNN); 1.13 has none, so it runs the textbook formula.
inline at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
                                   bool training) {
#if TRAINC_TORCH_2
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, training ? dropout_p : 0.0, /*is_causal=*/true);
#else
  const int64_t time = q.size(-2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  const at::Tensor mask = at::ones({time, time}, q.options().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  at::Tensor weights = at::softmax(scores, -1);
  if (training && dropout_p > 0) weights = at::dropout(weights, dropout_p, true);
  return at::matmul(weights, v);
#endif
}

}  // namespace trainc
