// The batch loader on a GPU: batches made in pinned host memory, so that their copies to the GPU
// are asynchronous, and handed out on the GPU with the values the dataset holds, or (for whole-step
// CUDA graphs, which copy them into their own buffers) handed out pinned, as made.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <numeric>
#include <vector>

#include "trainc/data/batch_loader.h"
#include "trainc/data/dataset.h"

using namespace trainc;

TEST_CASE("a GPU's batches are made in pinned memory and reach the GPU as the dataset holds them", "[cuda]") {
  REQUIRE(torch::cuda::is_available());
  const TokenWindowDataset dataset(torch::randint(0, 97, {200}, torch::kLong), 16);
  std::vector<int64_t> order(40);
  std::iota(order.begin(), order.end(), 0);
  for (const int64_t workers : {0, 2}) {
    INFO(workers << " workers");
    BatchLoader loader(dataset, order, 8, false, 0, workers, torch::Device(torch::kCUDA, 0));
    const Batch host = loader.assemble(0);
    CHECK(host.inputs.is_pinned());
    CHECK(host.targets.is_pinned());
    const std::optional<Batch> first = loader.next();
    REQUIRE(first);
    CHECK(first->inputs.is_cuda());
    CHECK(torch::equal(first->inputs.cpu(), host.inputs));
    CHECK(torch::equal(first->targets.cpu(), host.targets));
  }
}

TEST_CASE("a GPU's loader that does not copy to the device hands out its batches pinned", "[cuda]") {
  REQUIRE(torch::cuda::is_available());
  const TokenWindowDataset dataset(torch::randint(0, 97, {200}, torch::kLong), 16);
  std::vector<int64_t> order(40);
  std::iota(order.begin(), order.end(), 0);
  for (const int64_t workers : {0, 2}) {
    INFO(workers << " workers");
    BatchLoader loader(dataset, order, 8, false, 0, workers, torch::Device(torch::kCUDA, 0), /*copy_to_device=*/false);
    const Batch expected = loader.assemble(0);
    const std::optional<Batch> first = loader.next();
    REQUIRE(first);
    CHECK(first->inputs.device().is_cpu());
    CHECK(first->inputs.is_pinned());
    CHECK(first->targets.is_pinned());
    CHECK(torch::equal(first->inputs, expected.inputs));
    CHECK(torch::equal(first->targets, expected.targets));
  }
}
