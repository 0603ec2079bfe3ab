#include "trainc/compile/passes/attention_bias_sums.h"

#include <map>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// The attention_grad_from_lse whose part `part` the value `id` views as [B, T, H * D], or -1.
ValueId stack_part_of(const Graph& graph, ValueId id, int64_t part) {
  const Node& merged = graph.node(id);
  if (merged.op != Op::reshape || merged.type.rank() != 3) return -1;
  const Node& time_major = graph.node(merged.inputs[0]);
  if (time_major.op != Op::permute || time_major.attrs.ints != std::vector<int64_t>{0, 2, 1, 3}) return -1;
  const Node& dropped = graph.node(time_major.inputs[0]);
  if (dropped.op != Op::reshape || dropped.type.rank() != 4) return -1;
  const Node& slice = graph.node(dropped.inputs[0]);
  if (slice.op != Op::slice || slice.attrs.ints != std::vector<int64_t>{0, part, part + 1, 1}) return -1;
  const ValueId stack = slice.inputs[0];
  if (graph.node(stack).op != Op::attention_grad_from_lse) return -1;
  const std::vector<int64_t>& shape = graph.type(stack).shape;  // [3, B, H, T, D]
  const std::vector<int64_t> part_shape = {shape[1], shape[2], shape[3], shape[4]};
  const std::vector<int64_t> rows_shape = {shape[1], shape[3], shape[2] * shape[4]};
  return dropped.type.shape == part_shape && merged.type.shape == rows_shape ? stack : -1;
}

// The attention_grad_from_lse whose stack `sum` sums over its B * T rows, or -1.
ValueId summed_stack(const Graph& graph, const Node& sum) {
  if (sum.op != Op::sum_to_float || sum.attrs.keepdim || graph.type(sum.inputs[0]).rank() != 3) return -1;
  std::vector<int64_t> axes = sum.attrs.ints;
  for (int64_t& axis : axes) axis = axis < 0 ? axis + 3 : axis;
  if (axes != std::vector<int64_t>{0, 1} && axes != std::vector<int64_t>{1, 0}) return -1;
  const Node& concat = graph.node(sum.inputs[0]);
  if (concat.op != Op::concat || concat.inputs.size() != 3 || (concat.attrs.ints[0] != 2 && concat.attrs.ints[0] != -1)) return -1;
  const ValueId stack = stack_part_of(graph, concat.inputs[0], 0);
  for (int64_t part = 1; part < 3; ++part) {
    if (stack_part_of(graph, concat.inputs[static_cast<std::size_t>(part)], part) != stack) return -1;
  }
  return stack;
}

}  // namespace

Graph attention_bias_sums(const Graph& graph) {
  std::map<ValueId, ValueId> sum_of_stack;  // attention_grad_from_lse -> the one sum taken over its stack
  for (ValueId id = 0; id < graph.size(); ++id) {
    const ValueId stack = summed_stack(graph, graph.node(id));
    if (stack >= 0) sum_of_stack.emplace(stack, id);
  }
  std::map<ValueId, ValueId> packed_of_sum;  // the sum -> the new op's buffer (in the result)
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    const auto found = sum_of_stack.find(id);
    if (found != sum_of_stack.end()) {
      std::vector<ValueId> inputs;
      for (ValueId in : node.inputs) inputs.push_back(new_id[static_cast<std::size_t>(in)]);
      const ValueId packed = result.add(Op::attention_grad_and_bias_sums, inputs, node.attrs);
      packed_of_sum[found->second] = packed;
      // The stack: the buffer's first 3 * B * H * T * D elements, [B, T, 3, H, D] seen as [3, B, H, T, D].
      const std::vector<int64_t>& shape = node.type.shape;
      Attributes grads_part, time_major, parts_first;
      grads_part.ints = {0, 0, node.type.numel(), 1};
      time_major.ints = {shape[1], shape[3], 3, shape[2], shape[4]};
      parts_first.ints = {2, 0, 3, 1, 4};
      const ValueId grads = result.add(Op::slice, {packed}, grads_part);
      return result.add(Op::permute, {result.add(Op::reshape, {grads}, time_major)}, parts_first);
    }
    const auto sum = packed_of_sum.find(id);
    if (sum == packed_of_sum.end()) return -1;
    // The sums: the buffer's float32 part from the layout's offset.
    const TensorType& q = result.type(result.node(sum->second).inputs[0]);
    AttentionGradSumsLayout layout;
    attention_grad_sums_layout(q.shape, dtype_bytes(q.dtype), layout);  // holds: the op's shape rule checked it
    Attributes sums_part, as_float;
    sums_part.ints = {0, layout.sums_offset, layout.sums_offset + layout.sums_elements, 1};
    as_float.dtype = DType::f32;
    return result.add(Op::bitcast, {result.add(Op::slice, {sum->second}, sums_part)}, as_float);
  });
}

}  // namespace trainc::ir
