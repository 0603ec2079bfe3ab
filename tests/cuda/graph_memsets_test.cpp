// A captured CUDA graph's memset nodes made kernel nodes (runtime/graph_memsets) write the bytes the
// memsets wrote, in the graph's order: a 1-D memset and a 2-D one (5 rows of 33 bytes, 64 apart)
// become kernels and a later kernel in the graph reads what they wrote; a memset larger than the
// limit stays a memset. Buffers are dirtied before the replay, so only the replay can set them.
// Then the fill kernel's edges: programmatic from a kernel where trainc's kernels are launched as
// dependents, plain from a memset node, and each fill writes after what it follows.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "support/graph_edges.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/graph_memsets.h"
#include "trainc/compile/runtime/runtime_kernels.h"

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

#if CUDART_VERSION >= 13000  // the rewrite needs CUDA 13's graph API
namespace {

// Writes `value` to `n` bytes, a byte a thread over many blocks. It lets its dependents launch as
// soon as it is past its own wait, as trainc's kernels do, so a fill after it is launched while it
// still writes.
constexpr const char* kKernels = R"(
extern "C" __global__ void trainc_test_write_bytes(unsigned char* bytes, long long n, unsigned int value) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) bytes[i] = static_cast<unsigned char>(value);
}
)";

// The graph's programmatic edges, and how many of them leave their kernel by its programmatic port
// (as a capture records a dependent launch).
struct ProgrammaticEdges {
  int count = 0;
  int from_programmatic_port = 0;
};

ProgrammaticEdges programmatic_edges(void* graph) {
  ProgrammaticEdges edges;
  for (const cudaGraphEdgeData& edge : trainc::test::graph_edges(graph).data) {
    if (edge.type != cudaGraphDependencyTypeProgrammatic) continue;
    ++edges.count;
    if (edge.from_port == cudaGraphKernelNodePortProgrammatic) ++edges.from_programmatic_port;
  }
  return edges;
}

}  // namespace

// A memset's kernel after a kernel (one of trainc's, which lets it launch early) is that kernel's
// programmatic dependent where trainc's kernels are launched so (Hopper on, switch
// dependent_launch), and a memset's kernel after a memset node keeps its plain edge; either way
// each writes after what it follows: the kernel writes 5 to a megabyte, the first memset 7 over all
// but its last byte, and a copy after it reads them; a large memset (which stays a memset) and a
// small one after it. A fill that wrote before the kernel had finished would leave 5s behind.
TEST_CASE("a memset's kernel after a kernel waits for it as its programmatic dependent", "[cuda]") {
  const auto bytes = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kUInt8);
  const int64_t size = trainc::kLargestMemsetAsKernel;
  at::Tensor buffer = torch::zeros({size}, bytes), large = torch::zeros({size + 16}, bytes), tail = torch::zeros({100}, bytes);
  at::Tensor copied = torch::zeros({size}, bytes);
  trainc::RuntimeKernels kernels(kKernels, {"trainc_test_write_bytes"});
  const auto write_fives = [&] {
    void* data = buffer.data_ptr();
    long long n = size;
    unsigned int value = 5;
    void* parameters[] = {&data, &n, &value};
    kernels.launch(0, size / 256, 256, parameters);
  };
  write_fives();  // built and loaded before the capture
  trainc::CudaGraph graph(torch::kCUDA);
  int replaced = -1;
  ProgrammaticEdges edges;
  graph.capture(
      [&] {
        write_fives();
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
        REQUIRE(cudaMemsetAsync(buffer.data_ptr(), 7, static_cast<size_t>(size - 1), stream) == cudaSuccess);
        copied.copy_(buffer);  // a memcpy node (ATen's reductions over this many bytes clear a semaphore with a memset)
        REQUIRE(cudaMemsetAsync(large.data_ptr(), 3, static_cast<size_t>(large.numel()), stream) == cudaSuccess);
        REQUIRE(cudaMemsetAsync(tail.data_ptr(), 9, 100, stream) == cudaSuccess);
      },
      [&](void* captured) {
        replaced = trainc::memset_nodes_to_kernels(captured);
        edges = programmatic_edges(captured);
      });
  CHECK(replaced == 2);
  const bool hopper = trainc::cuda_compute_capability(c10::Device(torch::kCUDA, 0)).value_or(0) >= 9;
  const bool dependent = hopper && trainc::optimization_enabled(trainc::Optimization::dependent_launch);
  // Only the kernel's edge into the first fill can be programmatic: the kernel is the capture's first
  // node, ATen's kernels are launched plainly, and the second fill follows a memset node.
  CHECK(edges.count == (dependent ? 1 : 0));
  CHECK(edges.from_programmatic_port == edges.count);
  for (int replay = 0; replay < 5; ++replay) {
    buffer.fill_(1);
    large.fill_(1);
    tail.fill_(1);
    graph.replay();
    torch::cuda::synchronize();
    CHECK(buffer.narrow(0, 0, size - 1).eq(7).all().item<bool>());
    CHECK(buffer[size - 1].item<int>() == 5);
    CHECK(torch::equal(copied, buffer));
    CHECK(large.eq(3).all().item<bool>());
    CHECK(tail.eq(9).all().item<bool>());
  }
}
#endif
