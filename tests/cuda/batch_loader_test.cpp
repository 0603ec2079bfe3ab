// The batch loader on a GPU: batches made contiguous in pinned host memory, so that their copies to
// the GPU are asynchronous (ATen copies a host tensor that is not contiguous through a pageable
// clone, and a token window's inputs and targets are strided views), and handed out on the GPU with
// the values the dataset holds, or (for whole-step CUDA graphs, which copy them into their own
// buffers) handed out pinned, as made.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <numeric>
#include <vector>

#include "trainc/data/batch_loader.h"
#include "trainc/data/dataset.h"

using namespace trainc;

namespace {

// 40 windows of 16 random tokens, in order, in batches of 8 for GPU 0.
struct Windows {
  TokenWindowDataset dataset{torch::randint(0, 97, {200}, torch::kLong), 16};
  std::vector<int64_t> order = [] {
    std::vector<int64_t> all(40);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }();
  BatchLoader loader(int64_t workers, bool copy_to_device) const {
    return BatchLoader(dataset, order, 8, false, 0, workers, torch::Device(torch::kCUDA, 0), copy_to_device);
  }
};

}  // namespace

TEST_CASE("a GPU's batches are made in pinned memory and reach the GPU as the dataset holds them", "[cuda]") {
  REQUIRE(torch::cuda::is_available());
  const Windows windows;
  for (const int64_t workers : {0, 2}) {
    INFO(workers << " workers");
    BatchLoader loader = windows.loader(workers, /*copy_to_device=*/true);
    const Batch host = loader.assemble(0);
    CHECK(host.inputs.is_pinned());
    CHECK(host.targets.is_pinned());
    CHECK(host.inputs.is_contiguous());
    CHECK(host.targets.is_contiguous());
    const std::optional<Batch> first = loader.next();
    REQUIRE(first);
    CHECK(first->inputs.is_cuda());
    CHECK(torch::equal(first->inputs.cpu(), host.inputs));
    CHECK(torch::equal(first->targets.cpu(), host.targets));
  }
}

TEST_CASE("a GPU's loader that does not copy to the device hands out its batches pinned", "[cuda]") {
  REQUIRE(torch::cuda::is_available());
  const Windows windows;
  for (const int64_t workers : {0, 2}) {
    INFO(workers << " workers");
    BatchLoader loader = windows.loader(workers, /*copy_to_device=*/false);
    const Batch expected = loader.assemble(0);
    const std::optional<Batch> first = loader.next();
    REQUIRE(first);
    CHECK(first->inputs.device().is_cpu());
    CHECK(first->inputs.is_pinned());
    CHECK(first->targets.is_pinned());
    CHECK(first->inputs.is_contiguous());
    CHECK(first->targets.is_contiguous());
    CHECK(torch::equal(first->inputs, expected.inputs));
    CHECK(torch::equal(first->targets, expected.targets));
  }
}
