#include "trainc/compile/passes/rebuild.h"

#include "trainc/compile/passes/dce.h"

namespace trainc::ir {

Graph keep_nodes(const Graph& graph, const std::vector<bool>& keep, const std::vector<ValueId>& replacement) {
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  std::vector<Node> nodes;
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (!keep[static_cast<std::size_t>(id)]) continue;
    Node node = graph.node(id);
    for (ValueId& input : node.inputs) {
      input = new_id[static_cast<std::size_t>(replacement[static_cast<std::size_t>(input)])];
      if (input < 0) throw IrError("keep_nodes: a kept node uses a dropped value");
    }
    new_id[static_cast<std::size_t>(id)] = static_cast<ValueId>(nodes.size());
    nodes.push_back(std::move(node));
  }
  std::vector<ValueId> outputs;
  for (ValueId output : graph.outputs()) {
    outputs.push_back(new_id[static_cast<std::size_t>(replacement[static_cast<std::size_t>(output)])]);
  }
  return Graph::from_nodes(std::move(nodes), std::move(outputs));
}

Graph rewrite_nodes(const Graph& graph, const NodeRewrite& rewrite) {
  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    const ValueId replaced = rewrite(id, result, new_id);
    new_id[static_cast<std::size_t>(id)] = replaced >= 0 ? replaced : copy_node(result, graph.node(id), new_id);
  }
  for (ValueId out : graph.outputs()) result.mark_output(new_id[static_cast<std::size_t>(out)]);
  return eliminate_dead_code(result);
}

std::vector<int> use_counts(const Graph& graph) {
  std::vector<int> uses(static_cast<std::size_t>(graph.size()), 0);
  for (const Node& node : graph.nodes()) {
    for (ValueId in : node.inputs) ++uses[static_cast<std::size_t>(in)];
  }
  for (ValueId out : graph.outputs()) ++uses[static_cast<std::size_t>(out)];
  return uses;
}

ValueId copy_node(Graph& result, const Node& node, const std::vector<ValueId>& new_id) {
  if (node.op == Op::input) return result.add_input(node.name, node.type);
  std::vector<ValueId> inputs;
  for (ValueId in : node.inputs) inputs.push_back(new_id[static_cast<std::size_t>(in)]);
  return result.add(node.op, inputs, node.attrs);
}

}  // namespace trainc::ir
