#include "trainc/compile/runtime/parameter_casts.h"

#include <algorithm>
#include <map>

#include "trainc/compat/torch_compat.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/cast_kernel.h"
#include "trainc/compile/runtime/parameter_shadows.h"

namespace trainc {
namespace {

// A cast this small may start early whatever its lifetime (GPT-2's largest bias: 12 KB).
constexpr int64_t kSmallCastBytes = int64_t{1} << 20;
// A cast this large runs on the side stream when there is one (the small GPT's embedding table:
// 25.7 MB, 0.024 ms of the forward's first 0.032; its layers' weights: 1.6 MB each).
constexpr int64_t kLargeCastBytes = int64_t{16} << 20;

bool large(const ir::Graph& graph, ir::ValueId cast) {
  return graph.type(cast).numel() * ir::dtype_bytes(graph.type(cast).dtype) >= kLargeCastBytes;
}

// The rows a language model's head pads `cast` to when it is the head's weight, else 0.
int64_t head_padded_rows(const ir::Graph& graph, ir::ValueId cast) {
  for (ir::ValueId id = cast + 1; id < graph.size(); ++id) {
    const ir::Node& node = graph.node(id);
    const bool head = node.op == ir::Op::linear_cross_entropy || node.op == ir::Op::linear_cross_entropy_and_dlogits;
    if (head && node.inputs.size() > 1 && node.inputs[1] == cast) return ir::padded_vocabulary(graph.type(cast).shape[0]);
  }
  return 0;
}

}  // namespace

ParameterCasts::ParameterCasts(const ir::Graph& graph, const std::vector<ir::ValueId>& aten_values)
    : cast_kernel_(optimization_enabled(Optimization::cast_kernel)) {
  for (ir::ValueId id : aten_values) {
    const ir::Node& node = graph.node(id);
    if (node.op != ir::Op::cast || !ir::is_half_precision(node.type.dtype)) continue;
    const bool returned = std::find(graph.outputs().begin(), graph.outputs().end(), id) != graph.outputs().end();
    if (!returned && node.type.numel() * ir::dtype_bytes(node.type.dtype) > kSmallCastBytes) continue;
    Cast cast{id, node.inputs[0], {}};
    // Permutes and reshapes of a contiguous input keep its elements dense, in its memory order.
    while (graph.node(cast.input).op == ir::Op::permute || graph.node(cast.input).op == ir::Op::reshape) {
      cast.views.push_back(cast.input);
      cast.input = graph.node(cast.input).inputs[0];
    }
    if (graph.node(cast.input).op != ir::Op::input || graph.type(cast.input).dtype != ir::DType::f32) continue;
    std::reverse(cast.views.begin(), cast.views.end());
    if (cast.views.empty() && node.type.dtype == ir::DType::bf16) cast.padded_rows = head_padded_rows(graph, id);
    casts_.push_back(std::move(cast));
  }
}

std::vector<ir::ValueId> ParameterCasts::large_casts(const ir::Graph& graph) const {
  std::vector<ir::ValueId> values;
  for (const Cast& cast : casts_) {
    if (large(graph, cast.value) && cast.views.empty()) values.push_back(cast.value);
  }
  return values;
}

std::vector<ir::ValueId> ParameterCasts::run(const ir::Graph& graph, std::vector<at::Tensor>& values, at::Device device, SideStream* side,
                                             int side_mark, std::vector<at::Tensor>* side_sources) const {
  struct Group {
    std::vector<at::Tensor> sources, destinations;
    std::vector<const Cast*> casts;
  };
  // One multi-tensor copy per target dtype and stream: it takes its kernel from its first
  // destination's. Each destination is made on the stream that writes it.
  std::map<std::pair<bool, ir::DType>, Group> groups;  // (on the side stream, dtype)
  // Parameters the optimizer keeps bf16 shadows of: the shadow, cast only when stale.
  Group shadowed;
  std::vector<int64_t> padded_rows;
  ParameterShadows& registry = ParameterShadows::instance();
  for (const Cast& cast : casts_) {
    const at::Tensor& source = values[static_cast<std::size_t>(cast.input)];
    if (!source.is_contiguous()) continue;
    if (graph.type(cast.value).dtype == ir::DType::bf16 && registry.tracked(source)) {
      shadowed.sources.push_back(source);
      shadowed.casts.push_back(&cast);
      padded_rows.push_back(cast.padded_rows);
      continue;
    }
    const ir::DType dtype = graph.type(cast.value).dtype;
    Group& group = groups[{side != nullptr && large(graph, cast.value) && cast.views.empty(), dtype}];
    group.sources.push_back(source);
    group.casts.push_back(&cast);
  }
  std::vector<ir::ValueId> computed;
  const auto take = [&](Group& group) {
    for (std::size_t i = 0; i < group.casts.size(); ++i) {
      at::Tensor result = group.destinations[i];
      for (ir::ValueId view : group.casts[i]->views) result = ir::execute_node(graph.node(view), {result}, device);
      values[static_cast<std::size_t>(group.casts[i]->value)] = result;
      computed.push_back(group.casts[i]->value);
    }
  };
  if (!shadowed.casts.empty()) {
    shadowed.destinations = registry.shadows(shadowed.sources, padded_rows);
    for (std::size_t i = 0; i < shadowed.destinations.size(); ++i) {
      // Tracked when asked above, so only a tracking reset meanwhile leaves one out: cast as usual.
      if (!shadowed.destinations[i].defined()) shadowed.destinations[i] = shadowed.sources[i].to(at::kBFloat16);
    }
    take(shadowed);
  }
  // The main stream's first (false sorts first), the side stream's after them: a side copy starts
  // after what the main stream queued before it, so the first layers' casts have the GPU to
  // themselves. Queued the other way round, on the small GPT, the main stream's copy (3.2M
  // elements) started 12 us after the table's and took 26 us beside it, and the forward began 40 us
  // into the step; the table's is read only at the forward's end.
  for (auto& [stream_and_dtype, group] : groups) {
    const bool on_side = stream_and_dtype.first;
    const at::ScalarType dtype = ir::to_scalar_type(stream_and_dtype.second);
    const auto copy = [&] {
      for (const at::Tensor& source : group.sources) group.destinations.push_back(at::empty(source.sizes(), source.options().dtype(dtype)));
      if (cast_kernel_ && bf16_cast_kernel_takes(group.destinations, group.sources)) {
        bf16_cast_kernel(group.destinations, group.sources);
      } else {
        foreach_copy_(group.destinations, group.sources);
      }
    };
    if (on_side) {
      side->run(copy);
      if (side_sources != nullptr) side_sources->insert(side_sources->end(), group.sources.begin(), group.sources.end());
    } else {
      copy();
    }
    take(group);
  }
  // The caller waits for the mark whether or not a large cast ran (its input may not have been contiguous).
  if (side != nullptr) side->set_mark(side_mark);
  return computed;
}

}  // namespace trainc
