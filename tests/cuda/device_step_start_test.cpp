// A training step's start on the GPU (train/device_step_start: one kernel, another per 128 step
// counts past the first 128) against the same on the CPU (ATen's ops), run directly and replayed
// from a CUDA graph: the learning rate read from the schedule's table, the count of steps done and
// the optimizer's step counts advanced; and the loss's tracking with the step read from the GPU.
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

std::vector<double> random_rates(int steps, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> rate(1e-5, 1e-2);
  std::vector<double> rates;
  for (int step = 0; step < steps; ++step) rates.push_back(rate(random));
  return rates;
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
  const std::vector<double> rates = random_rates(6, seed);
  DeviceStepStart on_cpu(rates, 2, torch::kCPU), on_gpu(rates, 2, kGpu);
  const torch::Tensor cpu_rate = torch::zeros({}), gpu_rate = torch::zeros({}, kGpu);
  // 130 counts: a second launch for the last two.
  std::vector<torch::Tensor> cpu_counts = counts_on(torch::kCPU, 130), gpu_counts = counts_on(kGpu, 130);
  for (int step = 0; step < 6; ++step) {  // the last two past the table's end
    const std::size_t n = step % 2 == 0 ? 130 : 3;
    on_cpu.start_step(cpu_rate, std::vector<torch::Tensor>(cpu_counts.begin(), cpu_counts.begin() + static_cast<long>(n)));
    on_gpu.start_step(gpu_rate, std::vector<torch::Tensor>(gpu_counts.begin(), gpu_counts.begin() + static_cast<long>(n)));
    INFO("step " << step);
    CHECK(gpu_rate.item<float>() == cpu_rate.item<float>());
    CHECK(cpu_rate.item<float>() == static_cast<float>(rates[std::min<std::size_t>(static_cast<std::size_t>(step) + 2, 5)]));
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
  const std::vector<double> rates = random_rates(5, seed);
  DeviceStepStart start(rates, 0, kGpu);
  const auto on = torch::TensorOptions().device(kGpu);
  const torch::Tensor rate = torch::zeros({}, on), loss = torch::zeros({}, on);
  std::vector<torch::Tensor> counts = counts_on(kGpu, 3);
  torch::Tensor since_log = torch::zeros({}, on.dtype(torch::kDouble)), total = torch::zeros({}, on.dtype(torch::kDouble));
  torch::Tensor first = torch::full({}, -1, on.dtype(torch::kLong));
  torch::Tensor rates_seen = torch::zeros({5}, on);
  // The step's "loss": its learning rate, or NaN at the fourth step.
  const auto step = [&] {
    start.start_step(rate, counts);
    loss.copy_(torch::where(start.steps_done() == 4, torch::full({}, std::numeric_limits<float>::quiet_NaN(), on), rate));
    rates_seen.index_copy_(0, (start.steps_done() - 1).reshape({1}), rate.reshape({1}));
  };
  // The first step runs directly, as a signature's warm-up does: it also loads the kernels, which a
  // capture cannot.
  step();
  track_step_loss(loss, start.steps_done(), since_log, total, first);
  CudaGraph graph(kGpu);
  graph.capture([&] {
    step();
    graph.beside([&] { track_step_loss(loss, start.steps_done(), since_log, total, first); });
  });
  for (int replay = 0; replay < 4; ++replay) graph.replay();
  torch::cuda::synchronize();
  CHECK(start.steps_done().item<int64_t>() == 5);
  for (int step = 0; step < 5; ++step) {
    INFO("step " << step);
    CHECK(rates_seen[step].item<float>() == static_cast<float>(rates[static_cast<std::size_t>(step)]));
  }
  CHECK(counts[0].item<float>() == 5.0f);
  CHECK(counts[2].item<float>() == 7.0f);
  CHECK(first.item<int64_t>() == 4);
  CHECK(std::isnan(since_log.item<double>()));
}
