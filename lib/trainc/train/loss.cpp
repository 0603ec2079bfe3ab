#include "trainc/train/loss.h"

#include <torch/nn/functional/loss.h>

namespace trainc {

torch::Tensor cross_entropy_loss(const torch::Tensor& logits, const torch::Tensor& targets, double label_smoothing) {
  namespace F = torch::nn::functional;
  const torch::Tensor flat_logits = logits.reshape({-1, logits.size(-1)}).to(torch::kFloat);
  return F::cross_entropy(flat_logits, targets.reshape({-1}), F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
}

}  // namespace trainc
