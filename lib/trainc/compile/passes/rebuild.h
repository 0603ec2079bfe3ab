// defines: keep_nodes, rewrite_nodes, NodeRewrite, copy_node, use_counts — the shared parts of the
// passes that rebuild graphs
#pragma once

#include <functional>
#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

// Rebuilds `graph` keeping the nodes with keep[id], after redirecting every use of value v to
// replacement[v] (which must be kept and come before its users). Ids are renumbered in order.
Graph keep_nodes(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replacement);

// Emits the replacement of node `id` into `result` (its inputs are there already, renamed through
// `new_id`) and returns the replacement's id, or -1 to keep the node as it is.
using NodeRewrite = std::function<ValueId(ValueId id, Graph& result, const std::vector<ValueId>& new_id)>;

// Rebuilds `graph` node by node in order, each node replaced by `rewrite` or copied; the outputs
// follow their values, and what nothing reads any more is dropped.
Graph rewrite_nodes(const Graph& graph, const NodeRewrite& rewrite);

// How many times each value is read: by a node (once per input slot) or as a graph output.
std::vector<int> use_counts(const Graph& graph);

// Appends `node` to `result` unchanged, its inputs renamed through `new_id`; returns its new id.
ValueId copy_node(Graph& result, const Node& node, const std::vector<ValueId>& new_id);

}  // namespace trainc::ir
