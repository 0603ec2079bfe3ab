#include "trainc/compile/passes/sink_pointwise.h"

namespace trainc::ir {
namespace {

bool sinks(const Node& node) {
  switch (op_kind(node.op)) {
    case OpKind::kUnary:
    case OpKind::kBinary:
    case OpKind::kTernary:
    case OpKind::kReduction:
    case OpKind::kView:
    case OpKind::kConstant:
      return true;
    default:
      return false;
  }
}

}  // namespace

Graph sink_pointwise(const Graph& graph) {
  const auto n = static_cast<std::size_t>(graph.size());
  std::vector<ValueId> new_id(n, -1);
  std::vector<Node> nodes;
  // Emits `root` after whatever it reads that is not out yet (iteratively: graphs are deep).
  const auto emit = [&](ValueId root) {
    std::vector<std::pair<ValueId, std::size_t>> stack = {{root, 0}};
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const Node& node = graph.node(id);
      if (new_id[static_cast<std::size_t>(id)] >= 0) {
        stack.pop_back();
        continue;
      }
      if (next < node.inputs.size()) {
        const ValueId input = node.inputs[next++];
        if (new_id[static_cast<std::size_t>(input)] < 0) stack.push_back({input, 0});
        continue;
      }
      Node copy = node;
      for (ValueId& input : copy.inputs) input = new_id[static_cast<std::size_t>(input)];
      new_id[static_cast<std::size_t>(id)] = static_cast<ValueId>(nodes.size());
      nodes.push_back(std::move(copy));
      stack.pop_back();
    }
  };
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (graph.node(id).op == Op::input) emit(id);
  }
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (!sinks(graph.node(id))) emit(id);
  }
  for (ValueId output : graph.outputs()) emit(output);
  for (ValueId id = 0; id < graph.size(); ++id) emit(id);  // what nothing reads (dead code) goes last
  std::vector<ValueId> outputs;
  for (ValueId output : graph.outputs()) outputs.push_back(new_id[static_cast<std::size_t>(output)]);
  return Graph::from_nodes(std::move(nodes), std::move(outputs));
}

}  // namespace trainc::ir
