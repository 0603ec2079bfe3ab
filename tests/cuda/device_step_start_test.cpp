// A training step's start on the GPU (train/device_step_start: one kernel, another per 128 step
// counts past the first 128) against the same on the CPU (ATen's ops), run directly and replayed
// from a CUDA graph: the learning rate read from the schedule's table (a ring the host refills
// between replays), the count of steps done and the optimizer's step counts advanced; and the
// loss's tracking with the step read from the GPU.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "trainc/compat/cuda_graph.h"
#include "trainc/train/device_step_start.h"
#include "trainc/train/loss_tracking.h"

using namespace trainc;

namespace {

const torch::Device kGpu(torch::kCUDA, 0);

// A rate for every step, drawn from the seed and the step.
DeviceStepStart::LearningRateAt random_rates(uint64_t seed) {
  return [seed](int64_t step) {
    std::mt19937_64 random(seed + static_cast<uint64_t>(step));
    return std::uniform_real_distribution<double>(1e-5, 1e-2)(random);
  };
}

std::vector<torch::Tensor> counts_on(torch::Device device, int n) {
  std::vector<torch::Tensor> counts;
  for (int i = 0; i < n; ++i) counts.push_back(torch::full({}, static_cast<float>(i), torch::TensorOptions().device(device)));
  return counts;
}

}  // namespace

TEST_CASE("the step's start kernel writes the rate and advances the counts as ATen's ops do", "[cuda][train]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const DeviceStepStart::LearningRateAt rates = random_rates(seed);
  // A window of 4 from step 2: the ring refilled twice in the 6 steps.
  DeviceStepStart on_cpu(rates, 2, torch::kCPU, 4), on_gpu(rates, 2, kGpu, 4);
  const torch::Tensor cpu_rate = torch::zeros({}), gpu_rate = torch::zeros({}, kGpu);
  // 130 counts: a second launch for the last two.
  std::vector<torch::Tensor> cpu_counts = counts_on(torch::kCPU, 130), gpu_counts = counts_on(kGpu, 130);
  for (int step = 0; step < 6; ++step) {
    const std::size_t n = step % 2 == 0 ? 130 : 3;
    on_cpu.before_step(step + 2);
    on_gpu.before_step(step + 2);
    on_cpu.start_step(cpu_rate, std::vector<torch::Tensor>(cpu_counts.begin(), cpu_counts.begin() + static_cast<long>(n)));
    on_gpu.start_step(gpu_rate, std::vector<torch::Tensor>(gpu_counts.begin(), gpu_counts.begin() + static_cast<long>(n)));
    INFO("step " << step);
    CHECK(gpu_rate.item<float>() == cpu_rate.item<float>());
    CHECK(cpu_rate.item<float>() == static_cast<float>(rates(step + 2)));
    CHECK(on_gpu.steps_done().item<int64_t>() == on_cpu.steps_done().item<int64_t>());
  }
  CHECK(on_gpu.steps_done().item<int64_t>() == 8);
  CHECK(torch::equal(torch::stack(gpu_counts).cpu(), torch::stack(cpu_counts)));
  CHECK(cpu_counts[129].item<float>() == 129.0f + 3.0f);
  CHECK(cpu_counts[2].item<float>() == 2.0f + 6.0f);
}

TEST_CASE("a captured step's start and loss tracking give every replay its own step", "[cuda][train]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const DeviceStepStart::LearningRateAt rates = random_rates(seed);
  constexpr int kSteps = 21;
  // A window of 4: between two replays, every second one, the host refills half the ring; with no
  // wait for the replays, only the stream's order keeps a replay from reading a refill meant for
  // its successors, or missing its own.
  DeviceStepStart start(rates, 0, kGpu, 4);
  const auto on = torch::TensorOptions().device(kGpu);
  const torch::Tensor rate = torch::zeros({}, on), loss = torch::zeros({}, on);
  std::vector<torch::Tensor> counts = counts_on(kGpu, 3);
  torch::Tensor since_log = torch::zeros({}, on.dtype(torch::kDouble)), total = torch::zeros({}, on.dtype(torch::kDouble));
  torch::Tensor first = torch::full({}, -1, on.dtype(torch::kLong));
  torch::Tensor rates_seen = torch::zeros({kSteps}, on);
  // The step's "loss": its learning rate, or NaN at the fourth step.
  const auto step = [&] {
    start.start_step(rate, counts);
    loss.copy_(torch::where(start.steps_done() == 4, torch::full({}, std::numeric_limits<float>::quiet_NaN(), on), rate));
    rates_seen.index_copy_(0, (start.steps_done() - 1).reshape({1}), rate.reshape({1}));
  };
  // The first step runs directly, as a signature's warm-up does: it also loads the kernels, which a
  // capture cannot.
  start.before_step(0);
  step();
  track_step_loss(loss, start.steps_done(), since_log, total, first);
  CudaGraph graph(kGpu);
  graph.capture([&] {
    step();
    graph.beside([&] { track_step_loss(loss, start.steps_done(), since_log, total, first); });
  });
  for (int replay = 1; replay < kSteps; ++replay) {
    start.before_step(replay);
    graph.replay();
  }
  torch::cuda::synchronize();
  CHECK(start.steps_done().item<int64_t>() == kSteps);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    CHECK(rates_seen[step].item<float>() == static_cast<float>(rates(step)));
  }
  CHECK(counts[0].item<float>() == static_cast<float>(kSteps));
  CHECK(counts[2].item<float>() == 2.0f + kSteps);
  CHECK(first.item<int64_t>() == 4);
  CHECK(std::isnan(since_log.item<double>()));
}
