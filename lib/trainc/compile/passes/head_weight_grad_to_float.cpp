#include "trainc/compile/passes/head_weight_grad_to_float.h"

#include <set>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph head_weight_grad_to_float(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);  // outputs count: a chain read as one stays
  std::vector<ValueId> reader(static_cast<std::size_t>(graph.size()), -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    for (ValueId in : graph.node(id).inputs) reader[static_cast<std::size_t>(in)] = id;
  }
  // The one step that reads `v`, or -1 (read by several, or only as an output).
  const auto only_reader = [&](ValueId v) { return uses[static_cast<std::size_t>(v)] == 1 ? reader[static_cast<std::size_t>(v)] : ValueId{-1}; };
  // The rewritten heads, and the embedding_grad_add each one's chain of views ends in.
  std::set<ValueId> heads, widenings;
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op != Op::linear_cross_entropy_grad_from_dlogits || head_gradients(node.attrs) != HeadGradients::weight ||
        !is_half_precision(node.type.dtype)) {
      continue;
    }
    ValueId end = id;
    while (only_reader(end) >= 0 && (graph.node(only_reader(end)).op == Op::slice || graph.node(only_reader(end)).op == Op::reshape)) {
      end = only_reader(end);
    }
    const ValueId widening = only_reader(end);
    if (widening < 0) continue;
    const Node& use = graph.node(widening);
    if (use.op != Op::embedding_grad_add || use.inputs[0] != end || use.inputs[1] == end || use.inputs[2] == end ||
        use.type.dtype != DType::f32 || embedding_grad_add_in_place(use.attrs)) {
      continue;
    }
    heads.insert(id);
    widenings.insert(widening);
  }
  if (heads.empty()) return graph;
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    const auto renamed = [&](ValueId v) { return new_id[static_cast<std::size_t>(v)]; };
    if (heads.count(id) > 0) {
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) inputs.push_back(renamed(in));
      Attributes in_float = node.attrs;
      in_float.ints = {2};
      return result.add(node.op, inputs, in_float);  // the views after it follow its dtype
    }
    if (widenings.count(id) == 0) return -1;
    Attributes in_place = node.attrs;
    in_place.ints = {node.attrs.ints[0], 1};
    return result.add(node.op, {renamed(node.inputs[0]), renamed(node.inputs[1]), renamed(node.inputs[2])}, in_place);
  });
}

}  // namespace trainc::ir
