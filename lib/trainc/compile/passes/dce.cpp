#include "trainc/compile/passes/dce.h"

#include <numeric>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

std::vector<bool> live_nodes(const Graph& graph) {
  std::vector<bool> live(static_cast<std::size_t>(graph.size()), false);
  for (ValueId output : graph.outputs()) live[static_cast<std::size_t>(output)] = true;
  for (ValueId id = graph.size() - 1; id >= 0; --id) {  // users come after their inputs
    const Node& node = graph.node(id);
    if (node.op == Op::input) live[static_cast<std::size_t>(id)] = true;
    if (!live[static_cast<std::size_t>(id)]) continue;
    for (ValueId input : node.inputs) live[static_cast<std::size_t>(input)] = true;
  }
  return live;
}

Graph eliminate_dead_code(const Graph& graph) {
  const std::vector<bool> live = live_nodes(graph);
  std::vector<ValueId> identity(static_cast<std::size_t>(graph.size()));
  std::iota(identity.begin(), identity.end(), 0);
  return keep_nodes(graph, live, identity);
}

}  // namespace trainc::ir
