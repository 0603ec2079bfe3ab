#include "trainc/compile/passes/dlogits_in_forward.h"

#include <optional>

#include "trainc/compile/passes/keep_for_backward.h"

namespace trainc::ir {
namespace {

// The head's buffer layout; none when its losses do not fill whole elements of x's dtype.
std::optional<LinearCrossEntropyLayout> layout_of(const Graph& graph, const Node& head) {
  const TensorType& x = graph.type(head.inputs[0]);
  LinearCrossEntropyLayout layout;
  if (!linear_cross_entropy_layout(x.shape[0], x.shape[1], graph.type(head.inputs[1]).shape[0], dtype_bytes(x.dtype),
                                   dtype_bytes(head.attrs.dtype), layout)) {
    return std::nullopt;
  }
  return layout;
}

}  // namespace

Graph dlogits_in_forward(const Graph& graph) {
  KeepForBackward rule;
  rule.forward_op = Op::linear_cross_entropy;
  rule.gradient_op = Op::linear_cross_entropy_grad;
  rule.keeping_op = Op::linear_cross_entropy_and_dlogits;
  rule.reading_op = Op::linear_cross_entropy_grad_from_dlogits;
  rule.applies = [](const Graph& g, const Node& head) { return layout_of(g, head).has_value(); };
  // The losses: the buffer's first elements, read back as the loss dtype.
  rule.forward_value = [&graph](Graph& result, ValueId kept, const Node& head) {
    Attributes losses_part;
    losses_part.ints = {0, 0, layout_of(graph, head)->loss_elements, 1};
    Attributes as_loss;
    as_loss.dtype = head.attrs.dtype;
    return result.add(Op::bitcast, {result.add(Op::slice, {kept}, losses_part)}, as_loss);
  };
  // (x, weight, targets, grad) -> (kept, x, weight, grad)
  rule.reading_inputs = [](ValueId kept, const std::vector<ValueId>& in) { return std::vector<ValueId>{kept, in[0], in[1], in[3]}; };
  return keep_for_backward(graph, rule);
}

}  // namespace trainc::ir
