// defines: keep_nodes — the shared tail of the passes that drop or redirect nodes
#pragma once

#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

// Rebuilds `graph` keeping the nodes with keep[id], after redirecting every use of value v to
// replacement[v] (which must be kept and come before its users). Ids are renumbered in order.
Graph keep_nodes(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replacement);

}  // namespace trainc::ir
