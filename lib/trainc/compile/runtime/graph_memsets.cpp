#include "trainc/compile/runtime/graph_memsets.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainc/compile/runtime/runtime_kernels.h"

#if TRAINC_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace trainc {

// The graph API with edge data (CUDA 13's signatures); with an older toolkit nothing is rewritten.
#if TRAINC_WITH_CUDA && CUDA_VERSION >= 13000

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kMaxBlocks = 1024;

// Element i of a memset's `height` rows of `width` elements of `element_size` bytes (1, 2 or 4),
// rows `pitch` bytes apart, as cudaMemset2DAsync lays them out; the value's low bytes.
constexpr const char* kKernels = R"(
// trainc: a CUDA graph's memset node, as a kernel.
extern "C" __global__ void __launch_bounds__(256) trainc_graph_memset(unsigned char* dst, unsigned long long pitch,
    unsigned int value, unsigned int element_size, unsigned long long width, unsigned long long height) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
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

// A node's edges in one direction; false when any edge is more than a full dependency (a
// programmatic port, a launch-order edge), which a new default edge would change.
bool plain_edges(CUgraphNode node, bool incoming, std::vector<CUgraphNode>& nodes) {
  const auto query = [&](CUgraphNode* found, CUgraphEdgeData* edges, size_t* count) {
    return incoming ? cuGraphNodeGetDependencies(node, found, edges, count) : cuGraphNodeGetDependentNodes(node, found, edges, count);
  };
  size_t count = 0;
  const CUresult counted = query(nullptr, nullptr, &count);
  if (counted == CUDA_ERROR_LOSSY_QUERY) return false;  // edges with data
  check(counted, "querying a node's edges");
  nodes.resize(count);
  std::vector<CUgraphEdgeData> edges(count);
  if (count == 0) return true;
  check(query(nodes.data(), edges.data(), &count), "querying a node's edges");
  for (const CUgraphEdgeData& edge : edges) {
    if (edge.from_port != 0 || edge.to_port != 0 || edge.type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) return false;
  }
  return true;
}

// Whether device memory at `address` is on the current device (the fill kernel's module is
// loaded there).
bool on_current_device(CUdeviceptr address) {
  int ordinal = -1, current = -1;
  if (cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS) return false;
  return cudaGetDevice(&current) == cudaSuccess && ordinal == current;
}

bool is_kernel(CUgraphNode node) {
  CUgraphNodeType type{};
  check(cuGraphNodeGetType(node, &type), "cuGraphNodeGetType");
  return type == CU_GRAPH_NODE_TYPE_KERNEL;
}

// The kernel node that writes what `memset` writes, given the memset's neighbours; the memset is
// left in place. With `dependent`, its edges from kernels are programmatic, as a capture records a
// dependent launch: the GPU may launch the fill while the kernel before it finishes, and the fill
// waits for every kernel before it (its first statement) before it writes. The node is made with
// all its incoming edges at once; if its outgoing edges cannot be added, it is removed again, so
// nothing of it is left in the graph (were the removal to fail too, the error says so).
CUgraphNode add_fill_node(CUgraph graph, const CUDA_MEMSET_NODE_PARAMS& memset, const std::vector<CUgraphNode>& before,
                          const std::vector<CUgraphNode>& after, CUfunction fill, bool dependent) {
  void* dst = reinterpret_cast<void*>(memset.dst);
  unsigned long long pitch = memset.pitch, width = memset.width, height = memset.height;
  unsigned int value = memset.value, element_size = memset.elementSize;
  void* parameters[] = {&dst, &pitch, &value, &element_size, &width, &height};
  CUgraphNodeParams node{};
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.kernel.func = fill;
  node.kernel.gridDimX = static_cast<unsigned>(std::min<unsigned long long>(kMaxBlocks, (width * height + kBlock - 1) / kBlock));
  node.kernel.gridDimY = node.kernel.gridDimZ = 1;
  node.kernel.blockDimX = kBlock;
  node.kernel.blockDimY = node.kernel.blockDimZ = 1;
  node.kernel.kernelParams = parameters;  // copied into the node
  std::vector<CUgraphEdgeData> incoming(before.size());  // zeroed: full dependencies
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (!dependent || !is_kernel(before[i])) continue;
    incoming[i].from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
    incoming[i].type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  }
  CUgraphNode fill_node = nullptr;
  check(cuGraphAddNode(&fill_node, graph, before.data(), incoming.data(), before.size(), &node), "cuGraphAddNode");
  if (after.empty()) return fill_node;
  const std::vector<CUgraphNode> from(after.size(), fill_node);
  const CUresult added = cuGraphAddDependencies(graph, from.data(), after.data(), nullptr, after.size());
  if (added != CUDA_SUCCESS) {
    check(cuGraphDestroyNode(fill_node), "removing a fill node whose outgoing edges failed (the graph keeps it)");
    check(added, "cuGraphAddDependencies");
  }
  return fill_node;
}

}  // namespace

int memset_nodes_to_kernels(void* graph_handle) {
  const auto graph = static_cast<CUgraph>(graph_handle);
  // Compiled before anything changes, so a compile error leaves the graph as it was captured.
  const auto fill = static_cast<CUfunction>(kernels().function(0));
  const bool dependent = kernels().dependent_launch(0);
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
    if (elements == 0 || elements * memset.elementSize > static_cast<unsigned long long>(kLargestMemsetAsKernel)) continue;
    if (!on_current_device(memset.dst)) continue;
    std::vector<CUgraphNode> before, after;
    if (!plain_edges(node, true, before) || !plain_edges(node, false, after)) continue;
    // Each node is replaced whole or not at all: the fill node and its edges first, then the memset
    // goes (with its edges), so the graph is correct between any two steps.
    add_fill_node(graph, memset, before, after, fill, dependent);
    check(cuGraphDestroyNode(node), "cuGraphDestroyNode");
    ++replaced;
  }
  return replaced;
}

#else

int memset_nodes_to_kernels(void*) { return 0; }

#endif

}  // namespace trainc
