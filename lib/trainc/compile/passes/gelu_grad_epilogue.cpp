#include "trainc/compile/passes/gelu_grad_epilogue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// The most nodes a derivative's expression may have (autodiff's for the tanh GELU has 17).
constexpr std::size_t kMaxExpressionNodes = 64;

// A pointwise float32 expression: its nodes, and its leaves, casts of bf16 or f16 values of the
// expression's shape to float32.
struct Expression {
  std::set<ValueId> nodes;
  std::set<ValueId> leaves;
};

bool is_leaf(const Graph& g, ValueId id, const std::vector<int64_t>& shape) {
  const Node& node = g.node(id);
  return node.op == Op::cast && node.type == TensorType{DType::f32, shape} && is_half_precision(g.type(node.inputs[0]).dtype) &&
         g.type(node.inputs[0]).shape == shape;
}

bool is_pointwise(Op op) {
  switch (op) {
    case Op::neg: case Op::exp: case Op::log: case Op::tanh: case Op::erf: case Op::sqrt: case Op::rsqrt: case Op::reciprocal:
    case Op::sigmoid: case Op::add: case Op::sub: case Op::mul: case Op::div: case Op::pow:
      return true;
    default:
      return false;
  }
}

// Gathers the expression under `id`: pointwise ops of `shape` or of scalars, scalar constants, and
// leaves. False when anything else is met or it grows too large.
bool gather(const Graph& g, ValueId id, const std::vector<int64_t>& shape, Expression& expression) {
  if (expression.nodes.count(id) != 0 || expression.leaves.count(id) != 0) return true;
  if (is_leaf(g, id, shape)) {
    expression.leaves.insert(id);
    return true;
  }
  const Node& node = g.node(id);
  if (node.type.dtype != DType::f32 || (node.type.shape != shape && node.type.rank() != 0)) return false;
  if (node.op != Op::constant && !is_pointwise(node.op)) return false;
  expression.nodes.insert(id);
  if (expression.nodes.size() > kMaxExpressionNodes) return false;
  for (ValueId input : node.inputs) {
    if (!gather(g, input, shape, expression)) return false;
  }
  return true;
}

// The expression's value at one point, in double precision, the leaves given.
double evaluate(const Graph& g, ValueId id, const std::map<ValueId, double>& leaves, std::map<ValueId, double>& known) {
  if (const auto leaf = leaves.find(id); leaf != leaves.end()) return leaf->second;
  if (const auto done = known.find(id); done != known.end()) return done->second;
  const Node& node = g.node(id);
  std::array<double, 2> in{};
  for (std::size_t i = 0; i < node.inputs.size(); ++i) in[i] = evaluate(g, node.inputs[i], leaves, known);
  double value = 0.0;
  switch (node.op) {
    case Op::constant: value = node.attrs.scalar; break;
    case Op::neg: value = -in[0]; break;
    case Op::exp: value = std::exp(in[0]); break;
    case Op::log: value = std::log(in[0]); break;
    case Op::tanh: value = std::tanh(in[0]); break;
    case Op::erf: value = std::erf(in[0]); break;
    case Op::sqrt: value = std::sqrt(in[0]); break;
    case Op::rsqrt: value = 1.0 / std::sqrt(in[0]); break;
    case Op::reciprocal: value = 1.0 / in[0]; break;
    case Op::sigmoid: value = 1.0 / (1.0 + std::exp(-in[0])); break;
    case Op::add: value = in[0] + in[1]; break;
    case Op::sub: value = in[0] - in[1]; break;
    case Op::mul: value = in[0] * in[1]; break;
    case Op::div: value = in[0] / in[1]; break;
    case Op::pow: value = std::pow(in[0], in[1]); break;
    default: throw IrError(std::string("gelu_grad_epilogue: cannot evaluate ") + op_name(node.op));
  }
  known[id] = value;
  return value;
}

// The derivative of GELU's tanh approximation.
double gelu_tanh_derivative(double x) {
  const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// Whether `root` computes g * gelu'(x) with `x` and `g` its leaves: checked at points spread over
// where the tanh bends and where it has flattened, each gradient of its own sign and size.
bool computes_gelu_grad(const Graph& g, ValueId root, ValueId x, ValueId gradient) {
  constexpr std::array<std::array<double, 2>, 8> points = {
      {{-4.7, 0.3}, {-2.9, -1.7}, {-1.3, 2.2}, {-0.45, 0.9}, {0.05, -0.6}, {0.8, 1.4}, {1.9, -2.5}, {5.3, 0.75}}};
  for (const auto& [at, scale] : points) {
    std::map<ValueId, double> known;
    const double value = evaluate(g, root, {{x, at}, {gradient, scale}}, known);
    const double expected = scale * gelu_tanh_derivative(at);
    if (!(std::abs(value - expected) <= 1e-9 * (1.0 + std::abs(expected)))) return false;
  }
  return true;
}

// A match: the cast `dy`'s replacement reads `product`'s operands and `preactivation`.
struct Match {
  ValueId product = -1, preactivation = -1;
};

// Whether `small_layer` calls `type`'s elements, viewed as [rows, width], a small layer.
bool is_small(const SmallLayer& small_layer, const TensorType& type) {
  const int64_t width = type.shape.back();
  return small_layer && small_layer(type.numel() / std::max<int64_t>(width, 1), width);
}

std::optional<Match> match_at(const Graph& g, ValueId dy, const std::vector<int>& uses, const std::vector<std::vector<ValueId>>& readers,
                              const SmallLayer& small_layer) {
  const Node& narrow = g.node(dy);
  if (narrow.op != Op::cast || !is_half_precision(narrow.type.dtype) || narrow.type.rank() < 2) return std::nullopt;
  const std::vector<int64_t>& shape = narrow.type.shape;
  const ValueId root = narrow.inputs[0];
  Expression expression;
  if (g.type(root) != TensorType{DType::f32, shape} || !gather(g, root, shape, expression) || expression.leaves.size() != 2) return std::nullopt;
  const ValueId first = *expression.leaves.begin(), second = *expression.leaves.rbegin();
  for (const auto& [x, gradient] : {std::pair{first, second}, std::pair{second, first}}) {
    if (!computes_gelu_grad(g, root, x, gradient)) continue;
    Match match;
    match.product = g.node(gradient).inputs[0];
    match.preactivation = g.node(x).inputs[0];
    const Node& product = g.node(match.product);
    // The product, in dy's dtype, read by the derivative alone: the gradient's cast and every value
    // of the expression made from it read only inside the expression (the root only by dy), else
    // the product would still be made for the other readers, and made twice.
    if (product.op != Op::matmul || product.type.dtype != narrow.type.dtype || uses[static_cast<std::size_t>(match.product)] != 1) return std::nullopt;
    std::set<ValueId> from_gradient = {gradient};
    for (ValueId id : expression.nodes) {  // in id order, which is the graph's order
      const std::vector<ValueId>& inputs = g.node(id).inputs;
      if (std::any_of(inputs.begin(), inputs.end(), [&](ValueId input) { return from_gradient.count(input) != 0; })) from_gradient.insert(id);
    }
    for (ValueId value : from_gradient) {
      const std::vector<ValueId>& value_readers = readers[static_cast<std::size_t>(value)];
      if (static_cast<int>(value_readers.size()) != uses[static_cast<std::size_t>(value)]) return std::nullopt;  // an output
      for (ValueId reader : value_readers) {
        if (expression.nodes.count(reader) == 0 && !(value == root && reader == dy)) return std::nullopt;
      }
    }
    if (g.type(match.preactivation).dtype != narrow.type.dtype) return std::nullopt;
    const TensorType& weight = g.type(product.inputs[1]);
    if (weight.rank() != 2 || weight.shape[0] % 8 != 0 || weight.shape[1] % 8 != 0) return std::nullopt;  // 16-byte rows
    if (is_small(small_layer, g.type(product.inputs[0]))) return std::nullopt;
    return match;
  }
  return std::nullopt;
}

}  // namespace

Graph gelu_grad_epilogue(const Graph& graph, const SmallLayer& small_layer) {
  const std::vector<int> uses = use_counts(graph);
  std::vector<std::vector<ValueId>> readers(static_cast<std::size_t>(graph.size()));
  for (ValueId id = 0; id < graph.size(); ++id) {
    for (ValueId input : graph.node(id).inputs) readers[static_cast<std::size_t>(input)].push_back(id);
  }
  std::map<ValueId, Match> matches;  // by dy
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (const std::optional<Match> match = match_at(graph, id, uses, readers, small_layer)) matches.emplace(id, *match);
  }
  if (matches.empty()) return graph;
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const auto match = matches.find(id);
    if (match == matches.end()) return -1;
    const Node& product = graph.node(match->second.product);
    const auto renamed = [&](ValueId v) { return new_id[static_cast<std::size_t>(v)]; };
    return result.add(Op::matmul_gelu_grad, {renamed(product.inputs[0]), renamed(product.inputs[1]), renamed(match->second.preactivation)});
  });
}

}  // namespace trainc::ir
