// defines: eliminate_dead_code, live_nodes
//
// Contract: removes every node whose value no graph output depends on; graph inputs always stay
// (they are the compiled step's signature). Ids are renumbered in order.
// Example: x -> neg -> (unused), x -> exp -> output   becomes   x -> exp -> output
#pragma once

#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph eliminate_dead_code(const Graph& graph);

// Per node: whether a graph output depends on it (graph inputs always do).
std::vector<bool> live_nodes(const Graph& graph);

}  // namespace trainc::ir
