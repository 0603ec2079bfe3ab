// defines: cross_entropy_loss — the training loss of every model: cross-entropy of the logits'
// last dimension against class ids (classifiers: [batch, C] vs [batch]; language models:
// [batch, time, V] vs [batch, time]), computed in float32 even under autocast.
#pragma once

#include <torch/types.h>

namespace trainc {

torch::Tensor cross_entropy_loss(const torch::Tensor& logits, const torch::Tensor& targets, double label_smoothing);

}  // namespace trainc
