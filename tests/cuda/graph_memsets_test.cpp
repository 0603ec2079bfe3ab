// A captured CUDA graph's memset nodes made kernel nodes (runtime/graph_memsets) write the bytes the
// memsets wrote, in the graph's order: a 1-D memset and a 2-D one (5 rows of 33 bytes, 64 apart)
// become kernels and a later kernel in the graph reads what they wrote; a memset larger than the
// limit stays a memset. Buffers are dirtied before the replay, so only the replay can set them.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/runtime/graph_memsets.h"

TEST_CASE("a captured graph's small memsets become kernels writing the same bytes", "[cuda]") {
  const auto bytes = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kUInt8);
  at::Tensor line = torch::zeros({1000}, bytes), grid = torch::zeros({5, 64}, bytes);
  at::Tensor large = torch::zeros({trainc::kLargestMemsetAsKernel + 16}, bytes);
  at::Tensor total = torch::zeros({}, bytes.dtype(torch::kLong));
  trainc::CudaGraph graph(torch::kCUDA);
  int replaced = -1;
  graph.capture(
      [&] {
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
        REQUIRE(cudaMemsetAsync(line.data_ptr(), 7, 999, stream) == cudaSuccess);
        REQUIRE(cudaMemset2DAsync(grid.data_ptr(), 64, 9, 33, 5, stream) == cudaSuccess);
        REQUIRE(cudaMemsetAsync(large.data_ptr(), 3, static_cast<size_t>(large.numel()), stream) == cudaSuccess);
        total.copy_(line.to(torch::kLong).sum() + grid.to(torch::kLong).sum());
      },
      [&](void* captured) { replaced = trainc::memset_nodes_to_kernels(captured); });
  CHECK(replaced == 2);
  line.fill_(1);
  grid.fill_(1);
  large.fill_(1);
  graph.replay();
  torch::cuda::synchronize();
  // Bytes past those written keep the 1 written before the replay.
  at::Tensor expected_line = torch::full({1000}, 7, bytes);
  expected_line.narrow(0, 999, 1).fill_(1);
  at::Tensor expected_grid = torch::ones({5, 64}, bytes);
  expected_grid.narrow(1, 0, 33).fill_(9);
  CHECK(torch::equal(line, expected_line));
  CHECK(torch::equal(grid, expected_grid));
  CHECK(large.eq(3).all().item<bool>());
  CHECK(total.item<int64_t>() == 999 * 7 + 1 + 5 * 33 * 9 + 5 * 31);
}

// After a kernel, a memset's kernel is launched as that kernel's programmatic dependent on a GPU
// from Hopper on (its edge from the kernel is programmatic) and still writes after it: the kernel
// before adds one to every byte of a megabyte, many blocks' work, then the memset sets all but the
// last byte. A fill that wrote before the add had finished would leave bytes of 8.
TEST_CASE("a memset's kernel after a kernel waits for it as its programmatic dependent", "[cuda]") {
  const auto bytes = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kUInt8);
  const int64_t size = trainc::kLargestMemsetAsKernel;
  at::Tensor buffer = torch::zeros({size}, bytes);
  trainc::CudaGraph graph(torch::kCUDA);
  int replaced = -1, programmatic = 0;
  graph.capture(
      [&] {
        buffer.add_(1);
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
        REQUIRE(cudaMemsetAsync(buffer.data_ptr(), 7, static_cast<size_t>(size - 1), stream) == cudaSuccess);
      },
      [&](void* captured) {
        replaced = trainc::memset_nodes_to_kernels(captured);
        const auto raw = static_cast<cudaGraph_t>(captured);
        std::size_t count = 0;
#if CUDART_VERSION >= 13000  // the edges' data: CUDA 12.3's _v2 call, CUDA 13's plain one
        REQUIRE(cudaGraphGetEdges(raw, nullptr, nullptr, nullptr, &count) == cudaSuccess);
        std::vector<cudaGraphNode_t> from(count), to(count);
        std::vector<cudaGraphEdgeData> data(count);
        REQUIRE(cudaGraphGetEdges(raw, from.data(), to.data(), data.data(), &count) == cudaSuccess);
#else
        REQUIRE(cudaGraphGetEdges_v2(raw, nullptr, nullptr, nullptr, &count) == cudaSuccess);
        std::vector<cudaGraphNode_t> from(count), to(count);
        std::vector<cudaGraphEdgeData> data(count);
        REQUIRE(cudaGraphGetEdges_v2(raw, from.data(), to.data(), data.data(), &count) == cudaSuccess);
#endif
        for (const cudaGraphEdgeData& edge : data) programmatic += edge.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
      });
  CHECK(replaced == 1);
  const bool hopper = trainc::cuda_compute_capability(c10::Device(torch::kCUDA, 0)).value_or(0) >= 9;
  CHECK(programmatic == (hopper ? 1 : 0));
  at::Tensor expected = torch::full({size}, 7, bytes);
  expected.narrow(0, size - 1, 1).fill_(4);
  for (int replay = 0; replay < 5; ++replay) {
    buffer.fill_(3);
    graph.replay();
    torch::cuda::synchronize();
    CHECK(torch::equal(buffer, expected));
  }
}
