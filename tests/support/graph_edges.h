// defines: GraphEdges, graph_edges
//
// A captured CUDA graph's edges with their data (dependency type and ports), for the tests that
// check which of them are programmatic.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace trainc::test {

struct GraphEdges {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;  // data[i] belongs to the edge from[i] -> to[i]
};

inline GraphEdges graph_edges(void* graph) {
  const auto raw = static_cast<cudaGraph_t>(graph);
  std::size_t count = 0;
  GraphEdges edges;
#if CUDART_VERSION >= 13000  // the edges' data: CUDA 12.3's _v2 call, CUDA 13's plain one
  REQUIRE(cudaGraphGetEdges(raw, nullptr, nullptr, nullptr, &count) == cudaSuccess);
  edges.from.resize(count), edges.to.resize(count), edges.data.resize(count);
  REQUIRE(cudaGraphGetEdges(raw, edges.from.data(), edges.to.data(), edges.data.data(), &count) == cudaSuccess);
#else
  REQUIRE(cudaGraphGetEdges_v2(raw, nullptr, nullptr, nullptr, &count) == cudaSuccess);
  edges.from.resize(count), edges.to.resize(count), edges.data.resize(count);
  REQUIRE(cudaGraphGetEdges_v2(raw, edges.from.data(), edges.to.data(), edges.data.data(), &count) == cudaSuccess);
#endif
  return edges;
}

}  // namespace trainc::test
