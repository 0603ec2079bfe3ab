// trainc's AdamW kernel (train/adamw_kernel) against ATen's fused AdamW on the GPU: 40 parameters
// (two launches of up to 32) of sizes that leave partial chunks and partial 4-element groups, and
// two empty ones, over 5 steps with weight decay, with and without a gradient divisor. Parameters and
// moments agree within 1e-6 of the largest element (ATen rounds a few products through float64),
// and the gradients are left as they were, where ATen's writes them back divided.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <vector>

#include "support/numerics.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/train/adamw_kernel.h"

using namespace trainc;
using trainc::test::relative_error;

namespace {

struct AdamWState {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
};

AdamWState fresh_state(const std::vector<int64_t>& sizes) {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  AdamWState s;
  for (int64_t size : sizes) {
    s.params.push_back(torch::randn({size}, cuda));
    s.grads.push_back(torch::randn({size}, cuda));
    s.exp_avgs.push_back(torch::zeros({size}, cuda));
    s.exp_avg_sqs.push_back(torch::zeros({size}, cuda));
    s.steps.push_back(torch::zeros({}, cuda));
  }
  return s;
}

AdamWState copy_of(const AdamWState& s) {
  AdamWState c;
  for (const at::Tensor& t : s.params) c.params.push_back(t.clone());
  for (const at::Tensor& t : s.grads) c.grads.push_back(t.clone());
  for (const at::Tensor& t : s.exp_avgs) c.exp_avgs.push_back(t.clone());
  for (const at::Tensor& t : s.exp_avg_sqs) c.exp_avg_sqs.push_back(t.clone());
  for (const at::Tensor& t : s.steps) c.steps.push_back(t.clone());
  return c;
}

at::Tensor flat(const std::vector<at::Tensor>& tensors) { return at::cat(tensors); }

}  // namespace

TEST_CASE("trainc's AdamW kernel updates as ATen's fused AdamW and leaves the gradients", "[cuda]") {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 40; ++i) sizes.push_back(i == 7 ? 0 : (i * 7919) % 40000 + (i % 5));
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor learning_rate = torch::full({}, 3e-3, cuda);
  for (const bool with_divisor : {true, false}) {
    INFO((with_divisor ? "with" : "without") << " a gradient divisor");
    const at::Tensor divisor = with_divisor ? torch::full({}, 2.5, cuda) : at::Tensor();
    AdamWState ours = fresh_state(sizes);
    AdamWState atens = copy_of(ours);
    const std::vector<at::Tensor> grads_before = copy_of(ours).grads;
    REQUIRE(adamw_kernel_takes(ours.params, ours.grads, ours.exp_avgs, ours.exp_avg_sqs, ours.steps, learning_rate, divisor));
    for (int step = 0; step < 5; ++step) {
      at::_foreach_add_(ours.steps, 1.0);
      at::_foreach_add_(atens.steps, 1.0);
      adamw_kernel_update(ours.params, ours.grads, ours.exp_avgs, ours.exp_avg_sqs, ours.steps, learning_rate, 0.9, 0.95, 0.1, 1e-8, divisor);
      REQUIRE(fused_adamw_update(atens.params, atens.grads, atens.exp_avgs, atens.exp_avg_sqs, atens.steps, learning_rate, 0.9, 0.95, 0.1,
                                 1e-8, divisor));
      if (with_divisor) atens.grads = copy_of(ours).grads;  // ATen wrote its gradients back divided: start each step alike
    }
    CHECK(relative_error(flat(ours.params), flat(atens.params)) <= 1e-6);
    CHECK(relative_error(flat(ours.exp_avgs), flat(atens.exp_avgs)) <= 1e-6);
    CHECK(relative_error(flat(ours.exp_avg_sqs), flat(atens.exp_avg_sqs)) <= 1e-6);
    CHECK(torch::equal(flat(ours.grads), flat(grads_before)));
  }
  // A parameter on another dtype is not taken.
  AdamWState half = fresh_state({64});
  half.params[0] = half.params[0].to(torch::kHalf);
  CHECK_FALSE(adamw_kernel_takes(half.params, half.grads, half.exp_avgs, half.exp_avg_sqs, half.steps, learning_rate, at::Tensor()));
}
