// defines: GraphBreak, ImportedGraph, import_graph
//
// Import, the planner's second stage: the traced aten graph becomes an IR graph. Each aten op has
// a builder (aten_ops.cpp, composites.cpp); composite ops decompose into IR primitives so later
// stages can fuse them, while matmul, convolution, pooling, attention and embedding stay extern
// ops. Every builder's result is checked against the shape and dtype the tracer recorded.
//
// An op without a builder, or with arguments its builder does not handle, is a graph break: it is
// reported with the op, the reason and the module it sits in, and the step is not compiled.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainc/compile/capture/capture.h"
#include "trainc/compile/ir/graph.h"

namespace trainc {

struct GraphBreak {
  std::string op;      // "aten::cumsum"
  std::string reason;  // "no IR entry", "dilation 2 is not supported", ...
  std::string module;  // the parameters' module nearest to the op, e.g. "h.0.attn_c_proj"
};

struct ImportedGraph {
  // Inputs: one per StepInput, in order. Outputs: the loss, then the new value of each buffer the
  // step updates (batch-norm running statistics), in the order of updated_buffers.
  ir::Graph graph;
  std::vector<int> updated_buffers;  // indices into the step inputs
  std::vector<GraphBreak> breaks;    // empty when the whole step imported
  std::map<std::string, int> aten_op_counts;
};

ImportedGraph import_graph(const CapturedStep& captured);

}  // namespace trainc
