#include "trainc/compile/runtime/parameter_casts.h"

#include <algorithm>

#include "trainc/compat/torch_compat.h"
#include "trainc/compile/runtime/aten_executor.h"

namespace trainc {

ParameterCasts::ParameterCasts(const ir::Graph& graph, const std::vector<ir::ValueId>& aten_values) {
  for (ir::ValueId id : aten_values) {
    const ir::Node& node = graph.node(id);
    if (node.op != ir::Op::cast || !ir::is_half_precision(node.type.dtype)) continue;
    Cast cast{id, node.inputs[0], {}};
    // Permutes and reshapes of a contiguous input keep its elements dense, in its memory order.
    while (graph.node(cast.input).op == ir::Op::permute || graph.node(cast.input).op == ir::Op::reshape) {
      cast.views.push_back(cast.input);
      cast.input = graph.node(cast.input).inputs[0];
    }
    if (graph.node(cast.input).op != ir::Op::input || graph.type(cast.input).dtype != ir::DType::f32) continue;
    std::reverse(cast.views.begin(), cast.views.end());
    casts_.push_back(std::move(cast));
  }
}

void ParameterCasts::run(const ir::Graph& graph, std::vector<at::Tensor>& values, at::Device device) const {
  std::vector<at::Tensor> sources, destinations;
  std::vector<const Cast*> grouped;
  for (const Cast& cast : casts_) {
    const at::Tensor& source = values[static_cast<std::size_t>(cast.input)];
    if (!source.is_contiguous()) continue;
    sources.push_back(source);
    destinations.push_back(at::empty(source.sizes(), source.options().dtype(ir::to_scalar_type(graph.type(cast.value).dtype))));
    grouped.push_back(&cast);
  }
  if (grouped.empty()) return;
  foreach_copy_(destinations, sources);
  for (std::size_t i = 0; i < grouped.size(); ++i) {
    at::Tensor result = destinations[i];
    for (ir::ValueId view : grouped[i]->views) result = ir::execute_node(graph.node(view), {result}, device);
    values[static_cast<std::size_t>(grouped[i]->value)] = result;
  }
}

}  // namespace trainc
