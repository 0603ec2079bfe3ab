// trainc's AdamW kernel (train/adamw_kernel) against ATen's fused AdamW on the GPU: 70 parameters
// (two launches of up to 56) of sizes that leave partial chunks and partial 4-element groups, and
// an empty one, over 5 steps, every seventh without weight decay and the others with (ATen's update
// run for each of the two sets), with and without clipping's factor (ours multiplies by 0.4, ATen's
// divides by 2.5). Parameters and
// moments agree within 1e-6 of the largest element (ATen rounds a few products through float64),
// and the gradients are left as they were, where ATen's writes them back divided.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
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
  std::vector<double> weight_decays;
  for (int i = 0; i < 70; ++i) {
    sizes.push_back(i == 7 ? 0 : (i * 7919) % 40000 + (i % 5));
    weight_decays.push_back(i % 7 == 0 ? 0.0 : 0.1);  // a period that does not divide a launch's 60
  }
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor learning_rate = torch::full({}, 3e-3, cuda);
  for (const bool with_factor : {true, false}) {
    INFO((with_factor ? "with" : "without") << " a gradient factor");
    const at::Tensor factor = with_factor ? torch::full({}, 0.4, cuda) : at::Tensor();
    const at::Tensor divisor = with_factor ? torch::full({}, 2.5, cuda) : at::Tensor();  // ATen's grad_scale
    AdamWState ours = fresh_state(sizes);
    AdamWState atens = copy_of(ours);
    const std::vector<at::Tensor> grads_before = copy_of(ours).grads;
    REQUIRE(adamw_kernel_takes(ours.params, ours.grads, ours.exp_avgs, ours.exp_avg_sqs, ours.steps, learning_rate, factor));
    for (int step = 0; step < 5; ++step) {
      at::_foreach_add_(ours.steps, 1.0);
      at::_foreach_add_(atens.steps, 1.0);
      adamw_kernel_update(ours.params, ours.grads, ours.exp_avgs, ours.exp_avg_sqs, ours.steps, learning_rate, 0.9, 0.95, weight_decays,
                          1e-8, factor);
      for (const double weight_decay : {0.0, 0.1}) {
        AdamWState group;  // the same tensors, those with this weight decay
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          if (weight_decays[i] != weight_decay) continue;
          group.params.push_back(atens.params[i]);
          group.grads.push_back(atens.grads[i]);
          group.exp_avgs.push_back(atens.exp_avgs[i]);
          group.exp_avg_sqs.push_back(atens.exp_avg_sqs[i]);
          group.steps.push_back(atens.steps[i]);
        }
        REQUIRE(fused_adamw_update(group.params, group.grads, group.exp_avgs, group.exp_avg_sqs, group.steps, learning_rate, 0.9, 0.95,
                                   weight_decay, 1e-8, divisor));
      }
      if (with_factor) atens.grads = copy_of(ours).grads;  // ATen wrote its gradients back divided: start each step alike
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

TEST_CASE("trainc's AdamW kernel writes bf16 shadows of the parameters it updates, rounded as ATen's cast", "[cuda]") {
  // 70 parameters (two launches of up to 56) with partial chunks and partial 4-element groups; every
  // third without a shadow. The parameters must come out exactly as without shadows, and each
  // shadow must be its updated parameter cast by ATen, bit for bit.
  std::vector<int64_t> sizes;
  for (int i = 0; i < 70; ++i) sizes.push_back(i == 7 ? 0 : (i * 7919) % 40000 + (i % 5));
  const std::vector<double> weight_decays(sizes.size(), 0.1);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor learning_rate = torch::full({}, 3e-3, cuda);
  AdamWState with = fresh_state(sizes);
  AdamWState without = copy_of(with);
  // The shadows in one NaN-filled buffer, 4 elements apart (their starts stay 8-byte aligned), so
  // a shadow the kernel misses, or a store past one's end, shows.
  int64_t total = 0;
  for (int64_t size : sizes) total += (size + 3) / 4 * 4 + 4;
  const at::Tensor buffer = torch::full({total}, std::nan(""), cuda.dtype(torch::kBFloat16));
  std::vector<at::Tensor> shadows(sizes.size());
  at::Tensor written = torch::zeros({total}, cuda.dtype(torch::kBool));
  int64_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i % 3 != 0) {
      shadows[i] = buffer.narrow(0, offset, sizes[i]);
      written.narrow(0, offset, sizes[i]).fill_(true);
    }
    offset += (sizes[i] + 3) / 4 * 4 + 4;
  }
  for (int step = 0; step < 3; ++step) {
    at::_foreach_add_(with.steps, 1.0);
    at::_foreach_add_(without.steps, 1.0);
    adamw_kernel_update(with.params, with.grads, with.exp_avgs, with.exp_avg_sqs, with.steps, learning_rate, 0.9, 0.95, weight_decays,
                        1e-8, at::Tensor(), shadows);
    adamw_kernel_update(without.params, without.grads, without.exp_avgs, without.exp_avg_sqs, without.steps, learning_rate, 0.9, 0.95,
                        weight_decays, 1e-8, at::Tensor());
  }
  CHECK(torch::equal(flat(with.params), flat(without.params)));
  CHECK(torch::equal(flat(with.exp_avgs), flat(without.exp_avgs)));
  CHECK(torch::equal(flat(with.exp_avg_sqs), flat(without.exp_avg_sqs)));
  CHECK(buffer.masked_select(written.logical_not()).isnan().all().item<bool>());  // the gaps and the shadowless untouched
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (!shadows[i].defined()) continue;
    INFO("parameter " << i << " of " << sizes[i] << " elements");
    CHECK(torch::equal(shadows[i], with.params[i].to(torch::kBFloat16)));
  }
  // A shadow of another shape or dtype is refused.
  std::vector<at::Tensor> wrong(sizes.size());
  wrong[1] = torch::zeros({sizes[1] + 1}, cuda.dtype(torch::kBFloat16));
  CHECK_THROWS_WITH(adamw_kernel_update(with.params, with.grads, with.exp_avgs, with.exp_avg_sqs, with.steps, learning_rate, 0.9, 0.95,
                                        weight_decays, 1e-8, at::Tensor(), wrong),
                    Catch::Contains("shadow 1"));
}
