#include "trainc/compile/passes/embedding_grad_add.h"

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph embedding_grad_add(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);
  const auto read_once = [&](ValueId id) { return uses[static_cast<std::size_t>(id)] == 1; };
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    // Low-precision gradients are left to ATen's embedding backward, which sums in float32.
    if (node.op != Op::add || (node.type.dtype != DType::f32 && node.type.dtype != DType::f64)) return -1;
    for (std::size_t side = 0; side < 2; ++side) {
      const ValueId scattered = node.inputs[side], other = node.inputs[1 - side];
      const Node& embedding = graph.node(scattered);
      if (embedding.op != Op::embedding_grad || !read_once(scattered) || scattered == other) continue;
      if (!(embedding.type == node.type) || !(graph.type(other) == node.type)) continue;
      ValueId base = other;
      const Node& widened = graph.node(other);
      if (widened.op == Op::cast && read_once(other) && is_floating(graph.type(widened.inputs[0]).dtype)) base = widened.inputs[0];
      const auto renamed = [&](ValueId v) { return new_id[static_cast<std::size_t>(v)]; };
      return result.add(Op::embedding_grad_add, {renamed(base), renamed(embedding.inputs[0]), renamed(embedding.inputs[1])}, embedding.attrs);
    }
    return -1;
  });
}

}  // namespace trainc::ir
