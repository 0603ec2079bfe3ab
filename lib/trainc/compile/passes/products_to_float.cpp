#include "trainc/compile/passes/products_to_float.h"

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph products_to_float(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    if (node.op != Op::cast || node.type.dtype != DType::f32) return -1;
    const Node& product = graph.node(node.inputs[0]);
    if (product.op != Op::matmul || uses[static_cast<std::size_t>(node.inputs[0])] != 1 || !is_half_precision(graph.type(product.inputs[0]).dtype) ||
        graph.type(product.inputs[0]).rank() != 2 || graph.type(product.inputs[1]).rank() != 2) {
      return -1;
    }
    return result.add(Op::matmul_to_float, {new_id[static_cast<std::size_t>(product.inputs[0])], new_id[static_cast<std::size_t>(product.inputs[1])]});
  });
}

}  // namespace trainc::ir
