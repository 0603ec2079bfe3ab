#include "trainc/compile/passes/sums_of_widened.h"

#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph sums_of_widened(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    // A leading sum of a bf16 value, rounded to bf16 and then widened (a bias gradient under
    // autocast): the float32 sum itself, as it was before the rounding.
    if (node.op == Op::cast && node.type.dtype == DType::f32) {
      const Node& sum = graph.node(node.inputs[0]);
      if (sum.op == Op::sum && !trailing_split(graph, sum) && uses[static_cast<std::size_t>(node.inputs[0])] == 1 &&
          is_half_precision(graph.type(sum.inputs[0]).dtype)) {
        return result.add(Op::sum_to_float, {new_id[static_cast<std::size_t>(sum.inputs[0])]}, sum.attrs);
      }
    }
    // Only the sums the scheduler leaves to ATen: a kernel's reduction casts as it reads anyway.
    if (node.op == Op::sum && !trailing_split(graph, node)) {
      const Node& input = graph.node(node.inputs[0]);
      const bool widened = input.op == Op::cast && input.type.dtype == DType::f32 && is_half_precision(graph.type(input.inputs[0]).dtype);
      if (widened) return result.add(Op::sum_to_float, {new_id[static_cast<std::size_t>(input.inputs[0])]}, node.attrs);
    }
    return -1;
  });
}

}  // namespace trainc::ir
