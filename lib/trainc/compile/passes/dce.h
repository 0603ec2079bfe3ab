// defines: eliminate_dead_code
//
// Contract: removes every node whose value no graph output depends on; graph inputs always stay
// (they are the compiled step's signature). Ids are renumbered in order.
// Example: x -> neg -> (unused), x -> exp -> output   becomes   x -> exp -> output
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph eliminate_dead_code(const Graph& graph);

}  // namespace trainc::ir
