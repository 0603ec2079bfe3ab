// Stream priorities in a captured graph (switch stream_priorities): a CudaGraph made with
// high_priority captures on one of the device's high-priority streams, and the kernels it records
// there keep that priority, above the side stream's; without it the two are equal. The recorded
// graph's kernel nodes are read before instantiation, and the graph then replays correctly.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "trainc/compat/cuda_graph.h"
#include "trainc/compat/side_stream.h"

namespace {

// The priority of each kernel node of `graph` (a cudaGraph_t), in the graph's node order.
std::vector<int> kernel_priorities(void* graph) {
  const auto raw = static_cast<cudaGraph_t>(graph);
  size_t count = 0;
  REQUIRE(cudaGraphGetNodes(raw, nullptr, &count) == cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  REQUIRE(cudaGraphGetNodes(raw, nodes.data(), &count) == cudaSuccess);
  std::vector<int> priorities;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    REQUIRE(cudaGraphNodeGetType(node, &type) == cudaSuccess);
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaLaunchAttributeValue value{};
    REQUIRE(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributePriority, &value) == cudaSuccess);
    priorities.push_back(value.priority);
  }
  return priorities;
}

// Captures one kernel on the graph's stream, then one on the side stream, and returns their
// priorities (CUDA's numbers: lower runs first). The replay must add 1 and then 2 to `x`.
std::vector<int> captured_priorities(bool high_priority) {
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  at::Tensor x = torch::zeros({1024}, options);
  trainc::CudaGraph graph(torch::kCUDA, high_priority);
  trainc::SideStream side(torch::kCUDA);
  std::vector<int> priorities;
  graph.capture(
      [&] {
        x.add_(1.0);
        side.run([&] { x.add_(2.0); });
        side.join();
      },
      [&](void* recorded) { priorities = kernel_priorities(recorded); });
  graph.replay();
  torch::cuda::synchronize();
  CHECK(torch::equal(x, torch::full({1024}, 3.0, options)));
  return priorities;
}

}  // namespace

TEST_CASE("a graph captured on a high-priority stream keeps its kernels above the side stream's", "[cuda]") {
  REQUIRE(torch::cuda::is_available());
  int least = 0, greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  REQUIRE(greatest < least);  // the device has stream priorities at all

  const std::vector<int> high = captured_priorities(true);
  REQUIRE(high.size() == 2);
  CHECK(high[0] < high[1]);    // the graph's own kernel before the side stream's
  CHECK(high[1] == least);     // the side stream is of ordinary priority

  const std::vector<int> ordinary = captured_priorities(false);
  REQUIRE(ordinary.size() == 2);
  CHECK(ordinary[0] == ordinary[1]);
}
