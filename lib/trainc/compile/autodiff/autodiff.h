// defines: JointGraph, differentiate
//
// Autodiff over IR primitives: reverse mode, one vector-Jacobian rule per op (autodiff.cpp), gives
// one joint graph holding the forward computation and its backward. The backward is seeded by a
// graph input, `loss_grad`, so the caller chooses the scale (gradient accumulation, loss scaling).
#pragma once

#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc {

struct JointGraph {
  // Inputs: the forward graph's inputs, then loss_grad (rank 0, the loss's dtype).
  // Outputs: the forward graph's outputs, then one gradient per entry of gradient_inputs.
  ir::Graph graph;
  int forward_outputs = 0;
  std::vector<int> gradient_inputs;  // which forward inputs (by position among the inputs) the gradients are for
};

// `forward`'s first output is the loss (rank 0); requires_grad has one flag per forward input. An
// input that needs a gradient but does not reach the loss gets none (as eager leaves .grad unset).
JointGraph differentiate(const ir::Graph& forward, const std::vector<bool>& requires_grad);

// True when `op` has a gradient rule (extern gradient ops have none: they never need one here).
bool has_gradient_rule(ir::Op op);

}  // namespace trainc
