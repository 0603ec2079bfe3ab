// defines: KeepForBackward, keep_for_backward
//
// The shared part of the passes that let an extern op's forward keep what its gradient op would
// compute again (passes/dlogits_in_forward, passes/attention_lse_in_forward). In a joint graph, a
// forward node of `forward_op` and a gradient node of `gradient_op` that read the same first three
// inputs with the same attributes are one differentiated op; where `applies`, the forward node
// becomes `kept = keeping_op(those three inputs)` and its value `forward_value(kept)`, and the
// gradient node becomes `reading_op(reading_inputs(kept, its inputs))`. Other nodes are copied.
#pragma once

#include <functional>
#include <vector>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

struct KeepForBackward {
  Op forward_op, gradient_op, keeping_op, reading_op;
  std::function<bool(const Graph& graph, const Node& gradient)> applies;
  // In `result`: the forward node's value, made from the kept buffer.
  std::function<ValueId(Graph& result, ValueId kept, const Node& forward)> forward_value;
  // The reading op's inputs, given the gradient node's inputs (renamed into `result`).
  std::function<std::vector<ValueId>(ValueId kept, const std::vector<ValueId>& gradient_inputs)> reading_inputs;
};

Graph keep_for_backward(const Graph& graph, const KeepForBackward& rule);

}  // namespace trainc::ir
