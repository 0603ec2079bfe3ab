// The training loop's loss bookkeeping on the GPU (train/loss_tracking: one kernel) against the same
// on the CPU (ATen's ops): the float64 sums and the first step whose loss was NaN or infinite.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "trainc/train/loss_tracking.h"

using namespace trainc;

TEST_CASE("the step's loss kernel keeps the sums and the first non-finite step as ATen's ops do", "[cuda][train]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> runs = {{1.5f, 2.25f, 0.1f, 3.0f}, {1.5f, 2.25f, inf, 3.0f, nan}, {nan, 1.0f}, {-inf}};
  for (const std::vector<float>& losses : runs) {
    INFO("losses " << c10::str(losses));
    std::vector<at::Tensor> since_log, total, first;
    for (const c10::Device device : {c10::Device(torch::kCPU), c10::Device(torch::kCUDA)}) {
      const auto on = torch::TensorOptions().device(device);
      at::Tensor s = torch::zeros({}, on.dtype(torch::kDouble)), t = torch::zeros({}, on.dtype(torch::kDouble));
      at::Tensor f = torch::full({}, -1, on.dtype(torch::kLong));
      for (std::size_t i = 0; i < losses.size(); ++i) {
        track_step_loss(torch::full({}, losses[i], on.dtype(torch::kFloat)), static_cast<int64_t>(i) + 1, s, t, f);
        if (i == 1) s.zero_();  // a log after the second step
      }
      since_log.push_back(s.cpu());
      total.push_back(t.cpu());
      first.push_back(f.cpu());
    }
    int64_t expected_first = -1;
    for (std::size_t i = 0; i < losses.size() && expected_first < 0; ++i) {
      if (!std::isfinite(losses[i])) expected_first = static_cast<int64_t>(i) + 1;
    }
    CHECK(first[0].item<int64_t>() == expected_first);
    CHECK(first[1].item<int64_t>() == expected_first);
    CHECK(torch::allclose(since_log[1], since_log[0], 0.0, 0.0, /*equal_nan=*/true));
    CHECK(torch::allclose(total[1], total[0], 0.0, 0.0, /*equal_nan=*/true));
  }
}
