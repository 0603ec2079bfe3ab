// Gradient clipping's norm and coefficient by trainc's kernels (train/grad_norm_kernel) against
// ATen's on the GPU: 140 gradients (two launches of up to 128) of sizes that leave partial chunks and
// partial 4-element groups, and an empty one. The norm within 1e-5 of ATen's (float32 sums in
// another order), the coefficient min(1, max_norm / (norm + 1e-6)) likewise, for a max_norm below
// and above the norm; a NaN gradient gives NaN for both, an infinite one an infinite norm and 0.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "trainc/train/grad_norm_kernel.h"

using namespace trainc;

namespace {

at::Tensor aten_norm(const std::vector<at::Tensor>& grads) { return at::stack(at::_foreach_norm(grads)).norm(); }

}  // namespace

TEST_CASE("the gradient norm kernels give ATen's norm and clipping coefficient", "[cuda][train]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  std::vector<at::Tensor> grads;
  for (int i = 0; i < 140; ++i) grads.push_back(torch::randn({1 + 7919 * i % 40000}, cuda) * (i % 3 == 0 ? 0.01 : 1.0));
  grads.push_back(torch::empty({0}, cuda));
  grads.push_back(torch::randn({16384 * 3}, cuda));  // whole chunks
  REQUIRE(grad_norm_kernel_takes(grads));
  const double expected = aten_norm(grads).item<double>();
  for (const double max_norm : {1.0, 1e6}) {
    INFO("max_norm " << max_norm);
    const NormAndCoefficient got = grad_norm_kernel(grads, max_norm);
    CHECK(got.norm.scalar_type() == torch::kFloat);
    CHECK(got.norm.dim() == 0);
    CHECK(std::abs(got.norm.item<double>() - expected) <= 1e-5 * expected);
    const double coefficient = std::min(1.0, max_norm / (expected + 1e-6));
    CHECK(std::abs(got.coefficient.item<double>() - coefficient) <= 1e-5 * coefficient);
  }

  std::vector<at::Tensor> with_nan = grads, with_inf = grads;
  with_nan[3] = with_nan[3].clone().index_fill_(0, torch::tensor({0}, cuda.dtype(torch::kLong)), std::numeric_limits<float>::quiet_NaN());
  with_inf[5] = with_inf[5].clone().index_fill_(0, torch::tensor({2}, cuda.dtype(torch::kLong)), std::numeric_limits<float>::infinity());
  const NormAndCoefficient nan = grad_norm_kernel(with_nan, 1.0);
  CHECK(std::isnan(nan.norm.item<float>()));
  CHECK(std::isnan(nan.coefficient.item<float>()));
  CHECK(std::isnan(aten_norm(with_nan).item<float>()));
  const NormAndCoefficient inf = grad_norm_kernel(with_inf, 1.0);
  CHECK(std::isinf(inf.norm.item<float>()));
  CHECK(inf.coefficient.item<float>() == 0.0f);
  CHECK(std::isinf(aten_norm(with_inf).item<float>()));

  // Not taken: a float64 gradient, a non-contiguous one.
  CHECK_FALSE(grad_norm_kernel_takes({torch::randn({8}, cuda.dtype(torch::kDouble))}));
  CHECK_FALSE(grad_norm_kernel_takes({torch::randn({8, 8}, cuda).t()}));
}
