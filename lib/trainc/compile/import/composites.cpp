// Builders that decompose composite aten ops into IR primitives, so that later stages see (and can
// fuse) every pointwise step and reduction: activations, softmax, normalization, dropout, losses.
// Low-precision inputs compute in float32 inside a decomposition and are cast back at the end, as
// ATen's own kernels do. Attention stays one extern op.
#include <cmath>
#include <optional>

#include "trainc/compile/import/import_context.h"
#include "trainc/compile/optimizations.h"

namespace trainc {
namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;
using Values = std::vector<ValueId>;
namespace jit = torch::jit;


int64_t normalize_dim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

ValueId mul(ImportContext& c, ValueId a, ValueId b) { return c.binary(Op::mul, a, b); }
ValueId add(ImportContext& c, ValueId a, ValueId b) { return c.binary(Op::add, a, b); }
ValueId sub(ImportContext& c, ValueId a, ValueId b) { return c.binary(Op::sub, a, b); }
ValueId times(ImportContext& c, ValueId a, double k) { return mul(c, a, c.scalar(k, c.type(a).dtype)); }
ValueId plus(ImportContext& c, ValueId a, double k) { return add(c, a, c.scalar(k, c.type(a).dtype)); }

// --- activations ---------------------------------------------------------------------------------

// gelu(x) = x/2 (1 + erf(x / sqrt 2)); approximate "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Values gelu(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId x = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  const std::string approximate = n.inputs().size() > 1 ? c.string_arg(arg(n, 1)) : "none";
  ValueId inner;
  if (approximate == "tanh") {
    const ValueId cube = mul(c, mul(c, x, x), x);
    inner = c.add(Op::tanh, {times(c, add(c, x, times(c, cube, 0.044715)), std::sqrt(2.0 / M_PI))});
  } else if (approximate == "none") {
    inner = c.add(Op::erf, {times(c, x, M_SQRT1_2)});
  } else {
    throw Unsupported("gelu approximation '" + approximate + "'");
  }
  return {c.cast(mul(c, times(c, x, 0.5), plus(c, inner, 1.0)), dtype)};
}

Values silu(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId x = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  return {c.cast(mul(c, x, c.add(Op::sigmoid, {x})), dtype)};
}

// --- softmax -------------------------------------------------------------------------------------

// softmax and log_softmax over `dim`, shifted by the (gradient-free) maximum for stability.
ValueId softmax(ImportContext& c, ValueId x, int64_t dim, bool log) {
  ir::Attributes axis;
  axis.ints = {dim};
  axis.keepdim = true;
  const ValueId shifted = sub(c, x, c.add(Op::detach, {c.add(Op::amax, {x}, axis)}));
  const ValueId exps = c.add(Op::exp, {shifted});
  const ValueId total = c.sum(exps, {dim}, true);
  return log ? sub(c, shifted, c.add(Op::log, {total})) : c.binary(Op::div, exps, total);
}

// softmax(x, dim, dtype) / _softmax(x, dim, half_to_float).
Builder softmax_op(bool log) {
  return [log](ImportContext& c, const jit::Node& n) -> Values {
    const DType dtype = out_dtype(c, n);
    const ValueId x = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
    const int64_t dim = normalize_dim(c.int_arg(arg(n, 1)), c.type(x).rank());
    return {c.cast(softmax(c, x, dim, log), dtype)};
  };
}

// --- normalization -------------------------------------------------------------------------------

// layer_norm(x, normalized_shape, weight, bias, eps, cudnn_enable).
Values layer_norm(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId x = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  const int64_t rank = c.type(x).rank();
  const auto normalized = static_cast<int64_t>(c.ints_arg(arg(n, 1)).size());
  std::vector<int64_t> axes;
  for (int64_t axis = rank - normalized; axis < rank; ++axis) axes.push_back(axis);
  const ValueId centered = sub(c, x, c.mean(x, axes, true));
  const ValueId variance = c.mean(mul(c, centered, centered), axes, true);
  ValueId y = mul(c, centered, c.add(Op::rsqrt, {plus(c, variance, c.double_arg(arg(n, 4)))}));
  if (!c.is_none(arg(n, 2))) y = mul(c, y, c.cast(c.tensor(arg(n, 2)), c.type(y).dtype));
  if (!c.is_none(arg(n, 3))) y = add(c, y, c.cast(c.tensor(arg(n, 3)), c.type(y).dtype));
  return {c.cast(y, dtype)};
}

// batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled).
// Training normalizes with the batch's statistics and updates the running ones in place (the
// unbiased variance, as ATen does); evaluation normalizes with the running statistics.
Values batch_norm(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId x = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  const DType compute = c.type(x).dtype;
  const std::vector<int64_t>& shape = c.type(x).shape;
  if (shape.size() < 2) throw Unsupported("batch_norm of a rank-" + std::to_string(shape.size()) + " input");
  const int64_t channels = shape[1];
  std::vector<int64_t> axes = {0};
  std::vector<int64_t> channel_shape(shape.size(), 1);
  channel_shape[1] = channels;
  for (std::size_t axis = 2; axis < shape.size(); ++axis) axes.push_back(static_cast<int64_t>(axis));
  const auto per_channel = [&](const jit::Value* value) { return c.reshape(c.cast(c.tensor(value), compute), channel_shape); };
  const bool training = c.bool_arg(arg(n, 5));
  const bool tracked = !c.is_none(arg(n, 3)) && !c.is_none(arg(n, 4));
  ValueId mean, variance;
  if (training) {
    mean = c.mean(x, axes, true);
    const ValueId centered = sub(c, x, mean);
    variance = c.mean(mul(c, centered, centered), axes, true);
    if (tracked) {
      const double momentum = c.double_arg(arg(n, 6));
      const int64_t count = c.type(x).numel() / channels;
      const auto update = [&](const jit::Value* buffer, ValueId batch_value, double correction) {
        const ValueId old = c.tensor(buffer);
        const DType buffer_dtype = c.type(old).dtype;
        const ValueId batch = times(c, c.reshape(c.cast(c.add(Op::detach, {batch_value}), buffer_dtype), {channels}), momentum * correction);
        c.update_buffer(buffer, add(c, times(c, old, 1.0 - momentum), batch));
      };
      update(arg(n, 3), mean, 1.0);
      update(arg(n, 4), variance, count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0);
    }
  } else {
    if (!tracked) throw Unsupported("batch_norm in evaluation without running statistics");
    mean = per_channel(arg(n, 3));
    variance = per_channel(arg(n, 4));
  }
  ValueId y = mul(c, sub(c, x, mean), c.add(Op::rsqrt, {plus(c, variance, c.double_arg(arg(n, 7)))}));
  if (!c.is_none(arg(n, 1))) y = mul(c, y, per_channel(arg(n, 1)));
  if (!c.is_none(arg(n, 2))) y = add(c, y, per_channel(arg(n, 2)));
  return {c.cast(y, dtype)};
}

// --- dropout -------------------------------------------------------------------------------------

// dropout(x, p, train) = x * (bernoulli(1 - p) / (1 - p)), drawn as ATen's CPU kernel draws it.
Values dropout(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  const double p = c.double_arg(arg(n, 1));
  if (!c.bool_arg(arg(n, 2)) || p == 0.0) return {x};
  const ir::TensorType& type = c.type(x);
  if (p >= 1.0) return {mul(c, x, c.scalar(0.0, type.dtype))};
  ir::Attributes draw;
  draw.ints = type.shape;
  draw.dtype = type.dtype;
  draw.scalar = 1.0 - p;
  const ValueId keep = c.add(Op::bernoulli, {}, draw);
  // ATen scales the mask by 1 / (1 - p) in float and rounds it to the mask's dtype. In bf16 and
  // fp16 that rounded factor is exactly the constant 1 / (1 - p) of that dtype, and multiplying by
  // it gives eager's products bit for bit, also where a kernel keeps the factor in float.
  if (type.dtype == DType::bf16 || type.dtype == DType::f16) {
    return {mul(c, x, c.binary(Op::mul, keep, c.scalar(1.0 / (1.0 - p), type.dtype)))};
  }
  return {mul(c, x, c.binary(Op::div, keep, c.scalar(1.0 - p, type.dtype)))};
}

// --- losses --------------------------------------------------------------------------------------

enum class Reduction { none = 0, mean = 1, sum = 2 };

Reduction reduction_arg(ImportContext& c, const jit::Value* value) {
  const int64_t r = c.int_arg(value);
  if (r < 0 || r > 2) throw Unsupported("reduction " + std::to_string(r));
  return static_cast<Reduction>(r);
}

// Each row's loss, masked where its target is ignore_index, then reduced.
ValueId reduce_row_losses(ImportContext& c, ValueId losses, ValueId targets, Reduction reduction, int64_t ignore_index) {
  const DType dtype = c.type(losses).dtype;
  const ValueId valid = c.binary(Op::eq, c.binary(Op::eq, targets, c.scalar(static_cast<double>(ignore_index), DType::i64)),
                                 c.scalar(0.0, DType::b8));
  const ValueId loss = c.add(Op::where, {valid, losses, c.scalar(0.0, dtype)});
  if (reduction == Reduction::none) return loss;
  const ValueId total = c.sum(loss, {0}, false);
  if (reduction == Reduction::sum) return total;
  return c.binary(Op::div, total, c.sum(c.cast(valid, dtype), {0}, false));
}

// Negative log-likelihood of class-index targets over log-probabilities [N, C], with
// ignore_index, and label smoothing when `smoothing` > 0 (cross_entropy's formula).
ValueId class_nll(ImportContext& c, ValueId log_probs, ValueId targets, Reduction reduction, int64_t ignore_index,
                  double smoothing) {
  const ir::TensorType type = c.type(log_probs);
  if (type.rank() != 2) throw Unsupported("class-index losses over inputs of rank " + std::to_string(type.rank()));
  const int64_t rows = type.shape[0], classes = type.shape[1];
  if (c.type(targets).dtype != DType::i64) throw Unsupported("class-probability targets");
  ir::Attributes iota;
  iota.ints = {classes};
  iota.dtype = DType::i64;
  const ValueId flat_targets = c.reshape(targets, {rows});
  const ValueId picked = c.binary(Op::eq, c.reshape(flat_targets, {rows, 1}), c.reshape(c.add(Op::iota, {}, iota), {1, classes}));
  ValueId losses = c.add(Op::neg, {c.sum(c.add(Op::where, {picked, log_probs, c.scalar(0.0, type.dtype)}), {1}, false)});
  if (smoothing > 0.0) {
    const ValueId smooth = c.add(Op::neg, {c.sum(log_probs, {1}, false)});
    losses = add(c, times(c, losses, 1.0 - smoothing), times(c, smooth, smoothing / static_cast<double>(classes)));
  }
  return reduce_row_losses(c, losses, flat_targets, reduction, ignore_index);
}

// A linear layer's logits as cross_entropy reads them: `logits` made by reshapes and at most a
// widening cast (to float32 under autocast) from matmul(x [N, C], permute(weight [V, C])).
struct LinearLogits {
  ValueId x = -1, weight = -1;
};

std::optional<LinearLogits> linear_logits(ImportContext& c, ValueId logits) {
  const ir::Graph& g = c.graph();
  const DType wanted = c.type(logits).dtype;
  ValueId v = logits;
  while (g.node(v).op == Op::reshape || g.node(v).op == Op::cast) {
    if (g.node(v).op == Op::cast && g.node(v).type.dtype != wanted) return std::nullopt;
    v = g.node(v).inputs[0];
  }
  const ir::Node& product = g.node(v);
  if (product.op != Op::matmul || compute_dtype(product.type.dtype) != wanted) return std::nullopt;
  const ValueId x = product.inputs[0];
  // The weight transposed, cast (autocast traces linear as t, to, matmul) or not.
  ValueId transposed = product.inputs[1];
  std::optional<DType> cast_to;
  if (g.node(transposed).op == Op::cast) {
    cast_to = g.node(transposed).type.dtype;
    transposed = g.node(transposed).inputs[0];
  }
  const ir::Node& permute = g.node(transposed);
  if (c.type(x).rank() < 2 || permute.op != Op::permute || permute.attrs.ints != std::vector<int64_t>{1, 0}) return std::nullopt;
  // The loss reads [N, V]: the product's rows, flattened.
  const std::vector<int64_t> shape = c.type(logits).shape;
  if (shape.size() != 2 || shape[1] != product.type.shape.back() || c.type(logits).numel() != product.type.numel()) return std::nullopt;
  const ValueId weight = permute.inputs[0];  // read before adding nodes: that moves them
  const ValueId rows = c.reshape(x, {shape[0], c.type(x).shape.back()});
  return LinearLogits{rows, cast_to ? c.cast(weight, *cast_to) : weight};
}

// cross_entropy_loss(input, target, weight, reduction, ignore_index, label_smoothing).
// Over a linear layer's logits (a language model's head), one linear_cross_entropy op computes the
// layer and the loss together, without every row's float32 logits at once
// (runtime/linear_cross_entropy); the matmul it replaces is then dead.
Values cross_entropy(ImportContext& c, const jit::Node& n) {
  if (!c.is_none(arg(n, 2))) throw Unsupported("class weights");
  const DType dtype = out_dtype(c, n);
  const ValueId logits = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  const double smoothing = n.inputs().size() > 5 ? c.double_arg(arg(n, 5)) : 0.0;
  const ValueId targets = c.tensor(arg(n, 1));
  const Reduction reduction = reduction_arg(c, arg(n, 3));
  const int64_t ignore_index = c.int_arg(arg(n, 4));
  if (const std::optional<LinearLogits> linear = optimization_enabled(Optimization::fused_head) ? linear_logits(c, logits) : std::nullopt;
      linear && c.type(logits).rank() == 2 && c.type(targets).dtype == DType::i64 && c.type(targets).rank() == 1) {
    ir::Attributes attrs;
    attrs.scalar = smoothing;
    attrs.dtype = c.type(logits).dtype;
    const ValueId losses = c.add(Op::linear_cross_entropy, {linear->x, linear->weight, targets}, attrs);
    return {c.cast(reduce_row_losses(c, losses, targets, reduction, ignore_index), dtype)};
  }
  const ValueId log_probs = softmax(c, logits, 1, true);
  return {c.cast(class_nll(c, log_probs, targets, reduction, ignore_index, smoothing), dtype)};
}

// nll_loss(input, target, weight, reduction, ignore_index) and nll_loss_nd.
Values nll_loss(ImportContext& c, const jit::Node& n) {
  if (!c.is_none(arg(n, 2))) throw Unsupported("class weights");
  const DType dtype = out_dtype(c, n);
  const ValueId log_probs = c.cast(c.tensor(arg(n, 0)), compute_dtype(dtype));
  return {c.cast(class_nll(c, log_probs, c.tensor(arg(n, 1)), reduction_arg(c, arg(n, 3)), c.int_arg(arg(n, 4)), 0.0), dtype)};
}

// mse_loss(input, target, reduction).
Values mse_loss(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId diff = sub(c, c.cast(c.tensor(arg(n, 0)), dtype), c.cast(c.tensor(arg(n, 1)), dtype));
  const ValueId squared = mul(c, diff, diff);
  std::vector<int64_t> axes;
  for (int64_t axis = 0; axis < c.type(squared).rank(); ++axis) axes.push_back(axis);
  switch (reduction_arg(c, arg(n, 2))) {
    case Reduction::none: return {squared};
    case Reduction::sum: return {c.sum(squared, axes, false)};
    case Reduction::mean: return {c.mean(squared, axes, false)};
  }
  return {};
}

// --- attention -----------------------------------------------------------------------------------

// scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal[, scale[, enable_gqa]]).
Values attention(ImportContext& c, const jit::Node& n) {
  if (!c.is_none(arg(n, 3))) throw Unsupported("an explicit attention mask");
  if (c.double_arg(arg(n, 4)) != 0.0) throw Unsupported("attention dropout");
  if (n.inputs().size() > 7 && c.bool_arg(arg(n, 7))) throw Unsupported("grouped-query attention");
  const DType dtype = out_dtype(c, n);
  ir::Attributes attrs;
  attrs.causal = c.bool_arg(arg(n, 5));
  if (n.inputs().size() > 6 && !c.is_none(arg(n, 6))) attrs.scalar = c.double_arg(arg(n, 6));
  for (std::size_t i = 0; i < 3; ++i) {
    if (c.type(c.tensor(arg(n, i))).rank() != 4) throw Unsupported("attention over operands that are not [batch, heads, time, dim]");
  }
  return {c.add(Op::attention, {c.cast(c.tensor(arg(n, 0)), dtype), c.cast(c.tensor(arg(n, 1)), dtype), c.cast(c.tensor(arg(n, 2)), dtype)}, attrs)};
}

}  // namespace

void register_composite_ops(BuilderTable& table) {
  table["aten::gelu"] = gelu;
  table["aten::silu"] = silu;
  table["aten::softmax"] = softmax_op(false);
  table["aten::_softmax"] = softmax_op(false);
  table["aten::log_softmax"] = softmax_op(true);
  table["aten::_log_softmax"] = softmax_op(true);
  table["aten::layer_norm"] = layer_norm;
  table["aten::batch_norm"] = batch_norm;
  table["aten::dropout"] = dropout;
  table["aten::cross_entropy_loss"] = cross_entropy;
  table["aten::nll_loss"] = nll_loss;
  table["aten::nll_loss_nd"] = nll_loss;
  table["aten::mse_loss"] = mse_loss;
  table["aten::scaled_dot_product_attention"] = attention;
}

}  // namespace trainc
