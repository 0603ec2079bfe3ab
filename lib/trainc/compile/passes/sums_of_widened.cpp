#include "trainc/compile/passes/sums_of_widened.h"

#include <set>

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// Whether a sum's axes are its input's trailing dimensions (a generated kernel's reduction, which
// reads the cast inside the kernel anyway).
bool over_trailing_dims(const Graph& graph, const Node& sum) {
  const auto rank = static_cast<int64_t>(graph.type(sum.inputs[0]).rank());
  std::set<int64_t> axes;
  for (int64_t axis : sum.attrs.ints) axes.insert(axis < 0 ? axis + rank : axis);
  return !axes.empty() && *axes.begin() == rank - static_cast<int64_t>(axes.size());
}

}  // namespace

Graph sums_of_widened(const Graph& graph) {
  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::sum && !over_trailing_dims(graph, node)) {
      const Node& cast = graph.node(node.inputs[0]);
      const DType narrow = cast.op == Op::cast ? graph.type(cast.inputs[0]).dtype : DType::f32;
      if (cast.op == Op::cast && cast.type.dtype == DType::f32 && (narrow == DType::bf16 || narrow == DType::f16)) {
        new_id[static_cast<std::size_t>(id)] = result.add(Op::sum_to_float, {new_id[static_cast<std::size_t>(cast.inputs[0])]}, node.attrs);
        continue;
      }
    }
    new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
  }
  for (ValueId out : graph.outputs()) result.mark_output(new_id[static_cast<std::size_t>(out)]);
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
