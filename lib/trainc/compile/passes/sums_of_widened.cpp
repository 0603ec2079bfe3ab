#include "trainc/compile/passes/sums_of_widened.h"

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {

Graph sums_of_widened(const Graph& graph) {
  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    // Only the sums the scheduler leaves to ATen: a kernel's reduction casts as it reads anyway.
    if (node.op == Op::sum && !trailing_split(graph, node)) {
      const Node& input = graph.node(node.inputs[0]);
      const bool widened = input.op == Op::cast && input.type.dtype == DType::f32 &&
                           (graph.type(input.inputs[0]).dtype == DType::bf16 || graph.type(input.inputs[0]).dtype == DType::f16);
      if (widened) {
        new_id[static_cast<std::size_t>(id)] = result.add(Op::sum_to_float, {new_id[static_cast<std::size_t>(input.inputs[0])]}, node.attrs);
        continue;
      }
    }
    new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
  }
  for (ValueId out : graph.outputs()) result.mark_output(new_id[static_cast<std::size_t>(out)]);
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
