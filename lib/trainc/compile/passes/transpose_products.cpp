#include "trainc/compile/passes/transpose_products.h"

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph transpose_products(const Graph& graph) {
  const auto n = static_cast<std::size_t>(graph.size());
  const std::vector<int> uses = use_counts(graph);

  Graph result;
  std::vector<ValueId> new_id(n, -1);
  Attributes swap;
  swap.ints = {1, 0};
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::permute && node.attrs.ints == swap.ints) {
      // The product, and the cast between it and the transpose if there is one.
      const ValueId read = node.inputs[0];
      const bool through_cast = graph.node(read).op == Op::cast && uses[static_cast<std::size_t>(read)] == 1;
      const ValueId product_id = through_cast ? graph.node(read).inputs[0] : read;
      const Node& product = graph.node(product_id);
      if (product.op == Op::matmul && uses[static_cast<std::size_t>(product_id)] == 1 && graph.type(product.inputs[0]).rank() == 2 &&
          graph.type(product.inputs[1]).rank() == 2) {
        const ValueId a = new_id[static_cast<std::size_t>(product.inputs[0])];
        const ValueId b = new_id[static_cast<std::size_t>(product.inputs[1])];
        ValueId transposed = result.add(Op::matmul, {result.add(Op::permute, {b}, swap), result.add(Op::permute, {a}, swap)});
        if (through_cast) transposed = result.add(Op::cast, {transposed}, graph.node(read).attrs);
        new_id[static_cast<std::size_t>(id)] = transposed;
        continue;
      }
    }
    new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
  }
  for (ValueId out : graph.outputs()) result.mark_output(new_id[static_cast<std::size_t>(out)]);
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
