// defines: eliminate_common_subexpressions
//
// Contract: nodes with the same op, the same inputs and the same attributes compute the same value
// (every IR op but the random ones is deterministic), so later duplicates are replaced by the first. Graph inputs and
// random draws are never merged. Run eliminate_dead_code afterwards to drop what became unused.
// Example: a = exp(x); b = exp(x); add(a, b)   becomes   a = exp(x); add(a, a)
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph eliminate_common_subexpressions(const Graph& graph);

}  // namespace trainc::ir
