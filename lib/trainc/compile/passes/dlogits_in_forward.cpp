#include "trainc/compile/passes/dlogits_in_forward.h"

#include <map>
#include <tuple>

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// A head is known by its operands and its loss's attributes.
using HeadKey = std::tuple<ValueId, ValueId, ValueId, double, DType>;

HeadKey key_of(const Node& node) { return {node.inputs[0], node.inputs[1], node.inputs[2], node.attrs.scalar, node.attrs.dtype}; }

bool fits(const Graph& graph, const Node& head) {
  const TensorType& x = graph.type(head.inputs[0]);
  LinearCrossEntropyLayout layout;
  return linear_cross_entropy_layout(x.shape[0], graph.type(head.inputs[1]).shape[0], dtype_bytes(x.dtype), dtype_bytes(head.attrs.dtype), layout);
}

}  // namespace

Graph dlogits_in_forward(const Graph& graph) {
  std::map<HeadKey, ValueId> differentiated;  // a head's key -> its packed buffer (-1 until made)
  for (const Node& node : graph.nodes()) {
    if (node.op == Op::linear_cross_entropy_grad && fits(graph, node)) differentiated.emplace(key_of(node), -1);
  }
  if (differentiated.empty()) return graph;

  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  const auto mapped = [&](ValueId id) { return new_id[static_cast<std::size_t>(id)]; };
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const auto head = node.op == Op::linear_cross_entropy || node.op == Op::linear_cross_entropy_grad ? differentiated.find(key_of(node))
                                                                                                         : differentiated.end();
    if (head == differentiated.end()) {
      new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
      continue;
    }
    const ValueId x = mapped(node.inputs[0]), weight = mapped(node.inputs[1]), targets = mapped(node.inputs[2]);
    if (head->second < 0) head->second = result.add(Op::linear_cross_entropy_and_dlogits, {x, weight, targets}, node.attrs);
    if (node.op == Op::linear_cross_entropy_grad) {
      new_id[static_cast<std::size_t>(id)] =
          result.add(Op::linear_cross_entropy_grad_from_dlogits, {head->second, x, weight, mapped(node.inputs[3])}, node.attrs);
      continue;
    }
    LinearCrossEntropyLayout layout;
    linear_cross_entropy_layout(result.type(x).shape[0], result.type(weight).shape[0], dtype_bytes(result.type(x).dtype),
                                dtype_bytes(node.attrs.dtype), layout);
    Attributes losses_part;
    losses_part.ints = {0, 0, layout.loss_elements, 1};
    Attributes as_loss;
    as_loss.dtype = node.attrs.dtype;
    new_id[static_cast<std::size_t>(id)] = result.add(Op::bitcast, {result.add(Op::slice, {head->second}, losses_part)}, as_loss);
  }
  for (ValueId out : graph.outputs()) result.mark_output(mapped(out));
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
