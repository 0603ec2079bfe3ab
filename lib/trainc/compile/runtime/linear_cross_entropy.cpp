#include "trainc/compile/runtime/linear_cross_entropy.h"

#include <algorithm>

#include "trainc/common/error.h"
#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/ir/graph.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/cross_entropy_rows.h"
#include "trainc/compile/runtime/parameter_shadows.h"
#include "trainc/compile/runtime/scaled_rows.h"
#include "trainc/compile/runtime/side_product_sms.h"

namespace trainc {
namespace {

// The weight with zero rows appended up to `padded` rows: the buffer a parameter's shadow
// (runtime/parameter_shadows) already is, or a copy.
at::Tensor padded_to(const at::Tensor& weight, int64_t padded) {
  const int64_t vocabulary = weight.size(0);
  if (vocabulary == padded) return weight.contiguous();
  if (at::Tensor base = ParameterShadows::instance().padded_base(weight, padded); base.defined()) return base;
  // Only the appended rows zeroed: zeroing all of it first wrote GPT-2's 77 MB head twice.
  at::Tensor result = at::empty({padded, weight.size(1)}, weight.options());
  result.narrow(0, vocabulary, padded - vocabulary).zero_();
  result.narrow(0, 0, vocabulary).copy_(weight);
  return result;
}

// The weight padded to an aligned vocabulary on a GPU (the CPU's GEMMs do not care).
at::Tensor padded_weight(const at::Tensor& weight) {
  const int64_t vocabulary = weight.size(0);
  if (!weight.is_cuda()) return weight.contiguous();
  return padded_to(weight, ir::padded_vocabulary(vocabulary));
}

ir::LinearCrossEntropyLayout layout_of(const at::Tensor& x, const at::Tensor& weight, at::ScalarType loss_dtype) {
  ir::LinearCrossEntropyLayout layout;
  TRAINC_CHECK(ir::linear_cross_entropy_layout(x.size(0), x.size(1), weight.size(0), static_cast<int64_t>(x.element_size()),
                                               static_cast<int64_t>(c10::elementSize(loss_dtype)), layout),
               "linear_cross_entropy_and_dlogits: " + std::to_string(x.size(0)) + " losses of " + c10::toString(loss_dtype) +
                   " do not fill whole elements of " + c10::toString(x.scalar_type()));
  return layout;
}

// out = a . b by the product's chosen algorithm, or the default.
void product_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const HeadGemmAlgorithms& algorithms, std::size_t which,
                  int sm_count_target = 0) {
  head_product_into(out, a, b, which < algorithms.size() ? algorithms[which] : -1, sm_count_target);
}

// The SMs the weight's gradient GEMM aims at (0: all): on the side stream, half of them where the
// layers' products are small (runtime/side_product_sms). cuBLASLt's kernel for the whole GPU held
// every SM until it ended: the small GPT's layers' backward, queued behind it, waited 50 us
// (docs/compile.md). GPT-2's layers fill the GPU with work of their own, and the GEMM aimed at
// half of it took 0.9 ms longer a step.
int weight_grad_sm_target(const at::Tensor& x) { return side_product_sm_target(x.size(0), x.size(1), Optimization::head_grad_sms); }

// The rows' logit gradients inside the training pair's buffer: [rows, padded vocabulary].
at::Tensor dlogits_in(const at::Tensor& packed, const ir::LinearCrossEntropyLayout& layout, int64_t rows) {
  return packed.narrow(0, layout.dlogits_offset, rows * layout.padded_vocabulary).view({rows, layout.padded_vocabulary});
}

// The padded weight inside the training pair's buffer, [padded vocabulary, width]; the weight
// itself when no rows were appended.
at::Tensor padded_weight_in(const at::Tensor& packed, const ir::LinearCrossEntropyLayout& layout, const at::Tensor& weight) {
  if (!layout.keeps_weight()) return weight.contiguous();
  // A shadow's padded buffer, which the forward used in place of the buffer's copy.
  if (at::Tensor base = ParameterShadows::instance().padded_base(weight, layout.padded_vocabulary); base.defined()) return base;
  return packed.narrow(0, layout.weight_offset, layout.padded_vocabulary * weight.size(1)).view({layout.padded_vocabulary, weight.size(1)});
}

int64_t chunk_rows(int64_t vocabulary, int64_t chunk_elements) { return std::max<int64_t>(1, chunk_elements / std::max<int64_t>(vocabulary, 1)); }

// The chunked paths' formulas over a chunk of logits `wide` [n, V] in the loss's dtype, `picked`
// the targets [n, 1] clamped into [0, V). Each row's loss: lse - (1 - s) * z[target] - (s / V) * sum(z).
at::Tensor row_losses(const at::Tensor& wide, const at::Tensor& picked, double smoothing) {
  at::Tensor loss = at::logsumexp(wide, {1}) - (1.0 - smoothing) * wide.gather(1, picked).squeeze(1);
  if (smoothing > 0.0) loss -= (smoothing / static_cast<double>(wide.size(1))) * wide.sum(1);
  return loss;
}

// The gradient of each row's own loss over its logits: softmax - (1 - s) * onehot - s / V.
at::Tensor unscaled_dlogits(const at::Tensor& wide, const at::Tensor& picked, double smoothing) {
  at::Tensor g = at::softmax(wide, 1);
  g.scatter_add_(1, picked, at::full({wide.size(0), 1}, -(1.0 - smoothing), g.options()));
  if (smoothing > 0.0) g.sub_(smoothing / static_cast<double>(wide.size(1)));
  return g;
}

}  // namespace

void head_product_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, int algorithm, int sm_count_target) {
  at::Tensor target = out;  // the same tensor, writable
  if (out.scalar_type() != a.scalar_type()) {
    // A float32 product of half-precision operands: ATen's mm writes only the operands' dtype, so
    // the default is cuBLASLt's first-ranked algorithm, and where that cannot run (the CPU, a
    // product first met inside a capture) matmul_to_float's, copied in. Only the default takes an
    // SM count target: a product max-autotune chose runs as it measured it, on the whole GPU.
    const int sms = algorithm < 0 ? sm_count_target : 0;
    if (!lt_matmul_out(out, a, b, at::Tensor(), std::max(algorithm, 0), LtEpilogue::none, at::Tensor(), sms)) target.copy_(matmul_to_float(a, b));
    return;
  }
  if (algorithm >= 0 && lt_matmul_out(out, a, b, at::Tensor(), algorithm)) return;
  at::mm_out(target, a, b);
}

at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, double smoothing,
                                at::ScalarType loss_dtype, int64_t chunk_elements) {
  const int64_t rows = x.size(0), vocabulary = weight.size(0);
  const at::Tensor logits = at::mm(x, padded_weight(weight).t()).narrow(1, 0, vocabulary);
  if (cross_entropy_rows_supported(logits, loss_dtype)) return cross_entropy_rows_forward(logits, targets, smoothing);
  const at::Tensor safe_targets = targets.clamp(0, vocabulary - 1).unsqueeze(1);
  at::Tensor loss = at::empty({rows}, x.options().dtype(loss_dtype));
  const int64_t step = chunk_rows(vocabulary, chunk_elements);
  for (int64_t start = 0; start < rows; start += step) {
    const int64_t n = std::min(step, rows - start);
    loss.narrow(0, start, n).copy_(row_losses(logits.narrow(0, start, n).to(loss_dtype), safe_targets.narrow(0, start, n), smoothing));
  }
  return loss;
}

at::Tensor linear_cross_entropy_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, const at::Tensor& grad,
                                     double smoothing, int64_t chunk_elements) {
  const int64_t rows = x.size(0), width = x.size(1), vocabulary = weight.size(0);
  const at::Tensor padded = padded_weight(weight);
  // The logits again, then each chunk's gradient written over them: softmax - (1 - s) * onehot - s / V,
  // times the row's grad, rounded to x's dtype as eager's cast back from float32 rounds it. The
  // padding columns stay 0.
  at::Tensor logits = at::mm(x, padded.t());
  at::Tensor valid_logits = logits.narrow(1, 0, vocabulary);
  if (cross_entropy_rows_supported(valid_logits, grad.scalar_type())) {
    cross_entropy_rows_backward(valid_logits, targets, grad, smoothing);
  } else {
    const at::Tensor safe_targets = targets.clamp(0, vocabulary - 1).unsqueeze(1);
    const int64_t step = chunk_rows(vocabulary, chunk_elements);
    for (int64_t start = 0; start < rows; start += step) {
      const int64_t n = std::min(step, rows - start);
      at::Tensor z = valid_logits.narrow(0, start, n);
      z.copy_(unscaled_dlogits(z.to(grad.scalar_type()), safe_targets.narrow(0, start, n), smoothing).mul_(grad.narrow(0, start, n).unsqueeze(1)));
    }
  }
  at::Tensor result = at::empty({rows * width + vocabulary * width}, x.options());
  at::Tensor x_grad = result.narrow(0, 0, rows * width).view({rows, width});
  at::mm_out(x_grad, logits, padded);
  const at::Tensor weight_grad = at::mm(logits.t(), x);
  result.narrow(0, rows * width, vocabulary * width).view({vocabulary, width}).copy_(weight_grad.narrow(0, 0, vocabulary));
  return result;
}

at::Tensor linear_cross_entropy_and_dlogits(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& targets, double smoothing,
                                            at::ScalarType loss_dtype, int64_t chunk_elements, const HeadGemmAlgorithms& algorithms) {
  const int64_t rows = x.size(0), vocabulary = weight.size(0);
  const ir::LinearCrossEntropyLayout layout = layout_of(x, weight, loss_dtype);
  at::Tensor packed = at::empty({layout.total}, x.options());
  // The gaps before the gradient rows and before the weight zeroed. The weight's place is left
  // unset when the weight is a parameter's shadow already padded (runtime/parameter_shadows),
  // which the backward then reads instead (padded_weight_in).
  packed.narrow(0, layout.loss_elements, layout.dlogits_offset - layout.loss_elements).zero_();
  const int64_t dlogits_end = layout.dlogits_offset + rows * layout.padded_vocabulary;
  if (layout.weight_offset > dlogits_end) packed.narrow(0, dlogits_end, layout.weight_offset - dlogits_end).zero_();
  at::Tensor loss = packed.narrow(0, 0, layout.loss_elements).view(loss_dtype);
  at::Tensor logits = dlogits_in(packed, layout, rows);
  const at::Tensor padded = padded_weight_in(packed, layout, weight);
  if (layout.keeps_weight() && padded.data_ptr() != weight.data_ptr()) {
    padded.narrow(0, vocabulary, layout.padded_vocabulary - vocabulary).zero_();
    padded.narrow(0, 0, vocabulary).copy_(weight);
  }
  product_into(logits, x, padded.t(), algorithms, 0);  // the padding columns are x . 0 = 0
  at::Tensor valid_logits = logits.narrow(1, 0, vocabulary);
  if (cross_entropy_rows_supported(valid_logits, loss_dtype)) {
    cross_entropy_rows_loss_and_dlogits(valid_logits, targets, smoothing, loss);
    return packed;
  }
  const at::Tensor safe_targets = targets.clamp(0, vocabulary - 1).unsqueeze(1);
  const int64_t step = chunk_rows(vocabulary, chunk_elements);
  for (int64_t start = 0; start < rows; start += step) {
    const int64_t n = std::min(step, rows - start);
    at::Tensor z = valid_logits.narrow(0, start, n);
    const at::Tensor wide = z.to(loss_dtype);
    const at::Tensor picked = safe_targets.narrow(0, start, n);
    loss.narrow(0, start, n).copy_(row_losses(wide, picked, smoothing));
    z.copy_(unscaled_dlogits(wide, picked, smoothing));
  }
  return packed;
}

at::Tensor linear_cross_entropy_grad_from_dlogits(const at::Tensor& packed, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                                                  const HeadGemmAlgorithms& algorithms, ir::HeadGradients which) {
  const int64_t rows = x.size(0), width = x.size(1);
  const ir::LinearCrossEntropyLayout layout = layout_of(x, weight, grad.scalar_type());
  const int64_t padded = layout.padded_vocabulary;
  const at::Tensor dlogits = dlogits_in(packed, layout, rows);
  const bool input = which == ir::HeadGradients::both || which == ir::HeadGradients::input, weight_too = which != ir::HeadGradients::input;
  const bool in_float = which == ir::HeadGradients::weight_float;
  at::Tensor result = at::empty({(input ? rows * width : 0) + (weight_too ? padded * width : 0)}, in_float ? x.options().dtype(at::kFloat) : x.options());
  if (input) {
    // Each row of D @ weight, rounded to x's dtype by the GEMM, then scaled by its grad and rounded
    // again; the padding columns of D meet the padding's zero rows (the forward's padded weight).
    at::Tensor x_grad = result.narrow(0, 0, rows * width).view({rows, width});
    product_into(x_grad, dlogits, padded_weight_in(packed, layout, weight), algorithms, 0);
    scale_rows_into(x_grad, x_grad, grad);
  }
  if (weight_too) {
    // Each row scaled in float32 and rounded once to x's dtype (no float32 copy of x).
    at::Tensor scaled_x = at::empty_like(x, at::MemoryFormat::Contiguous);
    scale_rows_into(scaled_x, x.contiguous(), grad);
    // Written where it is returned, padding rows and all: D's padding columns are 0, so are they.
    at::Tensor weight_grad = result.narrow(0, input ? rows * width : 0, padded * width).view({padded, width});
    product_into(weight_grad, dlogits.t(), scaled_x, algorithms, input ? 1 : 0, weight_grad_sm_target(x));
  }
  return result;
}

std::vector<HeadGemm> head_gemms(ir::Op op, const std::vector<at::Tensor>& inputs, at::ScalarType loss_dtype, ir::HeadGradients which) {
  if (op == ir::Op::linear_cross_entropy_and_dlogits) {
    const at::Tensor& x = inputs[0];
    const ir::LinearCrossEntropyLayout layout = layout_of(x, inputs[1], loss_dtype);
    const at::Tensor padded = at::empty({layout.padded_vocabulary, x.size(1)}, x.options());
    return {{at::empty({x.size(0), layout.padded_vocabulary}, x.options()), x, padded.t()}};
  }
  if (op == ir::Op::linear_cross_entropy_grad_from_dlogits) {
    const at::Tensor& x = inputs[1];
    const int64_t rows = x.size(0), width = x.size(1);
    const ir::LinearCrossEntropyLayout layout = layout_of(x, inputs[2], inputs[3].scalar_type());
    const int64_t padded = layout.padded_vocabulary;
    const at::Tensor dlogits = dlogits_in(inputs[0], layout, rows);
    const at::Tensor padded_weight = at::empty({padded, width}, x.options());
    const at::Tensor scaled_x = at::empty({rows, width}, x.options());
    std::vector<HeadGemm> gemms;
    if (which == ir::HeadGradients::both || which == ir::HeadGradients::input) gemms.push_back({at::empty({rows, width}, x.options()), dlogits, padded_weight});
    const at::ScalarType weight_dtype = which == ir::HeadGradients::weight_float ? at::kFloat : x.scalar_type();
    if (which != ir::HeadGradients::input) gemms.push_back({at::empty({padded, width}, x.options().dtype(weight_dtype)), dlogits.t(), scaled_x});
    return gemms;
  }
  return {};
}

}  // namespace trainc
