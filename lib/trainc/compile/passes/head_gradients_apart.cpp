#include "trainc/compile/passes/head_gradients_apart.h"

#include <map>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph head_gradients_apart(const Graph& graph) {
  // The heads to split: every reader a slice of dim 0, step 1, inside x's part or the weight's.
  std::map<ValueId, int64_t> split;  // head -> where the weight's part starts (x's elements)
  std::vector<bool> outside(static_cast<std::size_t>(graph.size()), false);
  for (ValueId output : graph.outputs()) outside[static_cast<std::size_t>(output)] = true;
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::linear_cross_entropy_grad_from_dlogits && head_gradients(node.attrs) == HeadGradients::both &&
        !outside[static_cast<std::size_t>(id)]) {
      split[id] = graph.type(node.inputs[1]).numel();
    }
  }
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    for (ValueId in : node.inputs) {
      const auto head = split.find(in);
      if (head == split.end()) continue;
      const bool inside = node.op == Op::slice && node.attrs.ints[0] == 0 && node.attrs.ints[3] == 1 &&
                          (node.attrs.ints[2] <= head->second || node.attrs.ints[1] >= head->second);
      if (!inside) split.erase(head);
    }
  }
  if (split.empty()) return graph;

  std::map<ValueId, std::pair<ValueId, ValueId>> parts;  // head -> its two steps in the result
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    const auto renamed = [&](ValueId v) { return new_id[static_cast<std::size_t>(v)]; };
    if (split.count(id) > 0) {
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) inputs.push_back(renamed(in));
      Attributes input_only = node.attrs, weight_only = node.attrs;
      input_only.ints = {0};
      weight_only.ints = {1};
      const ValueId x_part = result.add(node.op, inputs, input_only);
      const ValueId weight_part = result.add(node.op, inputs, weight_only);
      parts[id] = {x_part, weight_part};
      return x_part;  // read by nothing: every reader is a slice, rewritten below
    }
    if (node.op != Op::slice) return -1;
    const auto head = split.find(node.inputs[0]);
    if (head == split.end()) return -1;
    const auto [x_part, weight_part] = parts.at(head->first);
    Attributes attrs = node.attrs;
    if (attrs.ints[1] >= head->second) {
      attrs.ints[1] -= head->second;
      attrs.ints[2] -= head->second;
      return result.add(Op::slice, {weight_part}, attrs);
    }
    return result.add(Op::slice, {x_part}, attrs);
  });
}

}  // namespace trainc::ir
