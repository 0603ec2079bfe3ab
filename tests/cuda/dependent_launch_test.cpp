// Dependent launches (runtime/cuda_modules, switch dependent_launch): a kernel whose body begins by
// waiting for the kernel before it is launched as that kernel's programmatic dependent, in a stream
// and in a CUDA graph's capture. A chain of such launches, each reading what the one before wrote,
// must come out exact, eagerly and replayed; the captured graph's edges between them are
// programmatic on a GPU from Hopper on, and ordinary with the switch off or for a kernel that does
// not wait.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "support/graph_edges.h"
#include "support/scoped_variable.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace {

// Each step reads one buffer in reverse and writes the other, so a step's first blocks read what
// the previous step's last blocks write: a step that started reading before the previous one had
// finished would read stale values. Doubling and adding one leaves 2^n - 1 after n steps from zero.
constexpr const char* kKernels = R"(
extern "C" __global__ void trainc_test_double_plus_one(const float* x, float* y, int n) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[n - 1 - i] + 1.0f;
}
extern "C" __global__ void trainc_test_double_plus_one_unwaiting(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[n - 1 - i] + 1.0f;
}
)";
constexpr int kSteps = 20;          // even: the result ends in the first buffer
constexpr int kElements = 1 << 22;  // 16,384 blocks: each kernel runs many waves

std::vector<std::string> symbols() { return {"trainc_test_double_plus_one", "trainc_test_double_plus_one_unwaiting"}; }

// x: two rows, the chain's two buffers; the result is in row 0.
void launch_chain(trainc::RuntimeKernels& kernels, std::size_t index, at::Tensor& x) {
  float* buffers[] = {x[0].data_ptr<float>(), x[1].data_ptr<float>()};
  int n = kElements;
  for (int step = 0; step < kSteps; ++step) {
    const float* from = buffers[step % 2];
    float* to = buffers[(step + 1) % 2];
    void* parameters[] = {&from, &to, &n};
    kernels.launch(index, kElements / 256, 256, parameters);
  }
}

at::Tensor chain_buffers() { return torch::zeros({2, kElements}, torch::TensorOptions().device(torch::kCUDA)); }

bool exact(const at::Tensor& x) { return torch::equal(x[0], torch::full_like(x[0], static_cast<float>((1 << kSteps) - 1))); }

struct Edges {
  int between_kernels = 0;
  int programmatic = 0;
};

Edges kernel_edges(void* graph) {
  const trainc::test::GraphEdges all = trainc::test::graph_edges(graph);
  const auto kernel = [](cudaGraphNode_t node) {
    cudaGraphNodeType type;
    REQUIRE(cudaGraphNodeGetType(node, &type) == cudaSuccess);
    return type == cudaGraphNodeTypeKernel;
  };
  Edges edges;
  for (std::size_t i = 0; i < all.data.size(); ++i) {
    if (!kernel(all.from[i]) || !kernel(all.to[i])) continue;
    ++edges.between_kernels;
    if (all.data[i].type == cudaGraphDependencyTypeProgrammatic) ++edges.programmatic;
  }
  return edges;
}

// The chain of kernel `index` captured and replayed: its result and the recorded graph's edges.
Edges captured_chain(trainc::RuntimeKernels& kernels, std::size_t index) {
  at::Tensor x = chain_buffers();
  launch_chain(kernels, index, x);  // built and loaded before the capture
  trainc::CudaGraph graph(torch::kCUDA);
  Edges edges;
  graph.capture([&] { launch_chain(kernels, index, x); }, [&](void* recorded) { edges = kernel_edges(recorded); });
  for (int replay = 0; replay < 5; ++replay) {
    x.zero_();
    graph.replay();
    torch::cuda::synchronize();
    CHECK(exact(x));
  }
  return edges;
}

}  // namespace

TEST_CASE("kernels that wait for the kernel before them run as its programmatic dependents, exactly", "[cuda]") {
  const bool hopper = trainc::cuda_compute_capability(torch::kCUDA).value_or(0) >= 9;
  trainc::RuntimeKernels kernels(kKernels, symbols());

  // Eagerly, on a stream.
  at::Tensor x = chain_buffers();
  launch_chain(kernels, 0, x);
  torch::cuda::synchronize();
  CHECK(exact(x));

  // Captured: programmatic edges where the kernel waits, ordinary ones where it does not.
  const Edges waiting = captured_chain(kernels, 0);
  CHECK(waiting.between_kernels == kSteps - 1);
  CHECK(waiting.programmatic == (hopper ? kSteps - 1 : 0));
  const Edges unwaiting = captured_chain(kernels, 1);
  CHECK(unwaiting.between_kernels == kSteps - 1);
  CHECK(unwaiting.programmatic == 0);

  // With the switch off when the kernels are loaded, ordinary edges.
  trainc::test::ScopedVariable off(trainc::kDisableOptimizationsVariable, "dependent_launch");
  trainc::RuntimeKernels switched_off(kKernels, symbols());
  const Edges ordinary = captured_chain(switched_off, 0);
  CHECK(ordinary.between_kernels == kSteps - 1);
  CHECK(ordinary.programmatic == 0);
}
