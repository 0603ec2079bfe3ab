// defines: Rematerialized, rematerialize_loads
//
// Contract: finds values that one kernel stores only for later pointwise kernels over the same
// elements to load, where the value is a cheap pointwise function of what its own kernel loads
// (at most kMaxCopiedNodes element members, no reduction or row value among them), and copies that
// function in front of each reader kernel, so the reader computes the value from the same loads
// and the first kernel no longer stores it. A GELU's backward is the case in point: the kernel
// that recomputes the activation for a GEMM stored x, x/2, x^2 and 1 + tanh(..) as float32 for
// the gradient's kernel, after the GEMM, to load. Values that an ATen call, a reduction kernel or
// the program's outputs read are left as they are. It runs on a scheduled program, since only the
// schedule says which kernel reads what; schedule_kernels then lets a kernel that starts with such
// copies take the reader kernel's nodes (`copies` marks them).
// Example: k1 = [a = exp(x); s = a * 2 (stored for a GEMM); a stored]; GEMM(s); k2 = [b = a * m]
//          becomes k1 = [a = exp(x); s = a * 2]; GEMM(s); k2 = [a' = exp(x); b = a' * m]
#pragma once

#include <vector>

#include "trainc/compile/ir/graph.h"
#include "trainc/compile/passes/fusion.h"

namespace trainc {

constexpr int kMaxCopiedNodes = 24;

struct Rematerialized {
  ir::Graph graph;
  std::vector<bool> copies;  // per node of `graph`: whether it is a copy made here
  int copied_values = 0;     // stored values no longer stored
};

Rematerialized rematerialize_loads(const ir::Graph& graph, const Schedule& schedule);

}  // namespace trainc
