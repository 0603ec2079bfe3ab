// The capturable optimizers (learning rate and step counts on the device) against LibTorch's
// eager AdamW and SGD: the same trajectory of 100 steps with fresh random gradients and a changing
// learning rate, and checkpoints that move between the two in both directions.
#include <catch2/catch.hpp>

#include <random>
#include <sstream>

#include "support/numerics.h"
#include "support/optimizer_runs.h"
#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/grad_clip.h"
#include "trainc/train/optimizer.h"

using namespace trainc;
using namespace trainc::test;

namespace {

OptimizerRun eager_adamw(uint64_t seed) {
  OptimizerRun run{initial_parameters(torch::kCPU, seed), nullptr};
  run.optimizer = std::make_unique<torch::optim::AdamW>(adamw_groups(run.params), torch::optim::AdamWOptions(1e-2));
  return run;
}

OptimizerRun capturable_adamw(uint64_t seed) {
  OptimizerRun run{initial_parameters(torch::kCPU, seed), nullptr};
  run.optimizer = std::make_unique<CapturableAdamW>(adamw_groups(run.params), torch::optim::AdamWOptions(1e-2));
  return run;
}

// Saves `from`'s state (as a checkpoint does) and loads it into `into`.
void move_state(torch::optim::Optimizer& from, torch::optim::Optimizer& into) {
  if (auto* on_device = dynamic_cast<DeviceStateOptimizer*>(&from)) on_device->store_device_state();
  torch::serialize::OutputArchive out;
  from.save(out);
  std::stringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  into.load(in);
}

void check_same_parameters(const OptimizerRun& got, const OptimizerRun& expected, double tolerance) {
  for (std::size_t i = 0; i < got.params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(relative_error(got.params[i].detach(), expected.params[i].detach()) < tolerance);
  }
}

}  // namespace

TEST_CASE("capturable AdamW follows torch::optim::AdamW for 100 steps", "[optimizer]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  OptimizerRun eager = eager_adamw(seed);
  OptimizerRun capturable = capturable_adamw(seed);
  take_steps(eager, 0, 100, seed + 1);
  take_steps(capturable, 0, 100, seed + 1);
  // float32 bias corrections and step sizes instead of double ones: a few ulps per step.
  check_same_parameters(capturable, eager, 1e-5);
}

TEST_CASE("capturable AdamW checkpoints load into the eager AdamW and back", "[optimizer]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  OptimizerRun reference = eager_adamw(seed);
  take_steps(reference, 0, 40, seed + 1);

  OptimizerRun capturable = capturable_adamw(seed);
  take_steps(capturable, 0, 20, seed + 1);
  OptimizerRun eager = eager_adamw(seed);  // resumes the capturable run's checkpoint
  for (std::size_t i = 0; i < eager.params.size(); ++i) eager.params[i].detach().copy_(capturable.params[i].detach());
  move_state(*capturable.optimizer, *eager.optimizer);
  take_steps(eager, 20, 30, seed + 1);

  OptimizerRun resumed = capturable_adamw(seed);  // and back again
  for (std::size_t i = 0; i < resumed.params.size(); ++i) resumed.params[i].detach().copy_(eager.params[i].detach());
  move_state(*eager.optimizer, *resumed.optimizer);
  take_steps(resumed, 30, 40, seed + 1);
  // A step count lost on the way would change the bias corrections by far more than this.
  check_same_parameters(resumed, reference, 1e-5);
}

TEST_CASE("capturable SGD follows torch::optim::SGD for 100 steps", "[optimizer]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  OptimizerRun eager{initial_parameters(torch::kCPU, seed), nullptr};
  eager.optimizer = std::make_unique<torch::optim::SGD>(sgd_groups(eager.params), torch::optim::SGDOptions(1e-2));
  OptimizerRun capturable{initial_parameters(torch::kCPU, seed), nullptr};
  capturable.optimizer = std::make_unique<CapturableSGD>(sgd_groups(capturable.params), torch::optim::SGDOptions(1e-2));
  take_steps(eager, 0, 100, seed + 1);
  take_steps(capturable, 0, 100, seed + 1);
  check_same_parameters(capturable, eager, 1e-5);
}

TEST_CASE("clipping's factor applied inside the capturable AdamW's step equals clipping the gradients first", "[optimizer]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  OptimizerRun clipped_first = capturable_adamw(seed);
  OptimizerRun inside = capturable_adamw(seed);
  for (int step = 0; step < 30; ++step) {
    for (OptimizerRun* run : {&clipped_first, &inside}) set_clipping_gradients(*run, step, seed + 1);
    const torch::Tensor norm = clip_grad_norm(clipped_first.params, 0.5);
    clipped_first.optimizer->step();
    const torch::Tensor measured = clipped_step(*inside.optimizer, inside.params, 0.5);
    CHECK(measured.item<double>() == Approx(norm.item<double>()).epsilon(1e-6));
  }
  check_same_parameters(inside, clipped_first, 1e-6);
}
