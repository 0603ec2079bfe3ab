#include "trainc/compile/runtime/linear_cross_entropy.h"

#include <algorithm>

#include "trainc/compile/runtime/cross_entropy_rows.h"

namespace trainc {
namespace {

constexpr int64_t kVocabularyAlignment = 64;

// The weight with zero rows appended up to an aligned vocabulary (GPUs only; the CPU's GEMMs do not care).
at::Tensor padded_weight(const at::Tensor& weight) {
  const int64_t vocabulary = weight.size(0);
  if (!weight.is_cuda() || vocabulary % kVocabularyAlignment == 0) return weight.contiguous();
  const int64_t padded = (vocabulary + kVocabularyAlignment - 1) / kVocabularyAlignment * kVocabularyAlignment;
  at::Tensor result = at::zeros({padded, weight.size(1)}, weight.options());
  result.narrow(0, 0, vocabulary).copy_(weight);
  return result;
}

int64_t chunk_rows(int64_t vocabulary, int64_t chunk_elements) { return std::max<int64_t>(1, chunk_elements / std::max<int64_t>(vocabulary, 1)); }

}  // namespace

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
    const at::Tensor z = logits.narrow(0, start, n).to(loss_dtype);
    at::Tensor row_loss = at::logsumexp(z, {1}) - (1.0 - smoothing) * z.gather(1, safe_targets.narrow(0, start, n)).squeeze(1);
    if (smoothing > 0.0) row_loss -= (smoothing / static_cast<double>(vocabulary)) * z.sum(1);
    loss.narrow(0, start, n).copy_(row_loss);
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
      at::Tensor g = at::softmax(z, 1, grad.scalar_type());
      g.scatter_add_(1, safe_targets.narrow(0, start, n), at::full({n, 1}, -(1.0 - smoothing), g.options()));
      if (smoothing > 0.0) g.sub_(smoothing / static_cast<double>(vocabulary));
      g.mul_(grad.narrow(0, start, n).unsqueeze(1));
      z.copy_(g);
    }
  }
  at::Tensor result = at::empty({rows * width + vocabulary * width}, x.options());
  at::Tensor x_grad = result.narrow(0, 0, rows * width).view({rows, width});
  at::mm_out(x_grad, logits, padded);
  const at::Tensor weight_grad = at::mm(logits.t(), x);
  result.narrow(0, rows * width, vocabulary * width).view({vocabulary, width}).copy_(weight_grad.narrow(0, 0, vocabulary));
  return result;
}

}  // namespace trainc
