// defines: relative_error — how the numerics tests compare a result with eager's
#pragma once

#include <ATen/ATen.h>

#include <algorithm>

namespace trainc::test {

// max |got - expected| relative to the largest magnitude of `expected`.
inline double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  return (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() / scale;
}

}  // namespace trainc::test
