// A training step's start on the device (train/device_step_start), here with ATen's ops on the
// CPU (its kernel is compared with them in tests/cuda): the learning rate read from the schedule's
// table (a ring the host keeps ahead of the steps) at the count of steps done, the count and the
// optimizer's step counts advanced; the capturable optimizers taking those steps as they take
// steps whose learning rate is set before each; and the loss's tracking with the step read from
// the device.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <limits>
#include <random>

#include "support/optimizer_runs.h"
#include "trainc/common/error.h"
#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/device_step_start.h"
#include "trainc/train/loss_tracking.h"

using namespace trainc;
using namespace trainc::test;

TEST_CASE("a step's start takes the learning rate at the count of steps done and advances the counts", "[optimizer]") {
  const auto rate_at = [](int64_t step) { return 0.1 * static_cast<double>(step + 1); };
  DeviceStepStart start(rate_at, /*steps_done=*/1, torch::kCPU);
  const torch::Tensor rate = torch::zeros({}, torch::kFloat);
  std::vector<torch::Tensor> counts = {torch::full({}, 4.0f), torch::full({}, 7.0f)};
  start.before_step(1);
  start.start_step(rate, counts);
  CHECK(rate.item<float>() == 0.2f);
  CHECK(start.steps_done().item<int64_t>() == 2);
  CHECK(counts[0].item<float>() == 5.0f);
  CHECK(counts[1].item<float>() == 8.0f);
  start.before_step(2);
  start.start_step(rate, {});
  CHECK(rate.item<float>() == 0.3f);
  CHECK(counts[0].item<float>() == 5.0f);
  CHECK_THROWS_WITH(start.start_step(torch::zeros({}, torch::kDouble), {}), Catch::Contains("float32 scalar"));
  CHECK_THROWS_WITH(start.start_step(rate, {torch::zeros({2})}), Catch::Contains("step count"));
}

TEST_CASE("the learning rates' table is a ring the host keeps ahead of the steps", "[optimizer]") {
  // Each step's own rate, exact in float32 (up to 2^24 steps).
  const auto rate_at = [](int64_t step) { return static_cast<double>(step + 1); };
  const torch::Tensor rate = torch::zeros({}, torch::kFloat);
  SECTION("step by step, from a resumed run's count, through many refills of a window of 4") {
    DeviceStepStart start(rate_at, /*steps_done=*/7, torch::kCPU, /*window=*/4);
    for (int64_t step = 7; step < 40; ++step) {
      INFO("step " << step);
      start.before_step(step);
      start.start_step(rate, {});
      CHECK(rate.item<float>() == static_cast<float>(step + 1));
    }
    CHECK(start.steps_done().item<int64_t>() == 40);
  }
  SECTION("several steps queued between two calls, within the window's next half") {
    DeviceStepStart start(rate_at, 0, torch::kCPU, /*window=*/8);
    for (int64_t step = 0; step < 40; ++step) {
      INFO("step " << step);
      if (step % 4 == 0) start.before_step(step);  // holds the step and at least the next 3
      start.start_step(rate, {});
      CHECK(rate.item<float>() == static_cast<float>(step + 1));
    }
  }
  SECTION("a jump forward past the whole window") {
    DeviceStepStart start(rate_at, 0, torch::kCPU, /*window=*/4);
    start.before_step(0);
    start.start_step(rate, {});
    start.steps_done().fill_(1001);
    start.before_step(1001);
    start.start_step(rate, {});
    CHECK(rate.item<float>() == 1002.0f);
    CHECK_THROWS_WITH(start.before_step(1000), Catch::Contains("steps go forward (asked for step 1000 after step 1001)"));
  }
  SECTION("a billion steps cost no more than a window") {
    const auto small_rate_at = [](int64_t step) { return static_cast<double>(step % 1000 + 1); };
    DeviceStepStart start(small_rate_at, 999999998, torch::kCPU);  // the window holds steps from 999,999,488
    for (int64_t step = 999999998; step < 1000000001; ++step) {
      INFO("step " << step);
      start.before_step(step);
      start.start_step(rate, {});
      CHECK(rate.item<float>() == static_cast<float>(step % 1000 + 1));
    }
  }
  CHECK_THROWS_WITH(DeviceStepStart(rate_at, 0, torch::kCPU, 6), Catch::Contains("the window must be a power of two, not 6"));
}

TEST_CASE("capturable optimizers take steps started on the device as steps whose rate is set before each", "[optimizer]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (const bool adamw : {true, false}) {
    INFO((adamw ? "AdamW" : "SGD"));
    const auto make = [&](OptimizerRun& run) {
      if (adamw) {
        run.optimizer = std::make_unique<CapturableAdamW>(adamw_groups(run.params), torch::optim::AdamWOptions(1e-2));
      } else {
        run.optimizer = std::make_unique<CapturableSGD>(sgd_groups(run.params), torch::optim::SGDOptions(1e-2));
      }
    };
    OptimizerRun set_before{initial_parameters(torch::kCPU, seed), nullptr};
    OptimizerRun started{initial_parameters(torch::kCPU, seed), nullptr};
    make(set_before);
    make(started);
    take_steps(set_before, 0, 30, seed + 1);
    DeviceStepStart start(trajectory_learning_rate, 0, torch::kCPU, /*window=*/8);  // refilled seven times
    take_steps_started_on_device(started, start, 0, 30, seed + 1);
    CHECK(start.steps_done().item<int64_t>() == 30);
    // The same float32 arithmetic on the same values: the same bits. A count advanced twice, or not
    // at all, on the parameter that skips odd steps would change its bias corrections.
    for (std::size_t i = 0; i < started.params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(torch::equal(started.params[i].detach(), set_before.params[i].detach()));
    }
  }
}

TEST_CASE("AdamW refuses a step whose parameters are not those whose counts were advanced", "[optimizer]") {
  OptimizerRun run{initial_parameters(torch::kCPU, 5), nullptr};
  run.optimizer = std::make_unique<CapturableAdamW>(adamw_groups(run.params), torch::optim::AdamWOptions(1e-2));
  auto& on_device = dynamic_cast<DeviceStateOptimizer&>(*run.optimizer);
  take_steps(run, 0, 1, 7);
  // Step 1 leaves parameter 3 without a gradient; its count advanced all the same.
  draw_gradients(run, 1, 8);
  on_device.step_counts_advanced_before_next_step(run.params);
  CHECK_THROWS_WITH(run.optimizer->step(), Catch::Contains("not those of the parameters it updates (5 advanced, 4 updated)"));
  // A count is asked for only after its parameter's first step.
  OptimizerRun fresh{initial_parameters(torch::kCPU, 5), nullptr};
  fresh.optimizer = std::make_unique<CapturableAdamW>(adamw_groups(fresh.params), torch::optim::AdamWOptions(1e-2));
  CHECK_THROWS_WITH(dynamic_cast<DeviceStateOptimizer&>(*fresh.optimizer).step_counts_advanced_before_next_step(fresh.params),
                    Catch::Contains("before its parameter's first step"));
}

TEST_CASE("the loss's tracking reads the step on the device as the step it is given", "[train]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto on = torch::TensorOptions();
  torch::Tensor since_log[2], total[2], first[2];
  for (int way = 0; way < 2; ++way) {
    since_log[way] = torch::zeros({}, on.dtype(torch::kDouble));
    total[way] = torch::zeros({}, on.dtype(torch::kDouble));
    first[way] = torch::full({}, -1, on.dtype(torch::kLong));
  }
  const torch::Tensor step = torch::zeros({}, on.dtype(torch::kLong));
  const float losses[] = {1.5f, 2.0f, nan, 3.0f, nan};
  const torch::Tensor first_before = first[1];
  for (int i = 0; i < 5; ++i) {
    step.add_(1);
    const torch::Tensor loss = torch::full({}, losses[i]);
    track_step_loss(loss, i + 1, since_log[0], total[0], first[0]);
    track_step_loss(loss, step, since_log[1], total[1], first[1]);
  }
  CHECK(first[1].item<int64_t>() == 3);
  CHECK(first[0].item<int64_t>() == 3);
  CHECK(first[1].data_ptr() == first_before.data_ptr());  // in place, as a captured graph needs
  CHECK(std::isnan(total[1].item<double>()));
  CHECK(torch::allclose(since_log[1], since_log[0], 0.0, 0.0, /*equal_nan=*/true));
}
