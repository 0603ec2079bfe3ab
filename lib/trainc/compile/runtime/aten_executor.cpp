#include "trainc/compile/runtime/aten_executor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <torch/csrc/autograd/autograd.h>

#include "trainc/common/error.h"
#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/library_variants.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/runtime/column_sums.h"
#include "trainc/compile/runtime/embedding_grad_add.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"
#include "trainc/compile/runtime/side_product_sms.h"

namespace trainc::ir {
namespace {

using Inputs = std::vector<at::Tensor>;
using Kernel = at::Tensor (*)(const Inputs&, const Attributes&, at::Device);

// matmul, matmul_bias, matmul_to_float, matmul_bias_gelu and matmul_gelu_grad as one product of
// matrices: a [..., k] contiguous input folded into [rows, k], a 2-D weight, a 1-D bias; out in the
// operands' dtype or in float32 (out_sizes: matmul_bias_gelu's one half).
struct MatrixProduct {
  at::Tensor a, b, bias;
  at::ScalarType out_dtype = at::kFloat;
  std::vector<int64_t> out_sizes;
};

// The cuBLASLt epilogue an op's product runs with.
LtEpilogue epilogue_of(Op op) {
  return op == Op::matmul_bias_gelu ? LtEpilogue::gelu : op == Op::matmul_gelu_grad ? LtEpilogue::gelu_grad : LtEpilogue::none;
}

std::optional<MatrixProduct> matrix_product(Op op, const Inputs& inputs) {
  if (!is_matrix_product(op)) return std::nullopt;
  const at::Tensor& x = inputs[0];
  const at::Tensor& w = inputs[1];
  if (w.dim() != 2 || x.dim() < 2 || (x.dim() > 2 && !x.is_contiguous())) return std::nullopt;
  if (op == Op::matmul_to_float && x.dim() != 2) return std::nullopt;
  MatrixProduct product;
  product.a = x.dim() == 2 ? x : x.view({-1, x.size(-1)});
  product.b = w;
  if (op == Op::matmul_bias || op == Op::matmul_bias_gelu) {
    if (inputs[2].dim() != 1) return std::nullopt;
    product.bias = inputs[2];
  }
  product.out_dtype = op == Op::matmul_to_float ? at::kFloat : x.scalar_type();
  product.out_sizes = x.sizes().vec();
  product.out_sizes.back() = w.size(1);
  return product;
}

// A default (not max-autotune's) matmul_to_float queued on the side stream: a weight gradient
// x^T . dy, [width, tokens] . [tokens, n], aimed at half the SMs where the layers are small
// (runtime/side_product_sms) by cuBLASLt's first-ranked algorithm for that target. The rule reads
// only x's sizes: an untied head's weight gradient, were it a plain matmul_to_float there, would
// follow this switch rather than head_grad_sms. Nothing where the rule gives no target or cuBLASLt
// cannot take the operands (ATen's call then runs).
std::optional<at::Tensor> side_stream_weight_grad(const Inputs& in) {
  if (in[0].dim() != 2 || in[1].dim() != 2) return std::nullopt;
  const int sms = side_product_sm_target(in[0].size(1), in[0].size(0), Optimization::side_product_sms);
  if (sms == 0) return std::nullopt;
  at::Tensor out = at::empty({in[0].size(0), in[1].size(1)}, in[0].options().dtype(at::kFloat));
  if (!lt_matmul_out(out, in[0], in[1], at::Tensor(), 0, LtEpilogue::none, at::Tensor(), sms)) return std::nullopt;
  return out;
}

// GELU's tanh approximation as the import decomposes it (import/composites): in float32, the same
// operations in the same order, rounded once to y's dtype.
at::Tensor gelu_tanh(const at::Tensor& y) {
  const at::Tensor x = y.to(at::kFloat);
  const at::Tensor inner = at::tanh((x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI));
  return ((x * 0.5) * (inner + 1.0)).to(y.scalar_type());
}

// [GELU(y), y] for y = x . w + bias: cuBLASLt's algorithm `algorithm` with the GELU epilogue, which
// writes both halves; where it cannot run (the CPU, operands it does not take), ATen's product and
// the GELU the import would have computed from it.
at::Tensor matmul_bias_gelu(const Inputs& in, int algorithm) {
  const std::optional<MatrixProduct> product = matrix_product(Op::matmul_bias_gelu, in);
  const at::Tensor a = product ? product->a : in[0].reshape({-1, in[0].size(-1)});
  at::Tensor packed = at::empty({2, a.size(0), in[1].size(1)}, in[0].options());
  at::Tensor gelu = packed.select(0, 0), preactivation = packed.select(0, 1);
  if (!product || !lt_matmul_out(gelu, product->a, product->b, product->bias, algorithm, LtEpilogue::gelu, preactivation)) {
    at::addmm_out(preactivation, in[2], a, in[1]);
    gelu.copy_(gelu_tanh(preactivation));
  }
  std::vector<int64_t> sizes = in[0].sizes().vec();
  sizes.back() = in[1].size(1);
  sizes.insert(sizes.begin(), 2);
  return packed.view(sizes);
}

// The derivative of GELU's tanh approximation at y, in float32.
at::Tensor gelu_tanh_derivative(const at::Tensor& y) {
  const double c = std::sqrt(2.0 / M_PI);
  const at::Tensor x = y.to(at::kFloat);
  const at::Tensor t = at::tanh((x + x * x * x * 0.044715) * c);
  return (t + 1.0) * 0.5 + (x * 0.5) * (1.0 - t * t) * (c * (1.0 + x * x * (3 * 0.044715)));
}

// gelu'(y) * (a . w): cuBLASLt's algorithm `algorithm` with the DGELU epilogue; where it cannot
// run, ATen's product, rounded to its dtype as the derivative the import's GELU differentiates to
// reads it, multiplied in float32.
at::Tensor matmul_gelu_grad(const Inputs& in, int algorithm) {
  const std::optional<MatrixProduct> product = matrix_product(Op::matmul_gelu_grad, in);
  const at::Tensor a = product ? product->a : in[0].reshape({-1, in[0].size(-1)});
  const int64_t width = in[1].size(1);
  at::Tensor grad = at::empty({a.size(0), width}, in[0].options());
  const at::Tensor preactivation = in[2].reshape({a.size(0), width});
  if (!product || !lt_matmul_out(grad, product->a, product->b, at::Tensor(), algorithm, LtEpilogue::gelu_grad, preactivation)) {
    grad.copy_(at::mm(a, in[1]).to(at::kFloat) * gelu_tanh_derivative(preactivation));
  }
  return grad.view(in[2].sizes());
}

// Without a chosen backend: ATen's scaled_dot_product_attention, which picks one itself, for the
// causal attention it computes; the textbook formula otherwise.
at::Tensor attention(const Inputs& in, const Attributes& attrs) {
  const double scale = attention_scale(attrs, in[0].size(-1));
  if (attrs.causal && scale == attention_scale(Attributes{}, in[0].size(-1))) return causal_attention(in[0], in[1], in[2], 0.0, false);
  return attention_with(AttentionBackend::math, in[0], in[1], in[2], scale, attrs.causal);
}

// dq, dk, dv as [B, T, H, D] views: the layout the fused kernels give gradients of q, k, v that
// are views of one projection, and the parts of that projection's output gradient.
std::vector<at::Tensor> time_major(const std::array<at::Tensor, 3>& grads) {
  std::vector<at::Tensor> views;
  for (const at::Tensor& grad : grads) views.push_back(grad.permute({0, 2, 1, 3}));
  return views;
}

// dq, dk, dv stacked. The stack [3, B, H, T, D] is laid out in memory as [B, T, 3, H, D], the
// gradient of a fused q-k-v projection's output: each of dq, dk, dv turned back to [B, T, H * D]
// is then a view, and their concatenation is the buffer itself (run_concat), where a contiguous
// stack cost two more copies of every gradient. One stack of the three (as [B, T, H, D]) fills it
// in one vectorized copy, where a copy into each third of it ran three strided ones at half the speed.
at::Tensor stack_attention_grads(const std::array<at::Tensor, 3>& grads) { return at::stack(time_major(grads), 2).permute({2, 0, 3, 1, 4}); }

// Without a chosen backend: the attention recomputed under autograd and differentiated, which on a
// GPU runs the kernel ATen picks and that kernel's own backward.
std::array<at::Tensor, 3> attention_grads(const Inputs& in, const Attributes& attrs) {
  at::AutoGradMode enable_grad(true);
  std::vector<at::Tensor> qkv;
  for (std::size_t i = 0; i < 3; ++i) qkv.push_back(in[i].detach().requires_grad_(true));
  const at::Tensor out = attention(qkv, attrs);
  const std::vector<at::Tensor> grads = torch::autograd::grad({out}, qkv, {in[3]});
  return {grads[0], grads[1], grads[2]};
}

at::Tensor attention_grad(const Inputs& in, const Attributes& attrs) { return stack_attention_grads(attention_grads(in, attrs)); }

// The log-sum-exps attention_and_lse keeps, for attention_lse to read. An IR value is one tensor,
// so the second result of the kernel call is handed over here, found by the output's memory; the
// output itself stays where the kernel wrote it (a buffer holding both cost a copy of every
// output). Each keep or read drops the entries whose output no longer exists, so statistics
// nothing reads are held only until the next attention runs on this thread (a captured step's,
// B * H * T floats a layer, until the next capture or eager attention).
class KeptStatistics {
 public:
  void keep(const at::Tensor& output, at::Tensor lse) {
    forget_dead();
    entries_.push_back({Owner(output.getIntrusivePtr()), output.data_ptr(), std::move(lse)});
  }

  const at::Tensor& of(const at::Tensor& output) {
    forget_dead();
    for (const Entry& entry : entries_) {
      if (entry.data == output.data_ptr()) return entry.lse;
    }
    throw IrError("attention_lse: the tensor given is no live output of attention_and_lse");
  }

 private:
  using Owner = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Entry {
    Owner output;
    const void* data;
    at::Tensor lse;
  };

  void forget_dead() {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const Entry& entry) { return entry.output.expired(); }), entries_.end());
  }

  std::vector<Entry> entries_;
};

KeptStatistics& kept_statistics() {
  thread_local KeptStatistics kept;
  return kept;
}

// The forward of a training step, keeping what a fused backward reads. When the kernel keeps no
// log-sum-exp (keeps_lse), or ATen's own call runs, a log-sum-exp of NaN: a backward that read it
// by mistake would give NaN gradients, not quietly wrong ones.
at::Tensor attention_and_lse(const Inputs& in, const Attributes& attrs, std::optional<AttentionBackend> direct) {
  const at::Tensor &q = in[0], &k = in[1], &v = in[2];
  const double scale = attention_scale(attrs, q.size(-1));
  if (!direct || !keeps_lse(*direct, q)) {
    at::Tensor out = direct ? attention_with(*direct, q, k, v, scale, attrs.causal) : attention(in, attrs);
    kept_statistics().keep(out, at::full({q.size(0), q.size(1), q.size(2)}, std::numeric_limits<float>::quiet_NaN(), q.options().dtype(at::kFloat)));
    return out;
  }
  auto [out, lse] = attention_with_lse(*direct, q, k, v, scale, attrs.causal);
  kept_statistics().keep(out, std::move(lse));
  return out;
}

// Its backward, with the kernel the forward called: (q, k, v, output, log-sum-exp, grad) -> dq, dk, dv.
std::array<at::Tensor, 3> attention_grads_from_kept(const Inputs& in, const Attributes& attrs, std::optional<AttentionBackend> direct) {
  const at::Tensor &q = in[0], &k = in[1], &v = in[2], &grad = in[5];
  const double scale = attention_scale(attrs, q.size(-1));
  if (!direct) return attention_grads({q, k, v, grad}, attrs);
  if (!keeps_lse(*direct, q)) return attention_grads_with(*direct, q, k, v, grad, scale, attrs.causal);
  return attention_grads_from_lse(*direct, q, k, v, in[3], in[4], grad, scale, attrs.causal);
}

at::Tensor attention_grad_from_lse(const Inputs& in, const Attributes& attrs, std::optional<AttentionBackend> direct) {
  return stack_attention_grads(attention_grads_from_kept(in, attrs, direct));
}

// attention_grad_and_bias_sums's buffer (ir::attention_grad_sums_layout): dq, dk, dv stacked as
// [B, T, 3, H, D], and their float32 column sums over the B * T rows. One kernel stacks and sums
// where it can (runtime/column_sums); otherwise ATen stacks into the buffer and sums it.
at::Tensor attention_grad_and_bias_sums(const Inputs& in, const Attributes& attrs, std::optional<AttentionBackend> direct) {
  const at::Tensor& q = in[0];
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), dim = q.size(3);
  AttentionGradSumsLayout layout;
  TRAINC_CHECK(attention_grad_sums_layout(q.sizes().vec(), static_cast<int64_t>(q.element_size()), layout),
               "attention_grad_and_bias_sums: float32 sums for q " + c10::str(q.sizes()) + " do not fill whole elements of " +
                   c10::toString(q.scalar_type()));
  at::Tensor packed = at::empty({layout.total}, q.options());
  packed.narrow(0, layout.grads_elements, layout.sums_offset - layout.grads_elements).zero_();  // no byte left unset
  at::Tensor stacked = packed.narrow(0, 0, layout.grads_elements).view({batch, time, 3, heads, dim});
  at::Tensor sums = packed.narrow(0, layout.sums_offset, layout.sums_elements).view(at::kFloat);
  const std::array<at::Tensor, 3> grads = attention_grads_from_kept(in, attrs, direct);
  if (stack_column_sums_supported(grads, stacked)) {
    stack_column_sums(grads, stacked, sums);
    return packed;
  }
  at::stack_out(stacked, time_major(grads), 2);
  sums.copy_(at::sum(stacked.view({batch * time, 3 * heads * dim}), {0}, false, at::kFloat));
  return packed;
}

// Concatenating views that already lie side by side in one buffer, in order, gives a view of that
// buffer; otherwise the inputs are copied together. The view shares its inputs' memory, as the
// executors' views do: programs never write into a value they did not make.
at::Tensor concat(const Inputs& in, int64_t dim) {
  const at::Tensor& first = in.front();
  if (dim < 0) dim += first.dim();
  bool adjacent = first.has_storage();
  int64_t size = first.size(dim);
  for (std::size_t i = 1; i < in.size() && adjacent; ++i) {
    const at::Tensor& previous = in[i - 1];
    const at::Tensor& next = in[i];
    adjacent = next.has_storage() && next.storage().is_alias_of(first.storage()) && next.scalar_type() == first.scalar_type() && next.strides() == first.strides() &&
               next.storage_offset() == previous.storage_offset() + previous.size(dim) * previous.stride(dim);
    for (int64_t d = 0; d < first.dim() && adjacent; ++d) adjacent = d == dim || next.size(d) == first.size(d);
    size += next.size(dim);
  }
  if (!adjacent) return at::cat(in, dim);
  std::vector<int64_t> sizes = first.sizes().vec();
  sizes[static_cast<std::size_t>(dim)] = size;
  return first.as_strided(sizes, first.strides(), first.storage_offset());
}

std::vector<int64_t> tail(const std::vector<int64_t>& ints, std::size_t from) { return {ints.begin() + static_cast<std::ptrdiff_t>(from), ints.end()}; }

// conv2d's gradients through ATen's convolution_backward, one of its outputs at a time.
at::Tensor conv2d_grad(const Inputs& in, const Attributes& a, int which) {
  const std::array<bool, 3> mask = {which == 0, which == 1, false};
  const auto grads = at::convolution_backward(in[0], in[1], in[2], c10::nullopt, {a.ints[0], a.ints[0]}, {a.ints[1], a.ints[1]},
                                              {1, 1}, false, {0, 0}, 1, mask);
  return which == 0 ? std::get<0>(grads) : std::get<1>(grads);
}

// One ATen call per op. The table below is generated from TRAINC_IR_OPS: an op without its
// run_<op> function does not compile.
at::Tensor run_input(const Inputs& in, const Attributes& a, at::Device device) { throw IrError("inputs are not executed"); }
at::Tensor run_constant(const Inputs& in, const Attributes& a, at::Device device) { return at::full(a.ints, a.scalar, at::TensorOptions().dtype(to_scalar_type(a.dtype)).device(device)); }
at::Tensor run_iota(const Inputs& in, const Attributes& a, at::Device device) { return at::arange(a.ints[0], at::TensorOptions().dtype(to_scalar_type(a.dtype)).device(device)); }
// The draw eager dropout makes (ATen's CPU dropout: empty_like(x).bernoulli_(1 - p)), so a compiled
// step with dropout consumes the generator exactly as the eager step does.
at::Tensor run_bernoulli(const Inputs& in, const Attributes& a, at::Device device) { return at::empty(a.ints, at::TensorOptions().dtype(to_scalar_type(a.dtype)).device(device)).bernoulli_(a.scalar); }
at::Tensor run_neg(const Inputs& in, const Attributes& a, at::Device device) { return at::neg(in[0]); }
at::Tensor run_exp(const Inputs& in, const Attributes& a, at::Device device) { return at::exp(in[0]); }
at::Tensor run_log(const Inputs& in, const Attributes& a, at::Device device) { return at::log(in[0]); }
at::Tensor run_tanh(const Inputs& in, const Attributes& a, at::Device device) { return at::tanh(in[0]); }
at::Tensor run_erf(const Inputs& in, const Attributes& a, at::Device device) { return at::erf(in[0]); }
at::Tensor run_sqrt(const Inputs& in, const Attributes& a, at::Device device) { return at::sqrt(in[0]); }
at::Tensor run_rsqrt(const Inputs& in, const Attributes& a, at::Device device) { return at::rsqrt(in[0]); }
at::Tensor run_reciprocal(const Inputs& in, const Attributes& a, at::Device device) { return at::reciprocal(in[0]); }
at::Tensor run_relu(const Inputs& in, const Attributes& a, at::Device device) { return at::relu(in[0]); }
at::Tensor run_sigmoid(const Inputs& in, const Attributes& a, at::Device device) { return at::sigmoid(in[0]); }
at::Tensor run_cast(const Inputs& in, const Attributes& a, at::Device device) { return in[0].to(to_scalar_type(a.dtype)); }
at::Tensor run_detach(const Inputs& in, const Attributes& a, at::Device device) { return in[0]; }
at::Tensor run_add(const Inputs& in, const Attributes& a, at::Device device) { return at::add(in[0], in[1]); }
at::Tensor run_sub(const Inputs& in, const Attributes& a, at::Device device) { return at::sub(in[0], in[1]); }
at::Tensor run_mul(const Inputs& in, const Attributes& a, at::Device device) { return at::mul(in[0], in[1]); }
at::Tensor run_div(const Inputs& in, const Attributes& a, at::Device device) { return at::div(in[0], in[1]); }
at::Tensor run_pow(const Inputs& in, const Attributes& a, at::Device device) { return at::pow(in[0], in[1]); }
at::Tensor run_maximum(const Inputs& in, const Attributes& a, at::Device device) { return at::maximum(in[0], in[1]); }
at::Tensor run_gt(const Inputs& in, const Attributes& a, at::Device device) { return at::gt(in[0], in[1]); }
at::Tensor run_eq(const Inputs& in, const Attributes& a, at::Device device) { return at::eq(in[0], in[1]); }
at::Tensor run_where(const Inputs& in, const Attributes& a, at::Device device) { return at::where(in[0], in[1], in[2]); }
at::Tensor run_sum(const Inputs& in, const Attributes& a, at::Device device) { return at::sum(in[0], a.ints, a.keepdim); }
at::Tensor run_amax(const Inputs& in, const Attributes& a, at::Device device) { return at::amax(in[0], a.ints, a.keepdim); }
at::Tensor run_reshape(const Inputs& in, const Attributes& a, at::Device device) { return in[0].reshape(a.ints); }
at::Tensor run_permute(const Inputs& in, const Attributes& a, at::Device device) { return in[0].permute(a.ints); }
at::Tensor run_expand(const Inputs& in, const Attributes& a, at::Device device) { return in[0].expand(a.ints); }
at::Tensor run_slice(const Inputs& in, const Attributes& a, at::Device device) { return in[0].slice(a.ints[0], a.ints[1], a.ints[2], a.ints[3]); }
at::Tensor run_matmul(const Inputs& in, const Attributes& a, at::Device device) { return at::matmul(in[0], in[1]); }
at::Tensor run_matmul_to_float(const Inputs& in, const Attributes& a, at::Device device) { return matmul_to_float(in[0], in[1]); }
at::Tensor run_embedding(const Inputs& in, const Attributes& a, at::Device device) { return at::embedding(in[0], in[1]); }
at::Tensor run_attention(const Inputs& in, const Attributes& a, at::Device device) { return attention(in, a); }
at::Tensor run_attention_grad(const Inputs& in, const Attributes& a, at::Device device) { return attention_grad(in, a); }
at::Tensor run_conv2d(const Inputs& in, const Attributes& a, at::Device device) { return at::conv2d(in[0], in[1], {}, a.ints[0], a.ints[1]); }
at::Tensor run_concat(const Inputs& in, const Attributes& a, at::Device device) { return concat(in, a.ints[0]); }
at::Tensor run_slice_backward(const Inputs& in, const Attributes& a, at::Device device) { return at::slice_backward(in[0], tail(a.ints, 4), a.ints[0], a.ints[1], a.ints[2], a.ints[3]); }
at::Tensor run_embedding_grad(const Inputs& in, const Attributes& a, at::Device device) { return at::embedding_dense_backward(in[0], in[1], a.ints[0], -1, false); }
at::Tensor run_embedding_grad_add(const Inputs& in, const Attributes& a, at::Device device) {
  return embedding_grad_add(in[0], in[1], in[2], ir::embedding_grad_add_in_place(a));
}
at::Tensor run_matmul_bias_gelu(const Inputs& in, const Attributes& a, at::Device device) {
  return matmul_bias_gelu(in, 0);  // the heuristic's first algorithm
}
at::Tensor run_matmul_gelu_grad(const Inputs& in, const Attributes& a, at::Device device) { return matmul_gelu_grad(in, 0); }
at::Tensor run_conv2d_input_grad(const Inputs& in, const Attributes& a, at::Device device) { return conv2d_grad(in, a, 0); }
at::Tensor run_conv2d_weight_grad(const Inputs& in, const Attributes& a, at::Device device) { return conv2d_grad(in, a, 1); }
// One GEMM with the bias as its C operand, as eager's linear and addmm run: the sum is rounded
// once, which matters in bf16 (a pre-activation near zero keeps its sign).
at::Tensor run_matmul_bias(const Inputs& in, const Attributes& a, at::Device device) {
  const at::Tensor& x = in[0];
  const at::Tensor& w = in[1];
  if (w.dim() != 2) return at::add(at::matmul(x, w), in[2]);
  if (x.dim() == 2) return at::addmm(in[2], x, w);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = w.size(1);
  return at::addmm(in[2], x.reshape({-1, x.size(-1)}), w).view(sizes);
}
at::Tensor run_max_pool2d_indices(const Inputs& in, const Attributes& a, at::Device device) {
  return std::get<1>(at::max_pool2d_with_indices(in[0], a.ints[0], a.ints[1], a.ints[2]));
}
at::Tensor run_max_pool2d(const Inputs& in, const Attributes& a, at::Device device) {
  const at::Tensor& indices = in[1];
  return in[0].flatten(2).gather(2, indices.flatten(2)).view(indices.sizes());
}
at::Tensor run_max_pool2d_grad(const Inputs& in, const Attributes& a, at::Device device) {
  return at::max_pool2d_with_indices_backward(in[0], in[1], a.ints[0], a.ints[1], a.ints[2], 1, false, in[2]);
}
at::Tensor run_avg_pool2d(const Inputs& in, const Attributes& a, at::Device device) { return at::avg_pool2d(in[0], a.ints[0], a.ints[1], a.ints[2], false, a.ints[3] != 0); }
at::Tensor run_avg_pool2d_grad(const Inputs& in, const Attributes& a, at::Device device) { return at::avg_pool2d_backward(in[0], in[1], a.ints[0], a.ints[1], a.ints[2], false, a.ints[3] != 0, c10::nullopt); }
at::Tensor run_linear_cross_entropy(const Inputs& in, const Attributes& a, at::Device device) {
  return linear_cross_entropy(in[0], in[1], in[2], a.scalar, to_scalar_type(a.dtype));
}
at::Tensor run_sum_to_float(const Inputs& in, const Attributes& a, at::Device device) {
  return at::sum(in[0], a.ints, a.keepdim, at::kFloat);
}
at::Tensor run_linear_cross_entropy_grad(const Inputs& in, const Attributes& a, at::Device device) {
  return linear_cross_entropy_grad(in[0], in[1], in[2], in[3], a.scalar);
}
at::Tensor run_attention_and_lse(const Inputs& in, const Attributes& a, at::Device device) {
  return attention_and_lse(in, a, lse_pair_backend(in, a));
}
at::Tensor run_attention_grad_from_lse(const Inputs& in, const Attributes& a, at::Device device) {
  return attention_grad_from_lse(in, a, lse_pair_backend(in, a));
}
at::Tensor run_attention_lse(const Inputs& in, const Attributes& a, at::Device device) { return kept_statistics().of(in[0]); }
at::Tensor run_attention_grad_and_bias_sums(const Inputs& in, const Attributes& a, at::Device device) {
  return attention_grad_and_bias_sums(in, a, lse_pair_backend(in, a));
}
at::Tensor run_bitcast(const Inputs& in, const Attributes& a, at::Device device) { return in[0].contiguous().view(to_scalar_type(a.dtype)); }
at::Tensor run_linear_cross_entropy_and_dlogits(const Inputs& in, const Attributes& a, at::Device device) {
  return linear_cross_entropy_and_dlogits(in[0], in[1], in[2], a.scalar, to_scalar_type(a.dtype));
}
at::Tensor run_linear_cross_entropy_grad_from_dlogits(const Inputs& in, const Attributes& a, at::Device device) {
  return linear_cross_entropy_grad_from_dlogits(in[0], in[1], in[2], in[3], {}, head_gradients(a));
}

const std::array<Kernel, kOpCount>& kernels() {
#define TRAINC_IR_OP_KERNEL(op, kind, arity) &run_##op,
  static const std::array<Kernel, kOpCount> table = {TRAINC_IR_OPS(TRAINC_IR_OP_KERNEL)};
#undef TRAINC_IR_OP_KERNEL
  return table;
}

}  // namespace

std::optional<AttentionBackend> lse_pair_backend(const std::vector<at::Tensor>& inputs, const Attributes& attrs) {
  return direct_attention_backend(inputs[0], inputs[1], inputs[2], attention_scale(attrs, inputs[0].size(-1)), attrs.causal,
                                  /*training=*/true);
}

double attention_scale(const Attributes& attrs, int64_t head_dim) {
  return attrs.scalar == 0.0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : attrs.scalar;
}

bool is_matrix_product(Op op) {
  return op == Op::matmul || op == Op::matmul_bias || op == Op::matmul_to_float || op == Op::matmul_bias_gelu || op == Op::matmul_gelu_grad;
}

int gemm_algorithm_count(const Node& node, const std::vector<at::Tensor>& inputs, int limit) {
  const std::optional<MatrixProduct> product = matrix_product(node.op, inputs);
  return product ? lt_algorithm_count(product->a, product->b, product->bias, product->out_dtype, limit, epilogue_of(node.op)) : 0;
}

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::bf16: return at::kBFloat16;
    case DType::f16: return at::kHalf;
    case DType::i64: return at::kLong;
    case DType::b8: return at::kBool;
  }
  throw IrError("unknown dtype");
}

DType to_dtype(at::ScalarType type) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i64, DType::b8}) {
    if (to_scalar_type(dtype) == type) return dtype;
  }
  throw IrError(std::string("the IR has no dtype for ") + c10::toString(type));
}

std::vector<at::Tensor> execute_with_aten(const Graph& graph, const std::vector<at::Tensor>& inputs) {
  return execute_with_aten(graph, inputs, inputs.empty() ? at::Device(at::kCPU) : inputs.front().device());
}

at::Tensor execute_node(const Node& node, const std::vector<at::Tensor>& inputs, at::Device device) {
  return kernels()[static_cast<std::size_t>(node.op)](inputs, node.attrs, device);
}

at::Tensor execute_node(const Node& node, const std::vector<at::Tensor>& inputs, at::Device device, const std::string& variant) {
  if (variant.empty()) {
    if (node.op == Op::matmul_to_float) {
      if (std::optional<at::Tensor> out = side_stream_weight_grad(inputs)) return *out;
    }
    return execute_node(node, inputs, device);
  }
  if (node.op == Op::attention || node.op == Op::attention_grad) {
    const std::optional<AttentionBackend> backend = attention_backend_named(variant);
    TRAINC_CHECK(backend.has_value(), "unknown attention backend '" + variant + "'");
    const double scale = attention_scale(node.attrs, inputs[0].size(-1));
    if (node.op == Op::attention) return attention_with(*backend, inputs[0], inputs[1], inputs[2], scale, node.attrs.causal);
    return stack_attention_grads(attention_grads_with(*backend, inputs[0], inputs[1], inputs[2], inputs[3], scale, node.attrs.causal));
  }
  if ((node.op == Op::sum || node.op == Op::sum_to_float) && variant != "aten") {
    TRAINC_CHECK(variant == "split_rows", std::string("op ") + op_name(node.op) + " has no variant '" + variant + "'");
    // Chosen at a first run; a later input laid out otherwise (a view, a misaligned start) is ATen's.
    if (!column_sums_supported(inputs[0], node.attrs.ints)) return execute_node(node, inputs, device);
    at::Tensor out = column_sums(inputs[0], static_cast<int64_t>(node.attrs.ints.size()));
    if (node.op == Op::sum) out = out.to(inputs[0].scalar_type());  // summed in float32, rounded once, as ATen's sum
    return node.attrs.keepdim ? out.view(node.type.shape) : out;
  }
  if (node.op == Op::attention_and_lse || node.op == Op::attention_grad_from_lse || node.op == Op::attention_grad_and_bias_sums) {
    // The kernel decided at the program's first run ("aten": none to call directly).
    std::optional<AttentionBackend> direct;
    if (variant != "aten") {
      direct = attention_backend_named(variant);
      TRAINC_CHECK(direct.has_value(), "unknown attention backend '" + variant + "'");
    }
    if (node.op == Op::attention_and_lse) return attention_and_lse(inputs, node.attrs, direct);
    if (node.op == Op::attention_grad_from_lse) return attention_grad_from_lse(inputs, node.attrs, direct);
    return attention_grad_and_bias_sums(inputs, node.attrs, direct);
  }
  if (node.op == Op::linear_cross_entropy_and_dlogits || node.op == Op::linear_cross_entropy_grad_from_dlogits) {
    const std::optional<std::vector<int>> gemms = lt_algorithm_list(variant);
    TRAINC_CHECK(gemms.has_value(), std::string("op ") + op_name(node.op) + " has no variant '" + variant + "'");
    if (node.op == Op::linear_cross_entropy_and_dlogits) {
      return linear_cross_entropy_and_dlogits(inputs[0], inputs[1], inputs[2], node.attrs.scalar, to_scalar_type(node.attrs.dtype),
                                              kLinearCrossEntropyChunk, *gemms);
    }
    return linear_cross_entropy_grad_from_dlogits(inputs[0], inputs[1], inputs[2], inputs[3], *gemms, ir::head_gradients(node.attrs));
  }
  if (const std::optional<int> algorithm = lt_algorithm_index(variant)) {
    TRAINC_CHECK(is_matrix_product(node.op), std::string("op ") + op_name(node.op) + " has no variant '" + variant + "'");
    if (node.op == Op::matmul_bias_gelu) return matmul_bias_gelu(inputs, *algorithm);
    if (node.op == Op::matmul_gelu_grad) return matmul_gelu_grad(inputs, *algorithm);
    if (const std::optional<MatrixProduct> product = matrix_product(node.op, inputs)) {
      at::Tensor out = at::empty({product->a.size(0), product->b.size(1)}, product->a.options().dtype(product->out_dtype));
      if (lt_matmul_out(out, product->a, product->b, product->bias, *algorithm)) return out.view(product->out_sizes);
    }
    // Chosen at a first run; a later input cuBLASLt cannot take directly (a view, a misaligned
    // start) is ATen's.
    return execute_node(node, inputs, device);
  }
  if (variant == "aten") return execute_node(node, inputs, device);
  TRAINC_CHECK(node.op == Op::matmul || node.op == Op::matmul_bias || node.op == Op::matmul_to_float, std::string("op ") + op_name(node.op) + " has no variant '" + variant + "'");
  BlasLibraryScope library(variant);
  return execute_node(node, inputs, device);
}

std::vector<at::Tensor> execute_with_aten(const Graph& graph, std::vector<at::Tensor> inputs, at::Device device) {
  // Each value is released right after its last use, so a program holds only what is still live.
  std::vector<ValueId> last_use(static_cast<std::size_t>(graph.size()), -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    for (ValueId input : graph.node(id).inputs) last_use[static_cast<std::size_t>(input)] = id;
  }
  for (ValueId output : graph.outputs()) last_use[static_cast<std::size_t>(output)] = graph.size();
  std::vector<at::Tensor> values(static_cast<std::size_t>(graph.size()));
  std::size_t next_input = 0;
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::input) {
      if (next_input >= inputs.size()) throw IrError("execute_with_aten: fewer tensors than graph inputs");
      values[static_cast<std::size_t>(id)] = std::move(inputs[next_input++]);
      continue;
    }
    Inputs arguments;
    for (ValueId input : node.inputs) arguments.push_back(values[static_cast<std::size_t>(input)]);
    values[static_cast<std::size_t>(id)] = kernels()[static_cast<std::size_t>(node.op)](arguments, node.attrs, device);
    for (ValueId input : node.inputs) {
      if (last_use[static_cast<std::size_t>(input)] == id) values[static_cast<std::size_t>(input)].reset();
    }
  }
  if (next_input != inputs.size()) throw IrError("execute_with_aten: more tensors than graph inputs");
  std::vector<at::Tensor> outputs;
  for (ValueId output : graph.outputs()) outputs.push_back(values[static_cast<std::size_t>(output)]);
  return outputs;
}

}  // namespace trainc::ir
