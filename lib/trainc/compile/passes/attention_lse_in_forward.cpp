#include "trainc/compile/passes/attention_lse_in_forward.h"

#include "trainc/compile/passes/keep_for_backward.h"

namespace trainc::ir {

Graph attention_lse_in_forward(const Graph& graph) {
  KeepForBackward rule;
  rule.forward_op = Op::attention;
  rule.gradient_op = Op::attention_grad;
  rule.keeping_op = Op::attention_and_lse;
  rule.reading_op = Op::attention_grad_from_lse;
  // Only bf16 and f16 attention: the fused kernels that keep a log-sum-exp take no other dtype.
  rule.applies = [](const Graph& g, const Node& attention) {
    const TensorType& q = g.type(attention.inputs[0]);
    AttentionLseLayout layout;
    return is_half_precision(q.dtype) &&
           attention_lse_layout(q.shape, g.type(attention.inputs[2]).shape.back(), dtype_bytes(q.dtype), layout);
  };
  // The output: the buffer's first B * T * H * E elements as [B, T, H, E], seen as [B, H, T, E].
  rule.forward_value = [&graph](Graph& result, ValueId kept, const Node& attention) {
    const std::vector<int64_t>& shape = graph.type(attention.inputs[0]).shape;  // [B, H, T, D]
    const int64_t width = graph.type(attention.inputs[2]).shape[3];
    Attributes output_part, time_major, heads_first;
    output_part.ints = {0, 0, shape[0] * shape[1] * shape[2] * width, 1};
    time_major.ints = {shape[0], shape[2], shape[1], width};
    heads_first.ints = {0, 2, 1, 3};
    const ValueId output = result.add(Op::slice, {kept}, output_part);
    return result.add(Op::permute, {result.add(Op::reshape, {output}, time_major)}, heads_first);
  };
  // (q, k, v, grad) -> (q, k, v, kept, grad)
  rule.reading_inputs = [](ValueId kept, const std::vector<ValueId>& in) { return std::vector<ValueId>{in[0], in[1], in[2], kept, in[3]}; };
  return keep_for_backward(graph, rule);
}

}  // namespace trainc::ir
