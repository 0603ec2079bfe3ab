// defines: relative_error, normwise_relative_error — how the numerics tests compare a result with eager's
#pragma once

#include <ATen/ATen.h>

#include <algorithm>

namespace trainc::test {

// max |got - expected| relative to the largest magnitude of `expected`.
inline double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  return (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() / scale;
}

// ||got - expected|| / ||expected|| (2-norms): how far a tensor is from another as a whole.
inline double normwise_relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = std::max(expected.to(at::kDouble).norm().item<double>(), 1e-30);
  return (got.to(at::kDouble) - expected.to(at::kDouble)).norm().item<double>() / scale;
}

}  // namespace trainc::test
