// defines: sink_pointwise
//
// Contract: reorders a graph so that pointwise ops, reductions, views and constants come just
// before the first node that needs them and is none of these (an extern op, a random draw, an
// output), keeping every other node in its place. The fusion pass makes kernels in program order,
// and a node joins a kernel only when what else it reads is older than the kernel; sinking puts
// the recomputed forward values of a backward next to the gradients they are combined with, so
// they fuse with them. Graph inputs stay first and in order; outputs are unchanged.
// Example: a = x * 2; m = matmul(w, v); b = a + m   becomes   m = matmul(w, v); a = x * 2; b = a + m
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph sink_pointwise(const Graph& graph);

}  // namespace trainc::ir
