#include "trainc/compile/passes/transpose_products.h"

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph transpose_products(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);
  Attributes swap;
  swap.ints = {1, 0};
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    if (node.op != Op::permute || node.attrs.ints != swap.ints) return -1;
    // The product, and the cast between it and the transpose if there is one.
    const ValueId read = node.inputs[0];
    const bool through_cast = graph.node(read).op == Op::cast && uses[static_cast<std::size_t>(read)] == 1;
    const ValueId product_id = through_cast ? graph.node(read).inputs[0] : read;
    const Node& product = graph.node(product_id);
    if (product.op != Op::matmul || uses[static_cast<std::size_t>(product_id)] != 1 || graph.type(product.inputs[0]).rank() != 2 ||
        graph.type(product.inputs[1]).rank() != 2) {
      return -1;
    }
    const ValueId a = new_id[static_cast<std::size_t>(product.inputs[0])];
    const ValueId b = new_id[static_cast<std::size_t>(product.inputs[1])];
    const ValueId transposed = result.add(Op::matmul, {result.add(Op::permute, {b}, swap), result.add(Op::permute, {a}, swap)});
    return through_cast ? result.add(Op::cast, {transposed}, graph.node(read).attrs) : transposed;
  });
}

}  // namespace trainc::ir
