// defines: rematerialize_pointwise
//
// Contract: gives each reader of a pointwise value its own copy of that value, so the fusion pass
// can compute it inside the reader's kernel instead of storing it in one kernel and loading it in
// another. A GELU's backward is the case in point: its recomputed forward (x, x^2, 1 + tanh(..),
// ...) fed a GEMM early and the gradient's kernel late, and one kernel stored five float32
// tensors for the other to load; a copy in the late kernel reads the two bf16 inputs instead.
// Copied are values a generated kernel computes (fusion.cpp's kernel_computes) for readers of the
// same shape that a kernel computes too; other readers (GEMMs, views, smaller or larger shapes)
// and program outputs keep the original. A copy reads what the original reads, and those inputs
// are copied in turn for it, reader by reader. The graph grows by at most its own size (a budget
// against chains that fan out and meet again); later values are copied first. The copies compute
// exactly what the original does, bit for bit.
// Example: a = exp(x); m = matmul(a, w); b = a * m   becomes   a = exp(x); m = matmul(a, w);
//          a2 = exp(x); b = a2 * m   (b's kernel computes exp itself; a is stored only for m)
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph rematerialize_pointwise(const Graph& graph);

}  // namespace trainc::ir
