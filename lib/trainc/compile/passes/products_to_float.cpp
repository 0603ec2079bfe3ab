#include "trainc/compile/passes/products_to_float.h"

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph products_to_float(const Graph& graph) {
  const auto n = static_cast<std::size_t>(graph.size());
  const std::vector<int> uses = use_counts(graph);

  Graph result;
  std::vector<ValueId> new_id(n, -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::cast && node.type.dtype == DType::f32) {
      const Node& product = graph.node(node.inputs[0]);
      if (product.op == Op::matmul && uses[static_cast<std::size_t>(node.inputs[0])] == 1 && is_half_precision(graph.type(product.inputs[0]).dtype) &&
          graph.type(product.inputs[0]).rank() == 2 && graph.type(product.inputs[1]).rank() == 2) {
        new_id[static_cast<std::size_t>(id)] = result.add(
            Op::matmul_to_float, {new_id[static_cast<std::size_t>(product.inputs[0])], new_id[static_cast<std::size_t>(product.inputs[1])]});
        continue;
      }
    }
    new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
  }
  for (ValueId out : graph.outputs()) result.mark_output(new_id[static_cast<std::size_t>(out)]);
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
