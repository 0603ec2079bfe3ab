#include "trainc/compat/library_variants.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/csrc/autograd/autograd.h>

#include "trainc/common/error.h"
#include "trainc/compat/torch_compat.h"

// The attention kernels by name and their backward entry points, and the preferred BLAS library
// (CUDA builds only): PyTorch 2.5 on.
#define TRAINC_ATTENTION_VARIANTS (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))
#define TRAINC_BLAS_VARIANTS (TRAINC_WITH_CUDA && TRAINC_ATTENTION_VARIANTS)

namespace trainc {
namespace {

at::Tensor math_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal) {
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t t = scores.size(-2), s = scores.size(-1);
    scores = scores.masked_fill(at::ones({t, s}, scores.options().dtype(at::kBool)).triu(1), -std::numeric_limits<float>::infinity());
  }
  return at::matmul(at::softmax(scores, -1), v);
}

// The math backward: the formula differentiated by autograd.
std::array<at::Tensor, 3> math_attention_grads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& grad_out,
                                               double scale, bool causal) {
  at::AutoGradMode enable_grad(true);
  std::vector<at::Tensor> qkv = {q.detach().requires_grad_(true), k.detach().requires_grad_(true), v.detach().requires_grad_(true)};
  const at::Tensor out = math_attention(qkv[0], qkv[1], qkv[2], scale, causal);
  std::vector<at::Tensor> grads = torch::autograd::grad({out}, qkv, {grad_out});
  return {grads[0], grads[1], grads[2]};
}

#if TRAINC_BLAS_VARIANTS
// ATen warns once that choosing the BLAS library is experimental; here each choice is measured and
// tested against the other, and the warning would only alarm a user who chose nothing.
void prefer_blas(at::BlasBackend library) {
  struct Silent : c10::WarningHandler {
    void process(const c10::Warning&) override {}
  };
  static Silent silent;
  c10::WarningUtils::WarningHandlerGuard quiet(&silent);
  at::globalContext().setBlasPreferredBackend(library);
}
#endif

[[noreturn]] void not_in_this_build(AttentionBackend backend) {
  throw std::runtime_error(std::string("attention backend ") + attention_backend_name(backend) + " needs PyTorch 2.5 or later; this is LibTorch " +
                           kTorchVersionText);
}

}  // namespace

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::math: return "math";
    case AttentionBackend::flash: return "flash";
    case AttentionBackend::efficient: return "efficient";
    case AttentionBackend::cudnn: return "cudnn";
  }
  return "?";
}

std::optional<AttentionBackend> attention_backend_named(const std::string& name) {
  for (AttentionBackend backend : {AttentionBackend::math, AttentionBackend::flash, AttentionBackend::efficient, AttentionBackend::cudnn}) {
    if (name == attention_backend_name(backend)) return backend;
  }
  return std::nullopt;
}

std::vector<AttentionBackend> attention_backends(c10::Device device) {
#if TRAINC_ATTENTION_VARIANTS
  if (device.is_cuda()) return {AttentionBackend::flash, AttentionBackend::efficient, AttentionBackend::cudnn};
#endif
  return {AttentionBackend::math};
}

AttentionBackend aten_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal,
                                        bool training) {
#if TRAINC_ATTENTION_VARIANTS
  // ATen applies its backward's rules to inputs that require grad while grad mode is on (compiled
  // steps run their programs with it off).
  at::AutoGradMode grad_mode(training);
  const auto asked = [training](const at::Tensor& t) { return training ? t.detach().requires_grad_(true) : t; };
  // ATen's numbering of sdp::SDPBackend: 0 math, 1 flash, 2 memory-efficient, 3 cuDNN.
  switch (at::_fused_sdp_choice(asked(q), asked(k), asked(v), /*attn_mask=*/{}, /*dropout_p=*/0.0, causal, scale)) {
    case 1: return AttentionBackend::flash;
    case 2: return AttentionBackend::efficient;
    case 3: return AttentionBackend::cudnn;
    default: return AttentionBackend::math;
  }
#else
  (void)q, (void)k, (void)v, (void)scale, (void)causal, (void)training;
  return AttentionBackend::math;
#endif
}

bool flash_callable_directly(const at::Tensor& q, const at::Tensor& v) { return q.size(-1) % 8 == 0 && v.size(-1) % 8 == 0; }

bool attention_backend_accepts(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                               bool causal, bool training) {
  if (backend == AttentionBackend::math) return true;
  if (backend == AttentionBackend::flash && !flash_callable_directly(q, v)) return false;
#if TRAINC_ATTENTION_VARIANTS
  // ATen's choice with only `backend` and math enabled: `backend` when its rules take the inputs.
  at::Context& context = at::globalContext();
  const bool flash = context.userEnabledFlashSDP(), efficient = context.userEnabledMemEfficientSDP(), cudnn = context.userEnabledCuDNNSDP(),
             math = context.userEnabledMathSDP();
  context.setSDPUseFlash(backend == AttentionBackend::flash);
  context.setSDPUseMemEfficient(backend == AttentionBackend::efficient);
  context.setSDPUseCuDNN(backend == AttentionBackend::cudnn);
  context.setSDPUseMath(true);
  bool accepted = false;
  try {
    accepted = aten_attention_backend(q, k, v, scale, causal, training) == backend;
  } catch (const std::exception&) {
    accepted = false;
  }
  context.setSDPUseFlash(flash);
  context.setSDPUseMemEfficient(efficient);
  context.setSDPUseCuDNN(cudnn);
  context.setSDPUseMath(math);
  return accepted;
#else
  (void)q, (void)k, (void)v, (void)scale, (void)causal, (void)training;
  return false;
#endif
}

at::Tensor attention_with(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                          bool causal) {
  if (backend == AttentionBackend::math) return math_attention(q, k, v, scale, causal);
#if TRAINC_ATTENTION_VARIANTS
  switch (backend) {
    case AttentionBackend::flash:
      return std::get<0>(at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal, /*return_debug_mask=*/false, scale));
    case AttentionBackend::efficient:
      return std::get<0>(at::_scaled_dot_product_efficient_attention(q, k, v, std::nullopt, /*compute_log_sumexp=*/false, 0.0, causal, scale));
    case AttentionBackend::cudnn:
      return std::get<0>(at::_scaled_dot_product_cudnn_attention(q, k, v, std::nullopt, /*compute_log_sumexp=*/false, 0.0, causal,
                                                                 /*return_debug_mask=*/false, scale));
    case AttentionBackend::math: break;
  }
#endif
  not_in_this_build(backend);
}

std::array<at::Tensor, 3> attention_grads_with(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& grad_out, double scale, bool causal) {
  if (backend == AttentionBackend::math) return math_attention_grads(q, k, v, grad_out, scale, causal);
#if TRAINC_ATTENTION_VARIANTS
  if (backend == AttentionBackend::efficient) {
    // The fused kernels read the gradient's head dimension contiguously.
    const at::Tensor grad = grad_out.stride(-1) == 1 ? grad_out : grad_out.contiguous();
    const auto [out, lse, seed, offset] =
        at::_scaled_dot_product_efficient_attention(q, k, v, std::nullopt, /*compute_log_sumexp=*/true, 0.0, causal, scale);
    const auto grads = at::_scaled_dot_product_efficient_attention_backward(grad, q, k, v, /*attn_bias=*/at::Tensor(), out, lse, seed,
                                                                            offset, 0.0, {true, true, true, false}, causal, scale);
    return {std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)};
  }
  // Flash and cuDNN: the forward that keeps its log-sum-exp, then the backward that reads it.
  const auto [out, lse] = attention_with_lse(backend, q, k, v, scale, causal);
  return attention_grads_from_lse(backend, q, k, v, out, lse, grad_out, scale, causal);
#else
  not_in_this_build(backend);
#endif
}

std::optional<AttentionBackend> direct_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                                         bool causal, bool training) {
  if (!q.is_cuda()) return std::nullopt;
  const AttentionBackend backend = aten_attention_backend(q, k, v, scale, causal, training);
  if (backend == AttentionBackend::math || (backend == AttentionBackend::flash && !flash_callable_directly(q, v))) return std::nullopt;
  return backend;
}

bool keeps_lse(AttentionBackend backend, const at::Tensor& q) {
  const bool time_major = q.stride(2) > q.stride(1) && q.stride(1) > q.stride(3);  // [B, T, H, D] in memory
  return backend == AttentionBackend::flash || (backend == AttentionBackend::cudnn && time_major);
}

AttentionBackend lse_attention_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, bool causal) {
  const std::optional<AttentionBackend> direct = direct_attention_backend(q, k, v, scale, causal, /*training=*/true);
  return direct && keeps_lse(*direct, q) ? *direct : AttentionBackend::math;
}

std::pair<at::Tensor, at::Tensor> attention_with_lse(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     double scale, bool causal) {
#if TRAINC_ATTENTION_VARIANTS
  const std::vector<int64_t> rows = {q.size(0), q.size(1), q.size(2)};
  if (backend == AttentionBackend::flash) {
    auto result = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal, /*return_debug_mask=*/false, scale);
    return {std::get<0>(result), std::get<1>(result).reshape(rows)};
  }
  if (backend == AttentionBackend::cudnn) {
    auto result = at::_scaled_dot_product_cudnn_attention(q, k, v, std::nullopt, /*compute_log_sumexp=*/true, 0.0, causal,
                                                          /*return_debug_mask=*/false, scale);
    return {std::get<0>(result), std::get<1>(result).reshape(rows)};
  }
#endif
  (void)q, (void)k, (void)v, (void)scale, (void)causal;
  throw std::runtime_error(std::string("attention with a kept log-sum-exp runs flash or cuDNN, not ") + attention_backend_name(backend));
}

std::array<at::Tensor, 3> attention_grads_from_lse(AttentionBackend backend, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const at::Tensor& out, const at::Tensor& lse, const at::Tensor& grad_out, double scale,
                                                   bool causal) {
#if TRAINC_ATTENTION_VARIANTS
  const at::Tensor grad = grad_out.stride(-1) == 1 ? grad_out : grad_out.contiguous();
  // Without dropout the kernels read no random state: placeholders of the type they take.
  if (backend == AttentionBackend::flash) {
    const at::Tensor seed = at::empty({}, at::kLong), offset = at::empty({}, at::kLong);
    const auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_backward(grad, q, k, v, out, lse, at::Tensor(), at::Tensor(), q.size(2),
                                                                              k.size(2), 0.0, causal, seed, offset, scale);
    return {dq, dk, dv};
  }
  if (backend == AttentionBackend::cudnn) {
    const at::Tensor seed = at::empty({1}, q.options().dtype(at::kLong)), offset = at::empty({1}, q.options().dtype(at::kLong));
    // cuDNN's statistics are [B, H, T, 1].
    const auto [dq, dk, dv] = at::_scaled_dot_product_cudnn_attention_backward(grad, q, k, v, out, lse.unsqueeze(-1), seed, offset,
                                                                              /*attn_bias=*/at::Tensor(), at::Tensor(), at::Tensor(), q.size(2),
                                                                              k.size(2), 0.0, causal, scale);
    return {dq, dk, dv};
  }
#endif
  (void)q, (void)k, (void)v, (void)out, (void)lse, (void)grad_out, (void)scale, (void)causal;
  throw std::runtime_error(std::string("attention with a kept log-sum-exp runs flash or cuDNN, not ") + attention_backend_name(backend));
}

std::vector<std::string> blas_libraries(c10::Device device) {
#if TRAINC_BLAS_VARIANTS
  if (device.is_cuda()) return {"cublas", "cublaslt"};
#endif
  (void)device;
  return {};
}

BlasLibraryScope::BlasLibraryScope(const std::string& library) {
  TRAINC_CHECK(library == "cublas" || library == "cublaslt", "unknown BLAS library '" + library + "'");
#if TRAINC_BLAS_VARIANTS
  previous_ = static_cast<int>(at::globalContext().blasPreferredBackend());
  prefer_blas(library == "cublaslt" ? at::BlasBackend::Cublaslt : at::BlasBackend::Cublas);
#else
  throw std::runtime_error("choosing the BLAS library needs a CUDA build of PyTorch 2.5 or later");
#endif
}

BlasLibraryScope::~BlasLibraryScope() {
#if TRAINC_BLAS_VARIANTS
  if (previous_ >= 0) prefer_blas(static_cast<at::BlasBackend>(previous_));
#endif
}

}  // namespace trainc
