#include "trainc/compile/passes/gelu_epilogue.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

bool is_constant(const Graph& g, ValueId id, double value) {
  const Node& node = g.node(id);
  return node.op == Op::constant && g.type(id).rank() == 0 && std::abs(node.attrs.scalar - value) <= 1e-12 * std::max(1.0, std::abs(value));
}

// The other operand of `id` when it is `op` with the constant `value` on either side.
std::optional<ValueId> with_constant(const Graph& g, ValueId id, Op op, double value) {
  const Node& node = g.node(id);
  if (node.op != op) return std::nullopt;
  if (is_constant(g, node.inputs[1], value)) return node.inputs[0];
  if (is_constant(g, node.inputs[0], value)) return node.inputs[1];
  return std::nullopt;
}

// Whether `id` is x * x * x, as (x * x) * x in either order.
bool is_cube(const Graph& g, ValueId id, ValueId x) {
  const Node& node = g.node(id);
  if (node.op != Op::mul) return false;
  const auto square = [&](ValueId s) {
    const Node& m = g.node(s);
    return m.op == Op::mul && m.inputs[0] == x && m.inputs[1] == x;
  };
  return (square(node.inputs[0]) && node.inputs[1] == x) || (square(node.inputs[1]) && node.inputs[0] == x);
}

// For `h` = cast(x/2 * (tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) + 1), bf16 or f16) with
// x = cast(y, f32) and y a matmul_bias of h's dtype: y. Otherwise -1.
ValueId linear_under_gelu(const Graph& g, ValueId h) {
  const Node& narrow = g.node(h);
  if (narrow.op != Op::cast || !is_half_precision(narrow.type.dtype)) return -1;
  const Node& product = g.node(narrow.inputs[0]);
  if (product.op != Op::mul) return -1;
  for (int order = 0; order < 2; ++order) {
    const std::optional<ValueId> x = with_constant(g, product.inputs[order], Op::mul, 0.5);
    const std::optional<ValueId> t = with_constant(g, product.inputs[1 - order], Op::add, 1.0);
    if (!x || !t || g.node(*t).op != Op::tanh) continue;
    const std::optional<ValueId> sum = with_constant(g, g.node(*t).inputs[0], Op::mul, std::sqrt(2.0 / M_PI));
    if (!sum || g.node(*sum).op != Op::add) continue;
    const Node& added = g.node(*sum);
    for (int side = 0; side < 2; ++side) {
      if (added.inputs[side] != *x) continue;
      const std::optional<ValueId> cube = with_constant(g, added.inputs[1 - side], Op::mul, 0.044715);
      if (!cube || !is_cube(g, *cube, *x)) continue;
      const Node& widen = g.node(*x);
      if (widen.op != Op::cast || widen.type.dtype != DType::f32) return -1;
      const ValueId y = widen.inputs[0];
      const Node& linear = g.node(y);
      if (linear.op != Op::matmul_bias || g.type(y).dtype != narrow.type.dtype || g.type(linear.inputs[1]).rank() != 2) return -1;
      // cuBLASLt's epilogue takes rows of whole 16-byte groups (8 bf16): other widths would run
      // ATen's product and GELU op by op, slower than no pass.
      const std::vector<int64_t>& weight = g.type(linear.inputs[1]).shape;
      if (weight[0] % 8 != 0 || weight[1] % 8 != 0) return -1;
      return y;
    }
  }
  return -1;
}

}  // namespace

Graph gelu_epilogue(const Graph& graph) {
  std::map<ValueId, ValueId> gelu_of;  // y -> h
  for (ValueId id = 0; id < graph.size(); ++id) {
    const ValueId y = linear_under_gelu(graph, id);
    if (y >= 0) gelu_of.emplace(y, id);
  }
  if (gelu_of.empty()) return graph;
  std::map<ValueId, ValueId> activation;  // h -> its half of the op's value, in the result
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const auto linear = gelu_of.find(id);
    if (linear == gelu_of.end()) {
      const auto made = activation.find(id);
      return made == activation.end() ? -1 : made->second;
    }
    std::vector<ValueId> inputs;
    for (ValueId input : graph.node(id).inputs) inputs.push_back(new_id[static_cast<std::size_t>(input)]);
    const ValueId packed = result.add(Op::matmul_bias_gelu, inputs);
    const auto half = [&](int64_t which) {
      Attributes range;
      range.ints = {0, which, which + 1, 1};
      Attributes shape;
      shape.ints = graph.type(id).shape;
      return result.add(Op::reshape, {result.add(Op::slice, {packed}, range)}, shape);
    };
    activation[linear->second] = half(0);
    return half(1);
  });
}

}  // namespace trainc::ir
