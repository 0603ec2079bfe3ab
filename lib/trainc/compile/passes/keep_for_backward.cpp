#include "trainc/compile/passes/keep_for_backward.h"

#include <map>
#include <tuple>

#include "trainc/compile/passes/dce.h"
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

  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  const auto mapped = [&](ValueId id) { return new_id[static_cast<std::size_t>(id)]; };
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const auto found = node.op == rule.forward_op || node.op == rule.gradient_op ? kept.find(key_of(node)) : kept.end();
    if (found == kept.end()) {
      new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
      continue;
    }
    if (found->second < 0) {
      found->second = result.add(rule.keeping_op, {mapped(node.inputs[0]), mapped(node.inputs[1]), mapped(node.inputs[2])}, node.attrs);
    }
    if (node.op == rule.forward_op) {
      new_id[static_cast<std::size_t>(id)] = rule.forward_value(result, found->second, node);
    } else {
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) inputs.push_back(mapped(in));
      new_id[static_cast<std::size_t>(id)] = result.add(rule.reading_op, rule.reading_inputs(found->second, inputs), node.attrs);
    }
  }
  for (ValueId out : graph.outputs()) result.mark_output(mapped(out));
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
