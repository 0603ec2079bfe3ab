#include "trainc/compile/passes/attention_lse_in_forward.h"

#include <map>
#include <tuple>

#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// An attention is known by its operands and attributes.
using AttentionKey = std::tuple<ValueId, ValueId, ValueId, double, bool>;

AttentionKey key_of(const Node& node) { return {node.inputs[0], node.inputs[1], node.inputs[2], node.attrs.scalar, node.attrs.causal}; }

// Only bf16 and f16 attention: the fused kernels that keep a log-sum-exp take no other dtype.
bool fits(const Graph& graph, const Node& attention) {
  const TensorType& q = graph.type(attention.inputs[0]);
  if (q.dtype != DType::bf16 && q.dtype != DType::f16) return false;
  AttentionLseLayout layout;
  return attention_lse_layout(q.shape, graph.type(attention.inputs[2]).shape.back(), dtype_bytes(q.dtype), layout);
}

}  // namespace

Graph attention_lse_in_forward(const Graph& graph) {
  std::map<AttentionKey, ValueId> differentiated;  // an attention's key -> its packed buffer (-1 until made)
  for (const Node& node : graph.nodes()) {
    if (node.op == Op::attention_grad && fits(graph, node)) differentiated.emplace(key_of(node), -1);
  }
  if (differentiated.empty()) return graph;

  Graph result;
  std::vector<ValueId> new_id(static_cast<std::size_t>(graph.size()), -1);
  const auto mapped = [&](ValueId id) { return new_id[static_cast<std::size_t>(id)]; };
  for (ValueId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    const auto found = node.op == Op::attention || node.op == Op::attention_grad ? differentiated.find(key_of(node)) : differentiated.end();
    if (found == differentiated.end()) {
      new_id[static_cast<std::size_t>(id)] = copy_node(result, node, new_id);
      continue;
    }
    const ValueId q = mapped(node.inputs[0]), k = mapped(node.inputs[1]), v = mapped(node.inputs[2]);
    if (found->second < 0) found->second = result.add(Op::attention_and_lse, {q, k, v}, node.attrs);
    if (node.op == Op::attention_grad) {
      new_id[static_cast<std::size_t>(id)] = result.add(Op::attention_grad_from_lse, {q, k, v, found->second, mapped(node.inputs[3])}, node.attrs);
      continue;
    }
    const std::vector<int64_t>& shape = result.type(q).shape;  // [B, H, T, D]
    const int64_t width = result.type(v).shape[3];
    Attributes output_part, time_major, heads_first;
    output_part.ints = {0, 0, shape[0] * shape[1] * shape[2] * width, 1};
    time_major.ints = {shape[0], shape[2], shape[1], width};
    heads_first.ints = {0, 2, 1, 3};
    const ValueId output = result.add(Op::slice, {found->second}, output_part);
    new_id[static_cast<std::size_t>(id)] = result.add(Op::permute, {result.add(Op::reshape, {output}, time_major)}, heads_first);
  }
  for (ValueId out : graph.outputs()) result.mark_output(mapped(out));
  return eliminate_dead_code(result);
}

}  // namespace trainc::ir
