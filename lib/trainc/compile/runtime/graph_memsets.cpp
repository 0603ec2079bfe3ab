#include "trainc/compile/runtime/graph_memsets.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainc/compile/runtime/runtime_kernels.h"

#if TRAINC_WITH_CUDA
#include <cuda.h>
#endif

namespace trainc {

#if TRAINC_WITH_CUDA

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kMaxBlocks = 1024;

// Element i of a memset's `height` rows of `width` elements of `element_size` bytes (1, 2 or 4),
// rows `pitch` bytes apart, as cudaMemset2DAsync lays them out; the value's low bytes.
constexpr const char* kKernels = R"(
// trainc: a CUDA graph's memset node, as a kernel.
extern "C" __global__ void __launch_bounds__(256) trainc_graph_memset(unsigned char* dst, unsigned long long pitch,
    unsigned int value, unsigned int element_size, unsigned long long width, unsigned long long height) {
  const unsigned long long total = width * height;
  for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < total; i += gridDim.x * 256ull) {
    unsigned char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 4) *reinterpret_cast<unsigned int*>(p) = value;
    else if (element_size == 2) *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(value);
    else *p = static_cast<unsigned char>(value);
  }
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_graph_memset"});
  return built;
}

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorString(result, &text);
  throw std::runtime_error(std::string("replacing a CUDA graph's memset nodes: ") + what + ": " + (text != nullptr ? text : "error"));
}

// A node's edges in one direction, with their data; false when any edge is more than a full
// dependency (a programmatic port, a launch-order edge), which a new default edge would change.
bool plain_edges(CUgraphNode node, bool incoming, std::vector<CUgraphNode>& nodes) {
  size_t count = 0;
  if (incoming) check(cuGraphNodeGetDependencies(node, nullptr, nullptr, &count), "cuGraphNodeGetDependencies");
  else check(cuGraphNodeGetDependentNodes(node, nullptr, nullptr, &count), "cuGraphNodeGetDependentNodes");
  nodes.resize(count);
  std::vector<CUgraphEdgeData> edges(count);
  if (count == 0) return true;
  if (incoming) check(cuGraphNodeGetDependencies(node, nodes.data(), edges.data(), &count), "cuGraphNodeGetDependencies");
  else check(cuGraphNodeGetDependentNodes(node, nodes.data(), edges.data(), &count), "cuGraphNodeGetDependentNodes");
  for (const CUgraphEdgeData& edge : edges) {
    if (edge.from_port != 0 || edge.to_port != 0 || edge.type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) return false;
  }
  return true;
}

}  // namespace

int memset_nodes_to_kernels(void* graph_handle) {
  const auto graph = static_cast<CUgraph>(graph_handle);
  size_t count = 0;
  check(cuGraphGetNodes(graph, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  if (count > 0) check(cuGraphGetNodes(graph, nodes.data(), &count), "cuGraphGetNodes");
  int replaced = 0;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    check(cuGraphNodeGetType(node, &type), "cuGraphNodeGetType");
    if (type != CU_GRAPH_NODE_TYPE_MEMSET) continue;
    CUDA_MEMSET_NODE_PARAMS memset{};
    check(cuGraphMemsetNodeGetParams(node, &memset), "cuGraphMemsetNodeGetParams");
    const unsigned long long elements = memset.width * memset.height;
    if (elements * memset.elementSize > static_cast<unsigned long long>(kLargestMemsetAsKernel) || elements == 0) continue;
    std::vector<CUgraphNode> before, after;
    if (!plain_edges(node, true, before) || !plain_edges(node, false, after)) continue;

    void* dst = reinterpret_cast<void*>(memset.dst);
    unsigned long long pitch = memset.pitch, width = memset.width, height = memset.height;
    unsigned int value = memset.value, element_size = memset.elementSize;
    void* parameters[] = {&dst, &pitch, &value, &element_size, &width, &height};
    CUDA_KERNEL_NODE_PARAMS launch{};
    launch.func = static_cast<CUfunction>(kernels().function(0));
    launch.gridDimX = static_cast<unsigned>(std::min<unsigned long long>(kMaxBlocks, (elements + kBlock - 1) / kBlock));
    launch.gridDimY = launch.gridDimZ = 1;
    launch.blockDimX = kBlock;
    launch.blockDimY = launch.blockDimZ = 1;
    launch.kernelParams = parameters;  // copied into the node
    CUgraphNode kernel = nullptr;
    check(cuGraphAddKernelNode(&kernel, graph, before.data(), before.size(), &launch), "cuGraphAddKernelNode");
    for (CUgraphNode next : after) check(cuGraphAddDependencies(graph, &kernel, &next, nullptr, 1), "cuGraphAddDependencies");
    check(cuGraphDestroyNode(node), "cuGraphDestroyNode");
    ++replaced;
  }
  return replaced;
}

#else

int memset_nodes_to_kernels(void*) { return 0; }

#endif

}  // namespace trainc
