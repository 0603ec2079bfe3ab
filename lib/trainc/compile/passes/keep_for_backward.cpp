#include "trainc/compile/passes/keep_for_backward.h"

#include <map>
#include <tuple>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// A differentiated op is known by its first three inputs and the attributes the ops here read.
using OpKey = std::tuple<ValueId, ValueId, ValueId, double, DType, bool>;

OpKey key_of(const Node& node) {
  return {node.inputs[0], node.inputs[1], node.inputs[2], node.attrs.scalar, node.attrs.dtype, node.attrs.causal};
}

}  // namespace

Graph keep_for_backward(const Graph& graph, const KeepForBackward& rule) {
  std::map<OpKey, ValueId> kept;  // a differentiated op's key -> its kept buffer in the result (-1 until made)
  for (const Node& node : graph.nodes()) {
    if (node.op == rule.gradient_op && rule.applies(graph, node)) kept.emplace(key_of(node), -1);
  }
  if (kept.empty()) return graph;

  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    const auto found = node.op == rule.forward_op || node.op == rule.gradient_op ? kept.find(key_of(node)) : kept.end();
    if (found == kept.end()) return -1;
    std::vector<ValueId> inputs;
    for (ValueId in : node.inputs) inputs.push_back(new_id[static_cast<std::size_t>(in)]);
    if (found->second < 0) found->second = result.add(rule.keeping_op, {inputs[0], inputs[1], inputs[2]}, node.attrs);
    if (node.op == rule.forward_op) return rule.forward_value(result, found->second, node);
    return result.add(rule.reading_op, rule.reading_inputs(found->second, inputs), node.attrs);
  });
}

}  // namespace trainc::ir
