#include "trainc/compile/passes/cse.h"

#include <map>
#include <tuple>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph eliminate_common_subexpressions(const Graph& graph) {
  using Key = std::tuple<Op, std::vector<ValueId>, std::vector<int64_t>, double, bool, DType, bool>;
  std::map<Key, ValueId> first;
  std::vector<ValueId> replacement(static_cast<std::size_t>(graph.size()));
  std::vector<bool> keep(static_cast<std::size_t>(graph.size()), true);
  for (ValueId id = 0; id < graph.size(); ++id) {
    replacement[static_cast<std::size_t>(id)] = id;
    const Node& node = graph.node(id);
    if (node.op == Op::input || op_kind(node.op) == OpKind::kRandom) continue;  // two draws are two values
    std::vector<ValueId> inputs;
    for (ValueId input : node.inputs) inputs.push_back(replacement[static_cast<std::size_t>(input)]);
    const Attributes& a = node.attrs;
    const Key key{node.op, inputs, a.ints, a.scalar, a.keepdim, a.dtype, a.causal};
    auto [it, inserted] = first.emplace(key, id);
    if (!inserted) {
      replacement[static_cast<std::size_t>(id)] = it->second;
      keep[static_cast<std::size_t>(id)] = false;
    }
  }
  return keep_nodes(graph, keep, replacement);
}

}  // namespace trainc::ir
