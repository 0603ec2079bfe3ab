#include "trainc/compile/autodiff/autodiff.h"

#include <cmath>
#include <numeric>
#include <optional>

#include "trainc/compile/optimizations.h"
#include "trainc/compile/passes/cse.h"
#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc {
namespace {

using ir::Attributes;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::ValueId;

// Emits the backward nodes into the joint graph.
class Backward {
 public:
  explicit Backward(Graph& g) : g_(g) {}

  ir::TensorType type(ValueId v) const { return g_.type(v); }  // a copy: adding nodes moves them
  ValueId add(Op op, std::vector<ValueId> in, Attributes attrs = {}) { return g_.add(op, std::move(in), std::move(attrs)); }
  ValueId scalar(double value, DType dtype) {
    Attributes a;
    a.scalar = value;
    a.dtype = dtype;
    return add(Op::constant, {}, a);
  }
  ValueId mul(ValueId a, ValueId b) { return add(Op::mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return add(Op::div, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return add(Op::sub, {a, b}); }
  ValueId neg(ValueId a) { return add(Op::neg, {a}); }
  ValueId times(ValueId a, double k) { return mul(a, scalar(k, type(a).dtype)); }
  ValueId zeros_like(ValueId a) { return scalar(0.0, type(a).dtype); }
  ValueId cast(ValueId v, DType dtype) {
    if (type(v).dtype == dtype) return v;
    Attributes a;
    a.dtype = dtype;
    return add(Op::cast, {v}, a);
  }
  ValueId reshape(ValueId v, std::vector<int64_t> shape) {
    if (type(v).shape == shape) return v;
    Attributes a;
    a.ints = std::move(shape);
    return add(Op::reshape, {v}, a);
  }
  ValueId expand(ValueId v, std::vector<int64_t> shape) {
    if (type(v).shape == shape) return v;
    Attributes a;
    a.ints = std::move(shape);
    return add(Op::expand, {v}, a);
  }
  ValueId sum(ValueId v, std::vector<int64_t> axes, bool keepdim) {
    if (axes.empty()) return v;
    Attributes a;
    a.ints = std::move(axes);
    a.keepdim = keepdim;
    return add(Op::sum, {v}, a);
  }
  // Swaps the last two dimensions.
  ValueId transpose(ValueId v) {
    std::vector<int64_t> order(static_cast<std::size_t>(type(v).rank()));
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[order.size() - 1], order[order.size() - 2]);
    Attributes a;
    a.ints = order;
    return add(Op::permute, {v}, a);
  }
  ValueId matmul(ValueId a, ValueId b) { return add(Op::matmul, {a, b}); }

  // The gradient of a broadcast operand: sums over the dimensions broadcasting added or widened.
  ValueId reduce_to(ValueId grad, const std::vector<int64_t>& shape) {
    const std::vector<int64_t>& from = type(grad).shape;
    if (from == shape) return grad;
    const std::size_t lead = from.size() - shape.size();
    std::vector<int64_t> axes;
    for (std::size_t i = 0; i < from.size(); ++i) {
      if (i < lead || (shape[i - lead] == 1 && from[i] != 1)) axes.push_back(static_cast<int64_t>(i));
    }
    return reshape(sum(grad, axes, false), shape);
  }

  // A reduction's result (or its gradient) with the reduced axes restored as size 1.
  ValueId keep_reduced(ValueId v, const ir::Node& reduction, const ir::TensorType& input) {
    if (reduction.attrs.keepdim) return v;
    std::vector<int64_t> shape = input.shape;
    for (int64_t axis : reduction.attrs.ints) shape[static_cast<std::size_t>(axis < 0 ? axis + input.rank() : axis)] = 1;
    return reshape(v, shape);
  }

 private:
  Graph& g_;
};

bool differentiable_input(Op op, std::size_t index) {
  switch (op) {
    case Op::gt:
    case Op::eq:
    case Op::detach:
    case Op::iota:
    case Op::constant:
    case Op::bernoulli:
      return false;
    case Op::where:
      return index != 0;
    case Op::embedding:
      return index == 0;
    default:
      return true;
  }
}

// The attention gradient, in primitives (for q, k, v of different shapes): recompute the probabilities, then
//   dv = p^T g,  dp = g v^T,  ds = p (dp - rowsum(dp p)),  dq = ds k scale,  dk = ds^T q scale.
std::vector<ValueId> attention_grads(Backward& b, const ir::Node& node, ValueId grad) {
  const DType dtype = b.type(node.inputs[0]).dtype;
  const DType compute = dtype == DType::bf16 || dtype == DType::f16 ? DType::f32 : dtype;
  const ValueId q = b.cast(node.inputs[0], compute);
  const ValueId k = b.cast(node.inputs[1], compute);
  const ValueId v = b.cast(node.inputs[2], compute);
  const ValueId g = b.cast(grad, compute);
  const double scale = node.attrs.scalar != 0.0 ? node.attrs.scalar : 1.0 / std::sqrt(static_cast<double>(b.type(q).shape[3]));
  ValueId scores = b.times(b.matmul(q, b.transpose(k)), scale);
  if (node.attrs.causal) {
    const int64_t t = b.type(scores).shape[2], s = b.type(scores).shape[3];
    Attributes rows, cols;
    rows.ints = {t};
    rows.dtype = DType::i64;
    cols.ints = {s};
    cols.dtype = DType::i64;
    const ValueId offset = b.sub(b.reshape(b.add(Op::iota, {}, cols), {1, s}), b.reshape(b.add(Op::iota, {}, rows), {t, 1}));
    const ValueId future = b.add(Op::gt, {offset, b.scalar(0.0, DType::i64)});
    scores = b.add(Op::where, {future, b.scalar(-INFINITY, compute), scores});
  }
  Attributes last;
  last.ints = {3};
  last.keepdim = true;
  const ValueId exps = b.add(Op::exp, {b.sub(scores, b.add(Op::amax, {scores}, last))});
  const ValueId p = b.div(exps, b.sum(exps, {3}, true));
  const ValueId dv = b.matmul(b.transpose(p), g);
  const ValueId dp = b.matmul(g, b.transpose(v));
  const ValueId ds = b.mul(p, b.sub(dp, b.sum(b.mul(dp, p), {3}, true)));
  const ValueId dq = b.times(b.matmul(ds, k), scale);
  const ValueId dk = b.times(b.matmul(b.transpose(ds), q), scale);
  return {b.cast(dq, dtype), b.cast(dk, dtype), b.cast(dv, dtype)};
}

// A normalization as the import builds it (layer norm; batch norm without running statistics):
//   mean = sum(x, A, keepdim) / N,  c = x - mean,  var = sum(c * c, A, keepdim) / N,
//   rstd = rsqrt(var + eps),  xhat = c * rstd
// where nothing but these nodes reads mean, c, var and rstd. Differentiated op by op, its backward
// walks the rows five times (through c, var and mean: GPT-2's layer norms took 0.21 ms each);
// the closed form needs two sums over the same rows, which fuse into one kernel:
//   dx = rstd * (g - sum(g) / N - xhat * sum(g * xhat) / N)
struct Normalization {
  ValueId x = -1, rstd = -1;
  std::vector<int64_t> axes;
  double count = 0;
};

std::optional<Normalization> match_normalization(const Graph& g, const std::vector<int>& uses, ValueId xhat) {
  const ir::Node& out = g.node(xhat);
  if (out.op != Op::mul) return std::nullopt;
  const auto op_is = [&](ValueId v, Op op) { return g.node(v).op == op; };
  const auto used_once = [&](ValueId v) { return uses[static_cast<std::size_t>(v)] == 1; };
  // sum(v, A, keepdim) / N with N the number of elements A covers: the sum's input, or -1.
  const auto mean_of = [&](ValueId mean, Normalization& n) -> ValueId {
    if (!op_is(mean, Op::div) || !used_once(mean)) return -1;
    const ValueId total = g.node(mean).inputs[0], divisor = g.node(mean).inputs[1];
    if (!op_is(total, Op::sum) || !used_once(total) || !g.node(total).attrs.keepdim || !op_is(divisor, Op::constant)) return -1;
    const ir::TensorType& in = g.type(g.node(total).inputs[0]);
    double count = 1;
    for (int64_t axis : g.node(total).attrs.ints) count *= static_cast<double>(in.shape[static_cast<std::size_t>(axis < 0 ? axis + in.rank() : axis)]);
    if (g.node(divisor).attrs.scalar != count || (!n.axes.empty() && g.node(total).attrs.ints != n.axes)) return -1;
    n.axes = g.node(total).attrs.ints;
    n.count = count;
    return g.node(total).inputs[0];
  };
  for (int side = 0; side < 2; ++side) {
    Normalization n;
    const ValueId centered = out.inputs[static_cast<std::size_t>(side)];
    n.rstd = out.inputs[static_cast<std::size_t>(1 - side)];
    // centered: read by xhat and twice by its square; rstd: only by xhat.
    if (!op_is(centered, Op::sub) || uses[static_cast<std::size_t>(centered)] != 3 || !op_is(n.rstd, Op::rsqrt) || !used_once(n.rstd)) continue;
    const ValueId shifted = g.node(n.rstd).inputs[0];
    if (!op_is(shifted, Op::add) || !used_once(shifted)) continue;
    // eps: a constant, one side or the other (anything else may vary along the row or need a gradient).
    const ValueId left = g.node(shifted).inputs[0], right = g.node(shifted).inputs[1];
    if (op_is(left, Op::constant) == op_is(right, Op::constant)) continue;
    const ValueId variance = op_is(right, Op::constant) ? left : right;
    const ValueId square = mean_of(variance, n);
    if (square < 0 || !op_is(square, Op::mul) || !used_once(square) || g.node(square).inputs[0] != centered || g.node(square).inputs[1] != centered) {
      continue;
    }
    n.x = g.node(centered).inputs[0];
    if (mean_of(g.node(centered).inputs[1], n) != n.x || g.type(n.x).shape != g.type(xhat).shape) continue;
    return n;
  }
  return std::nullopt;
}

ValueId normalization_grad(Backward& b, const Normalization& n, ValueId xhat, ValueId grad) {
  const DType dtype = b.type(grad).dtype;
  const ValueId mean_grad = b.div(b.sum(grad, n.axes, true), b.scalar(n.count, dtype));
  const ValueId mean_grad_xhat = b.div(b.sum(b.mul(grad, xhat), n.axes, true), b.scalar(n.count, dtype));
  return b.mul(b.sub(b.sub(grad, mean_grad), b.mul(xhat, mean_grad_xhat)), n.rstd);
}

// matmul's gradients. A weight shared across batch dimensions ([..., m, k] x [k, n]) gets one
// flattened matmul instead of a batched one summed afterwards.
std::vector<ValueId> matmul_grads(Backward& b, ValueId a, ValueId w, ValueId grad, bool need_a, bool need_w) {
  ValueId ga = -1, gw = -1;
  if (need_a) ga = b.reduce_to(b.matmul(grad, b.transpose(w)), b.type(a).shape);
  if (need_w) {
    const ir::TensorType& ta = b.type(a);
    if (b.type(w).rank() == 2 && ta.rank() > 2) {
      const int64_t k = ta.shape.back();
      const int64_t n = b.type(grad).shape.back();
      const ValueId flat_a = b.reshape(a, {ta.numel() / k, k});
      const ValueId flat_g = b.reshape(grad, {ta.numel() / k, n});
      gw = b.matmul(b.transpose(flat_a), flat_g);
    } else {
      gw = b.reduce_to(b.matmul(b.transpose(a), grad), b.type(w).shape);
    }
  }
  return {ga, gw};
}

// The vector-Jacobian product of one node: the gradient of each input (-1: none needed).
std::vector<ValueId> input_grads(Backward& b, ValueId id, const ir::Node& node, ValueId g, const std::vector<bool>& need) {
  const auto in = [&](std::size_t i) { return node.inputs[i]; };
  const auto shape = [&](std::size_t i) { return b.type(node.inputs[i]).shape; };
  const ValueId y = id;
  switch (node.op) {
    case Op::neg: return {b.neg(g)};
    case Op::exp: return {b.mul(g, y)};
    case Op::log: return {b.div(g, in(0))};
    case Op::tanh: return {b.mul(g, b.sub(b.scalar(1.0, b.type(y).dtype), b.mul(y, y)))};
    case Op::erf: {
      const ValueId x = in(0);
      return {b.mul(b.times(g, 2.0 / std::sqrt(M_PI)), b.add(Op::exp, {b.neg(b.mul(x, x))}))};
    }
    case Op::sqrt: return {b.div(g, b.times(y, 2.0))};
    case Op::rsqrt: return {b.mul(b.times(g, -0.5), b.mul(b.mul(y, y), y))};
    case Op::reciprocal: return {b.neg(b.mul(g, b.mul(y, y)))};
    case Op::relu: return {b.add(Op::where, {b.add(Op::gt, {in(0), b.zeros_like(in(0))}), g, b.zeros_like(g)})};
    case Op::sigmoid: return {b.mul(b.mul(g, y), b.sub(b.scalar(1.0, b.type(y).dtype), y))};
    case Op::cast: return {b.cast(g, b.type(in(0)).dtype)};
    case Op::add: return {b.reduce_to(g, shape(0)), b.reduce_to(g, shape(1))};
    case Op::sub: return {b.reduce_to(g, shape(0)), need[1] ? b.reduce_to(b.neg(g), shape(1)) : -1};
    case Op::mul:
      return {need[0] ? b.reduce_to(b.mul(g, in(1)), shape(0)) : -1, need[1] ? b.reduce_to(b.mul(g, in(0)), shape(1)) : -1};
    case Op::div:
      return {need[0] ? b.reduce_to(b.div(g, in(1)), shape(0)) : -1,
              need[1] ? b.reduce_to(b.neg(b.div(b.mul(g, y), in(1))), shape(1)) : -1};
    case Op::pow: {
      const ValueId base = in(0), exponent = in(1);
      ValueId ga = -1, ge = -1;
      if (need[0]) {
        const ValueId lowered = b.add(Op::pow, {base, b.sub(exponent, b.scalar(1.0, b.type(exponent).dtype))});
        ga = b.reduce_to(b.mul(b.mul(g, exponent), lowered), shape(0));
      }
      if (need[1]) ge = b.reduce_to(b.mul(b.mul(g, y), b.add(Op::log, {base})), shape(1));
      return {ga, ge};
    }
    case Op::maximum: {
      const ValueId half = b.times(g, 0.5);
      const ValueId tie = b.add(Op::eq, {in(0), in(1)});
      const auto share = [&](ValueId winner, ValueId loser) {
        return b.add(Op::where, {b.add(Op::gt, {winner, loser}), g, b.add(Op::where, {tie, half, b.zeros_like(g)})});
      };
      return {need[0] ? b.reduce_to(share(in(0), in(1)), shape(0)) : -1, need[1] ? b.reduce_to(share(in(1), in(0)), shape(1)) : -1};
    }
    case Op::where:
      return {-1, need[1] ? b.reduce_to(b.add(Op::where, {in(0), g, b.zeros_like(g)}), shape(1)) : -1,
              need[2] ? b.reduce_to(b.add(Op::where, {in(0), b.zeros_like(g), g}), shape(2)) : -1};
    case Op::sum: return {b.expand(b.keep_reduced(g, node, b.type(in(0))), shape(0))};
    case Op::amax: {
      // Shared evenly between tied maxima, as ATen's amax backward does.
      const ValueId x = in(0);
      const ValueId mask = b.add(Op::eq, {x, b.expand(b.keep_reduced(y, node, b.type(x)), shape(0))});
      Attributes axes;
      axes.ints = node.attrs.ints;
      axes.keepdim = true;
      const ValueId count = b.add(Op::sum, {b.cast(mask, b.type(g).dtype)}, axes);
      const ValueId share = b.div(b.keep_reduced(g, node, b.type(x)), count);
      return {b.add(Op::where, {mask, b.expand(share, shape(0)), b.zeros_like(g)})};
    }
    case Op::reshape: return {b.reshape(g, shape(0))};
    case Op::permute: {
      Attributes inverse;
      inverse.ints.resize(node.attrs.ints.size());
      for (std::size_t i = 0; i < node.attrs.ints.size(); ++i) inverse.ints[static_cast<std::size_t>(node.attrs.ints[i])] = static_cast<int64_t>(i);
      return {b.add(Op::permute, {g}, inverse)};
    }
    case Op::expand: return {b.reduce_to(g, shape(0))};
    case Op::slice: {
      Attributes a;
      a.ints = node.attrs.ints;
      for (int64_t size : shape(0)) a.ints.push_back(size);
      return {b.add(Op::slice_backward, {g}, a)};
    }
    case Op::concat: {
      std::vector<ValueId> grads;
      int64_t start = 0;
      const int64_t dim = node.attrs.ints[0] < 0 ? node.attrs.ints[0] + b.type(y).rank() : node.attrs.ints[0];
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        const int64_t size = shape(i)[static_cast<std::size_t>(dim)];
        Attributes a;
        a.ints = {dim, start, start + size, 1};
        grads.push_back(need[i] ? b.add(Op::slice, {g}, a) : -1);
        start += size;
      }
      return grads;
    }
    case Op::matmul: return matmul_grads(b, in(0), in(1), g, need[0], need[1]);
    case Op::matmul_bias: {
      std::vector<ValueId> grads = matmul_grads(b, in(0), in(1), g, need[0], need[1]);
      grads.push_back(need[2] ? b.reduce_to(g, shape(2)) : -1);
      return grads;
    }
    case Op::embedding: {
      Attributes vocab;
      vocab.ints = {shape(0)[0]};
      return {b.add(Op::embedding_grad, {g, in(1)}, vocab), -1};
    }
    case Op::attention: {
      // Self-attention (q, k, v and the gradient of one shape): one library call that recomputes
      // the attention and differentiates it (flash or memory-efficient kernels on a GPU), never
      // materializing the [time, time] probabilities the primitive rule below needs.
      const ir::TensorType q = b.type(in(0));
      if (!(b.type(in(1)) == q && b.type(in(2)) == q && b.type(g) == q)) return attention_grads(b, node, g);
      const ValueId stacked = b.add(Op::attention_grad, {in(0), in(1), in(2), g}, node.attrs);
      std::vector<ValueId> grads;
      for (int64_t i = 0; i < 3; ++i) {
        Attributes one;
        one.ints = {0, i, i + 1, 1};
        grads.push_back(b.reshape(b.add(Op::slice, {stacked}, one), q.shape));
      }
      return grads;
    }
    case Op::linear_cross_entropy: {
      // One op for both gradients (it recomputes the logits once); each is a view of its part.
      const ir::TensorType x = b.type(in(0)), w = b.type(in(1));
      const ValueId both = b.add(Op::linear_cross_entropy_grad, {in(0), in(1), in(2), g}, node.attrs);
      const int64_t x_size = x.numel();
      Attributes x_part, w_part;
      x_part.ints = {0, 0, x_size, 1};
      w_part.ints = {0, x_size, x_size + w.numel(), 1};
      return {b.reshape(b.add(Op::slice, {both}, x_part), x.shape), b.reshape(b.add(Op::slice, {both}, w_part), w.shape), -1};
    }
    case Op::conv2d:
      return {need[0] ? b.add(Op::conv2d_input_grad, {g, in(0), in(1)}, node.attrs) : -1,
              need[1] ? b.add(Op::conv2d_weight_grad, {g, in(0), in(1)}, node.attrs) : -1};
    case Op::max_pool2d: return {b.add(Op::max_pool2d_grad, {g, in(0), in(1)}, node.attrs), -1};
    case Op::avg_pool2d: return {b.add(Op::avg_pool2d_grad, {g, in(0)}, node.attrs)};
    default:
      throw ir::IrError(std::string("autodiff: no gradient rule for ") + ir::op_name(node.op));
  }
}

}  // namespace

bool has_gradient_rule(Op op) {
  switch (op) {
    case Op::input:
    case Op::slice_backward:
    case Op::embedding_grad:
    case Op::attention_grad:
    case Op::linear_cross_entropy_grad:
    case Op::conv2d_input_grad:
    case Op::conv2d_weight_grad:
    case Op::max_pool2d_indices:
    case Op::max_pool2d_grad:
    case Op::avg_pool2d_grad:
    case Op::sum_to_float:  // these made after differentiation, for the programs only
    case Op::bitcast:
    case Op::linear_cross_entropy_and_dlogits:
    case Op::linear_cross_entropy_grad_from_dlogits:
    case Op::attention_and_lse:
    case Op::attention_grad_from_lse:
    case Op::matmul_to_float:
    case Op::attention_grad_and_bias_sums:
    case Op::attention_lse:
    case Op::embedding_grad_add:
    case Op::matmul_bias_gelu:
    case Op::matmul_gelu_grad:
      return false;
    default:
      return true;
  }
}

JointGraph differentiate(const Graph& forward, const std::vector<bool>& requires_grad) {
  ir::verify(forward);
  Graph g = forward;
  const ValueId loss = forward.outputs().at(0);
  if (g.type(loss).rank() != 0 || !ir::is_floating(g.type(loss).dtype)) throw ir::IrError("autodiff: the loss must be a floating scalar");

  // Which values depend on an input that needs a gradient.
  std::vector<bool> needs(static_cast<std::size_t>(g.size()), false);
  std::vector<int> input_position(static_cast<std::size_t>(g.size()), -1);
  int inputs = 0;
  for (ValueId id = 0; id < g.size(); ++id) {
    const ir::Node& node = g.node(id);
    if (node.op == Op::input) {
      input_position[static_cast<std::size_t>(id)] = inputs;
      needs[static_cast<std::size_t>(id)] = requires_grad.at(static_cast<std::size_t>(inputs++)) && ir::is_floating(node.type.dtype);
      continue;
    }
    if (!ir::is_floating(node.type.dtype)) continue;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      if (needs[static_cast<std::size_t>(node.inputs[i])] && differentiable_input(node.op, i)) needs[static_cast<std::size_t>(id)] = true;
    }
  }
  if (static_cast<std::size_t>(inputs) != requires_grad.size()) throw ir::IrError("autodiff: one requires_grad flag per input");

  // Uses within the forward graph, for the normalizations' closed-form gradients.
  const bool closed_form_normalizations = optimization_enabled(Optimization::normalization_grad);
  const std::vector<int> uses = ir::use_counts(forward);

  JointGraph joint;
  joint.forward_outputs = static_cast<int>(forward.outputs().size());
  Backward b(g);
  const ValueId seed = g.add_input("loss_grad", {g.type(loss).dtype, {}});
  std::vector<ValueId> grad(static_cast<std::size_t>(g.size()), -1);
  grad[static_cast<std::size_t>(loss)] = seed;
  for (ValueId id = loss; id >= 0; --id) {
    const ValueId g_out = grad[static_cast<std::size_t>(id)];
    const ir::Node node = g.node(id);  // a copy: adding nodes may reallocate
    if (g_out < 0 || node.op == Op::input || !needs[static_cast<std::size_t>(id)]) continue;
    // A normalization's x gets its gradient in closed form; mean, var and rstd then get none.
    if (const std::optional<Normalization> normalization =
            closed_form_normalizations ? match_normalization(forward, uses, id) : std::nullopt) {
      if (needs[static_cast<std::size_t>(normalization->x)]) {
        const ValueId gx = normalization_grad(b, *normalization, id, g_out);
        ValueId& acc = grad[static_cast<std::size_t>(normalization->x)];
        acc = acc < 0 ? gx : b.add(Op::add, {acc, gx});
      }
      continue;
    }
    std::vector<bool> need;
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      need.push_back(needs[static_cast<std::size_t>(node.inputs[i])] && differentiable_input(node.op, i));
    }
    const std::vector<ValueId> grads = input_grads(b, id, node, g_out, need);
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      if (!need[i] || i >= grads.size() || grads[i] < 0) continue;
      ValueId& acc = grad[static_cast<std::size_t>(node.inputs[i])];
      acc = acc < 0 ? grads[i] : b.add(Op::add, {acc, grads[i]});
    }
  }
  for (ValueId id = 0; id < static_cast<ValueId>(input_position.size()); ++id) {
    if (input_position[static_cast<std::size_t>(id)] < 0 || !needs[static_cast<std::size_t>(id)]) continue;
    if (grad[static_cast<std::size_t>(id)] < 0) continue;
    joint.gradient_inputs.push_back(input_position[static_cast<std::size_t>(id)]);
    g.mark_output(grad[static_cast<std::size_t>(id)]);
  }
  joint.graph = ir::eliminate_dead_code(ir::eliminate_common_subexpressions(g));
  ir::verify(joint.graph);
  return joint;
}

}  // namespace trainc
