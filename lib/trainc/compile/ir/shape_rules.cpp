// infer_type: the result type of every op, one rule per kind (and per extern op).
//   unary        same type as the input (cast: attrs.dtype); detach: the value, with no gradient
//   binary       numpy broadcasting; both inputs of one dtype (casts are explicit); gt, eq give b8
//   where        condition b8, branches of one dtype, all three broadcast
//   reduction    attrs.ints are the axes (negative counts from the end); keepdim keeps them as 1
//   reshape      attrs.ints is the new shape, same number of elements
//   permute      attrs.ints is a permutation of the dimensions
//   expand       attrs.ints is the target shape; each input dimension equals it or is 1
//   slice        attrs.ints = {dim, start, end, step} with 0 <= start <= end <= size, step >= 1
//   constant     attrs.ints is the shape, attrs.dtype the dtype
//   matmul       [..., m, k] x [..., k, n] -> [..., m, n], batch dimensions broadcast
//   matmul_bias  matmul plus a bias [n] added before the one rounding (a linear layer, addmm)
//   embedding    weight [vocab, dim] (floating), indices i64 [...] -> [..., dim]
//   attention    q [B, H, T, D], k [B, H, S, D], v [B, H, S, E] -> [B, H, T, E]
//   conv2d       input [N, C, H, W], weight [O, C, kh, kw], attrs.ints = {stride, padding}
//   iota         attrs.ints = {n}, attrs.dtype -> [n] holding 0, 1, ..., n-1
//   bernoulli    attrs.ints is the shape, attrs.dtype the dtype, attrs.scalar P(value is 1)
//   concat       attrs.ints = {dim}; inputs agree in dtype and in every other dimension
//   slice_backward  grad of a slice: attrs.ints = {dim, start, end, step, input sizes...} -> input
//   embedding_grad  (grad [..., dim], indices [...]) with attrs.ints = {vocab} -> [vocab, dim]
//   conv2d_input_grad / conv2d_weight_grad  (grad, input, weight), conv2d's ints -> input / weight
//   max_pool2d_indices  input [N, C, H, W], attrs.ints = {kernel, stride, padding} -> i64 [N, C, H', W'],
//                each window's maximum as an index into its [H * W] plane
//   max_pool2d   (input, its max_pool2d_indices) -> the maxima, [N, C, H', W'] (the indices are kept
//                for the backward, so it does not pool again)
//   max_pool2d_grad  (grad, input, indices) -> input
//   avg_pool2d   attrs.ints = {kernel, stride, padding, count_include_pad}; avg_pool2d_grad (grad, input) -> input
//   linear_cross_entropy  (x [N, C], weight [V, C], targets i64 [N]) -> attrs.dtype [N]: each row's
//                cross-entropy over the logits x @ weight^T, with label smoothing attrs.scalar
//   linear_cross_entropy_grad  (x, weight, targets, grad [N]) -> x's dtype [N * C + V * C]: the
//                gradients of x and of the weight, flattened one after the other
//   sum_to_float  x bf16 or f16, attrs.ints axes and keepdim as a reduction's -> f32: the sum of
//                x accumulated and returned in float32, as sum(cast(x, f32)) without the cast
//   attention_and_lse  (q, k, v) as attention: the output of an attention that also keeps each
//                row's log-sum-exp for its backward, which attention_lse of this output reads
//   attention_lse  (attention_and_lse's output [B, H, T, E]) -> f32 [B, H, T]: that log-sum-exp
//   attention_grad_from_lse  (q, k, v, that output, its attention_lse, grad of the output) -> as
//                attention_grad
//   bitcast      x [n] -> attrs.dtype [n * bytes(x) / bytes(attrs.dtype)]: the same bytes read as
//                another dtype (a view)
//   linear_cross_entropy_and_dlogits  (x, weight, targets) as linear_cross_entropy -> x's dtype
//                [layout.total]: the losses, each row's unscaled gradient over its logits and the
//                weight padded to the layout's P rows, laid out as linear_cross_entropy_layout says
//                (graph.h); linear_cross_entropy_grad_from_dlogits reads the padded weight from it,
//                and its `weight` input only when no rows were appended (else only its shape)
//   linear_cross_entropy_grad_from_dlogits  (that buffer, x, weight, grad [N]) -> x's dtype
//                [N * C + P * C]: x's and the weight's gradients from the saved ones, as
//                linear_cross_entropy_grad lays them out but with the weight's padded to the
//                layout's P rows (the GEMM writes them there; the rows past V are 0); with
//                attrs.ints {0} x's gradient alone [N * C], with {1} the weight's alone [P * C],
//                with {2} the weight's alone in float32 [P * C] (the GEMM's unrounded product)
//   attention_grad_and_bias_sums  as attention_grad_from_lse -> q's dtype [layout.total]: the
//                gradients and their column sums over B * T rows (a fused q-k-v projection's bias
//                gradient), laid out as attention_grad_sums_layout says (graph.h)
//   matmul_to_float  a bf16 or f16 [m, k] x [k, n] -> f32 [m, n]: the product accumulated and
//                returned in float32, as cast(matmul(a, b), f32) without rounding to a's dtype first
//   embedding_grad_add  (base [vocab, dim] floating, grad, indices) as embedding_grad -> its type:
//                cast(base, grad's dtype) + embedding_grad(grad, indices); attrs.ints {vocab, 1}:
//                the same, added into the base's own memory (a base of the result's type, which
//                no other step reads, through views or otherwise: passes/head_weight_grad_to_float)
//   matmul_bias_gelu  (x, w, bias) as matmul_bias, bf16 or f16 -> [2, ...matmul_bias's shape]:
//                [0] GELU (tanh approximation) of [1], the product plus bias (passes/gelu_epilogue)
//   matmul_gelu_grad  (a, w, y) a bf16 or f16 a [..., k] x w [k, n], y of the product's type ->
//                the product's type: gelu'(y) * (a . w), the tanh approximation's derivative
//                (passes/gelu_grad_epilogue)
#include <algorithm>
#include <numeric>
#include <string>

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return TensorType{DType::f32, shape}.str().substr(3); }

void require(bool condition, const std::string& message) {
  if (!condition) throw IrError(message);
}

std::vector<int64_t> broadcast(const std::vector<TensorType>& inputs) {
  std::size_t rank = 0;
  for (const auto& t : inputs) rank = std::max(rank, t.shape.size());
  std::vector<int64_t> shape(rank, 1);
  for (const auto& t : inputs) {
    const std::size_t offset = rank - t.shape.size();
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      int64_t& out = shape[offset + i];
      const int64_t size = t.shape[i];
      require(size == out || size == 1 || out == 1, "cannot broadcast shapes " + shape_text(inputs[0].shape) + " and " +
                                                        shape_text(t.shape));
      out = size == 1 ? out : size;
    }
  }
  return shape;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  const int64_t normalized = axis < 0 ? axis + rank : axis;
  require(normalized >= 0 && normalized < rank, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return normalized;
}

TensorType view_type(Op op, const TensorType& in, const Attributes& attrs);

TensorType extern_type(Op op, const std::vector<TensorType>& in, const Attributes& attrs) {
  switch (op) {
    case Op::sum_to_float: {
      require(is_half_precision(in[0].dtype), "sum_to_float sums bf16 or f16, got " + in[0].str());
      const TensorType reduced = infer_type(Op::sum, in, attrs);
      return {DType::f32, reduced.shape};
    }
    case Op::matmul_to_float: {
      require(in[0].rank() == 2 && in[1].rank() == 2, "matmul_to_float multiplies matrices, got " + in[0].str() + " x " + in[1].str());
      require(is_half_precision(in[0].dtype), "matmul_to_float multiplies bf16 or f16, got " + in[0].str());
      const TensorType product = infer_type(Op::matmul, in, attrs);
      return {DType::f32, product.shape};
    }
    case Op::matmul_bias:
      require(in[2].rank() == 1 && in[2].dtype == in[0].dtype && in[2].shape[0] == in[1].shape.back(),
              "matmul_bias needs a bias [n] of the operands' dtype, got " + in[2].str());
      [[fallthrough]];
    case Op::matmul: {
      const TensorType& a = in[0];
      const TensorType& b = in[1];
      require(a.rank() >= 2 && b.rank() >= 2, "matmul needs operands of rank >= 2");
      require(a.dtype == b.dtype, "matmul operands differ in dtype");
      require(a.shape.back() == b.shape[b.shape.size() - 2],
              "matmul inner dimensions differ: " + shape_text(a.shape) + " x " + shape_text(b.shape));
      std::vector<TensorType> batches = {{a.dtype, {a.shape.begin(), a.shape.end() - 2}}, {b.dtype, {b.shape.begin(), b.shape.end() - 2}}};
      std::vector<int64_t> shape = broadcast(batches);
      shape.push_back(a.shape[a.shape.size() - 2]);
      shape.push_back(b.shape.back());
      return {a.dtype, shape};
    }
    case Op::embedding: {
      const TensorType& weight = in[0];
      const TensorType& indices = in[1];
      require(weight.rank() == 2 && is_floating(weight.dtype), "embedding weight must be a floating [vocab, dim] matrix");
      require(indices.dtype == DType::i64, "embedding indices must be i64");
      std::vector<int64_t> shape = indices.shape;
      shape.push_back(weight.shape[1]);
      return {weight.dtype, shape};
    }
    case Op::attention: {
      const TensorType& q = in[0];
      const TensorType& k = in[1];
      const TensorType& v = in[2];
      require(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "attention takes [batch, heads, time, dim] operands");
      require(q.dtype == k.dtype && k.dtype == v.dtype, "attention operands differ in dtype");
      require(q.shape[0] == k.shape[0] && q.shape[1] == k.shape[1] && q.shape[3] == k.shape[3], "attention q and k do not match");
      require(k.shape[0] == v.shape[0] && k.shape[1] == v.shape[1] && k.shape[2] == v.shape[2], "attention k and v do not match");
      return {q.dtype, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}};
    }
    case Op::attention_grad: {  // (q, k, v, grad of the output) -> [3, ...]: dq, dk, dv stacked
      const TensorType& q = in[0];
      require(q.rank() == 4, "attention_grad takes [batch, heads, time, dim] operands");
      for (std::size_t i = 1; i < 4; ++i) require(in[i] == q, "attention_grad needs q, k, v and the gradient of one type");
      TensorType out = q;
      out.shape.insert(out.shape.begin(), 3);
      return out;
    }
    case Op::attention_and_lse: return extern_type(Op::attention, in, attrs);
    case Op::attention_lse: {
      require(in[0].rank() == 4, "attention_lse takes an attention's output [batch, heads, time, dim], got " + in[0].str());
      return {DType::f32, {in[0].shape[0], in[0].shape[1], in[0].shape[2]}};
    }
    case Op::attention_grad_from_lse: {
      const TensorType out = extern_type(Op::attention_and_lse, {in[0], in[1], in[2]}, attrs);
      require(in[3] == out, "attention_grad_from_lse takes attention_and_lse's output " + out.str() + ", got " + in[3].str());
      const TensorType lse = extern_type(Op::attention_lse, {out}, attrs);
      require(in[4] == lse, "attention_grad_from_lse takes the output's attention_lse " + lse.str() + ", got " + in[4].str());
      return extern_type(Op::attention_grad, {in[0], in[1], in[2], in[5]}, attrs);
    }
    case Op::attention_grad_and_bias_sums: {
      (void)extern_type(Op::attention_grad_from_lse, in, attrs);
      AttentionGradSumsLayout layout;
      require(attention_grad_sums_layout(in[0].shape, dtype_bytes(in[0].dtype), layout),
              "attention_grad_and_bias_sums: float32 sums for " + in[0].str() + " do not fill whole elements of " + dtype_name(in[0].dtype));
      return {in[0].dtype, {layout.total}};
    }
    case Op::bitcast: {
      require(in[0].rank() == 1, "bitcast takes a flat tensor, got " + in[0].str());
      const int64_t bytes = in[0].numel() * dtype_bytes(in[0].dtype);
      require(bytes % dtype_bytes(attrs.dtype) == 0, "bitcast: " + in[0].str() + " is not a whole number of " + dtype_name(attrs.dtype));
      return {attrs.dtype, {bytes / dtype_bytes(attrs.dtype)}};
    }
    case Op::linear_cross_entropy_grad_from_dlogits: {
      require(in[1].rank() == 2, "linear_cross_entropy_grad_from_dlogits takes x [N, C], got " + in[1].str());
      const TensorType head = extern_type(Op::linear_cross_entropy_and_dlogits, {in[1], in[2], {DType::i64, {in[1].shape[0]}}}, attrs);
      require(in[0] == head, "linear_cross_entropy_grad_from_dlogits takes linear_cross_entropy_and_dlogits's " + head.str() + ", got " +
                                 in[0].str());
      const TensorType loss{attrs.dtype, {in[1].shape[0]}};
      require(in[3] == loss, "linear_cross_entropy_grad_from_dlogits's grad must be the loss's type " + loss.str() + ", got " + in[3].str());
      (void)extern_type(Op::linear_cross_entropy_grad, {in[1], in[2], {DType::i64, {in[1].shape[0]}}, in[3]}, attrs);
      LinearCrossEntropyLayout layout;
      linear_cross_entropy_layout(in[1].shape[0], in[1].shape[1], in[2].shape[0], dtype_bytes(in[1].dtype), dtype_bytes(attrs.dtype),
                                  layout);  // checked above
      require(attrs.ints.empty() || (attrs.ints.size() == 1 && attrs.ints[0] >= 0 && attrs.ints[0] <= 2),
              "linear_cross_entropy_grad_from_dlogits's ints name the gradient it makes: none (both), {0} (x's), {1} (the weight's) "
              "or {2} (the weight's in float32)");
      const int64_t x_grad = in[1].numel(), weight_grad = layout.padded_vocabulary * in[2].shape[1];
      switch (head_gradients(attrs)) {
        case HeadGradients::input: return {in[1].dtype, {x_grad}};
        case HeadGradients::weight: return {in[1].dtype, {weight_grad}};
        case HeadGradients::weight_float: return {DType::f32, {weight_grad}};
        case HeadGradients::both: break;
      }
      return {in[1].dtype, {x_grad + weight_grad}};
    }
    case Op::linear_cross_entropy_and_dlogits:
    case Op::linear_cross_entropy:
    case Op::linear_cross_entropy_grad: {
      const TensorType& x = in[0];
      const TensorType& weight = in[1];
      require(x.rank() == 2 && weight.rank() == 2 && x.shape[1] == weight.shape[1], "linear_cross_entropy takes x [N, C] and weight [V, C]");
      require(is_floating(x.dtype) && weight.dtype == x.dtype, "linear_cross_entropy needs x and weight of one floating dtype");
      require(in[2].dtype == DType::i64 && in[2].shape == std::vector<int64_t>{x.shape[0]}, "linear_cross_entropy targets must be i64 [N]");
      require(is_floating(attrs.dtype), "linear_cross_entropy's loss dtype must be floating");
      if (op == Op::linear_cross_entropy) return {attrs.dtype, {x.shape[0]}};
      if (op == Op::linear_cross_entropy_and_dlogits) {
        LinearCrossEntropyLayout layout;
        require(linear_cross_entropy_layout(x.shape[0], x.shape[1], weight.shape[0], dtype_bytes(x.dtype), dtype_bytes(attrs.dtype), layout),
                "linear_cross_entropy_and_dlogits: " + std::to_string(x.shape[0]) + " losses of " + dtype_name(attrs.dtype) +
                    " do not fill whole elements of " + dtype_name(x.dtype));
        return {x.dtype, {layout.total}};
      }
      require(in[3] == TensorType{attrs.dtype, {x.shape[0]}}, "linear_cross_entropy_grad's grad must be the loss's type");
      return {x.dtype, {x.shape[0] * x.shape[1] + weight.shape[0] * weight.shape[1]}};
    }
    case Op::conv2d: {
      const TensorType& input = in[0];
      const TensorType& weight = in[1];
      require(input.rank() == 4 && weight.rank() == 4, "conv2d takes [N, C, H, W] input and [O, C, kh, kw] weight");
      require(input.shape[1] == weight.shape[1], "conv2d channels differ");
      require(attrs.ints.size() == 2 && attrs.ints[0] >= 1 && attrs.ints[1] >= 0, "conv2d needs ints {stride >= 1, padding >= 0}");
      const int64_t stride = attrs.ints[0], padding = attrs.ints[1];
      const int64_t height = (input.shape[2] + 2 * padding - weight.shape[2]) / stride + 1;
      const int64_t width = (input.shape[3] + 2 * padding - weight.shape[3]) / stride + 1;
      require(height >= 1 && width >= 1, "conv2d kernel larger than the padded input");
      return {input.dtype, {input.shape[0], weight.shape[0], height, width}};
    }
    case Op::concat: {
      require(attrs.ints.size() == 1, "concat needs ints {dim}");
      const int64_t dim = normalize_axis(attrs.ints[0], in[0].rank());
      TensorType out = in[0];
      out.shape[static_cast<std::size_t>(dim)] = 0;
      for (const TensorType& t : in) {
        require(t.dtype == in[0].dtype && t.rank() == in[0].rank(), "concat operands differ in dtype or rank");
        for (int64_t d = 0; d < t.rank(); ++d) {
          require(d == dim || t.shape[static_cast<std::size_t>(d)] == in[0].shape[static_cast<std::size_t>(d)],
                  "concat operands differ outside dimension " + std::to_string(dim));
        }
        out.shape[static_cast<std::size_t>(dim)] += t.shape[static_cast<std::size_t>(dim)];
      }
      return out;
    }
    case Op::slice_backward: {
      require(attrs.ints.size() > 4, "slice_backward needs ints {dim, start, end, step, input sizes...}");
      const TensorType input{in[0].dtype, {attrs.ints.begin() + 4, attrs.ints.end()}};
      Attributes slice;
      slice.ints = {attrs.ints.begin(), attrs.ints.begin() + 4};
      require(view_type(Op::slice, input, slice) == in[0], "slice_backward: the gradient does not fit the slice");
      return input;
    }
    case Op::embedding_grad: {
      require(attrs.ints.size() == 1 && attrs.ints[0] >= 1, "embedding_grad needs ints {vocab}");
      require(in[1].dtype == DType::i64 && in[0].rank() == in[1].rank() + 1, "embedding_grad takes grad [..., dim] and i64 indices [...]");
      return {in[0].dtype, {attrs.ints[0], in[0].shape.back()}};
    }
    case Op::matmul_bias_gelu: {
      TensorType product = extern_type(Op::matmul_bias, in, attrs);
      require(is_half_precision(product.dtype), "matmul_bias_gelu multiplies bf16 or f16, got " + in[0].str());
      require(in[1].rank() == 2, "matmul_bias_gelu takes a weight matrix, got " + in[1].str());
      product.shape.insert(product.shape.begin(), 2);
      return product;
    }
    case Op::matmul_gelu_grad: {
      const TensorType product = extern_type(Op::matmul, {in[0], in[1]}, attrs);
      require(is_half_precision(product.dtype) && in[1].rank() == 2,
              "matmul_gelu_grad multiplies bf16 or f16 by a weight matrix, got " + in[0].str() + " x " + in[1].str());
      require(in[2] == product, "matmul_gelu_grad's GELU input has the product's type " + product.str() + ", got " + in[2].str());
      return product;
    }
    case Op::embedding_grad_add: {
      require(!attrs.ints.empty() && attrs.ints.size() <= 2, "embedding_grad_add needs ints {vocab} or {vocab, in place}");
      Attributes vocabulary = attrs;
      vocabulary.ints.resize(1);
      const TensorType sum = extern_type(Op::embedding_grad, {in[1], in[2]}, vocabulary);
      require(is_floating(in[0].dtype) && in[0].shape == sum.shape,
              "embedding_grad_add adds into a floating " + shape_text(sum.shape) + ", got " + in[0].str());
      require(!embedding_grad_add_in_place(attrs) || in[0] == sum, "embedding_grad_add adds in place only into a " + sum.str() + ", got " + in[0].str());
      return sum;
    }
    case Op::conv2d_input_grad:
    case Op::conv2d_weight_grad: {
      require(extern_type(Op::conv2d, {in[1], in[2]}, attrs) == in[0], "conv2d gradient does not fit the convolution");
      return op == Op::conv2d_input_grad ? in[1] : in[2];
    }
    case Op::max_pool2d: {
      const TensorType indices = extern_type(Op::max_pool2d_indices, {in[0]}, attrs);
      require(in[1] == indices, "max_pool2d takes its input's max_pool2d_indices, " + indices.str());
      return {in[0].dtype, indices.shape};
    }
    case Op::max_pool2d_grad: {
      require(extern_type(Op::max_pool2d, {in[1], in[2]}, attrs) == in[0], "pooling gradient does not fit the pooling");
      return in[1];
    }
    case Op::max_pool2d_indices:
    case Op::avg_pool2d: {
      const std::size_t expected = op == Op::max_pool2d_indices ? 3 : 4;
      require(attrs.ints.size() == expected && attrs.ints[0] >= 1 && attrs.ints[1] >= 1 && attrs.ints[2] >= 0 &&
                  2 * attrs.ints[2] <= attrs.ints[0],
              "pooling needs ints {kernel >= 1, stride >= 1, padding <= kernel / 2" + std::string(expected == 4 ? ", count_include_pad}" : "}"));
      require(in[0].rank() == 4, "pooling takes [N, C, H, W]");
      const int64_t kernel = attrs.ints[0], stride = attrs.ints[1], padding = attrs.ints[2];
      const int64_t height = (in[0].shape[2] + 2 * padding - kernel) / stride + 1;
      const int64_t width = (in[0].shape[3] + 2 * padding - kernel) / stride + 1;
      require(height >= 1 && width >= 1, "pooling window larger than the padded input");
      return {op == Op::max_pool2d_indices ? DType::i64 : in[0].dtype, {in[0].shape[0], in[0].shape[1], height, width}};
    }
    case Op::avg_pool2d_grad: {
      require(extern_type(Op::avg_pool2d, {in[1]}, attrs) == in[0], "pooling gradient does not fit the pooling");
      return in[1];
    }
    default:
      throw IrError(std::string("no extern rule for ") + op_name(op));
  }
}

TensorType view_type(Op op, const TensorType& in, const Attributes& attrs) {
  const std::vector<int64_t>& ints = attrs.ints;
  switch (op) {
    case Op::reshape: {
      const TensorType out{in.dtype, ints};
      require(std::all_of(ints.begin(), ints.end(), [](int64_t s) { return s >= 0; }), "reshape sizes must be >= 0");
      require(out.numel() == in.numel(), "reshape " + shape_text(in.shape) + " to " + shape_text(ints) + " changes the element count");
      return out;
    }
    case Op::permute: {
      std::vector<int64_t> order = ints;
      std::sort(order.begin(), order.end());
      std::vector<int64_t> identity(static_cast<std::size_t>(in.rank()));
      std::iota(identity.begin(), identity.end(), 0);
      require(order == identity, "permute order " + shape_text(ints) + " is not a permutation of " + std::to_string(in.rank()) + " dims");
      std::vector<int64_t> shape;
      for (int64_t axis : ints) shape.push_back(in.shape[static_cast<std::size_t>(axis)]);
      return {in.dtype, shape};
    }
    case Op::expand: {
      require(static_cast<int64_t>(ints.size()) >= in.rank(), "expand cannot lower the rank");
      const std::size_t offset = ints.size() - in.shape.size();
      for (std::size_t i = 0; i < in.shape.size(); ++i) {
        require(in.shape[i] == ints[offset + i] || in.shape[i] == 1,
                "expand " + shape_text(in.shape) + " to " + shape_text(ints) + ": dimension " + std::to_string(i) + " is not 1");
      }
      return {in.dtype, ints};
    }
    case Op::slice: {
      require(ints.size() == 4, "slice needs ints {dim, start, end, step}");
      const int64_t dim = normalize_axis(ints[0], in.rank());
      const int64_t start = ints[1], end = ints[2], step = ints[3];
      const int64_t size = in.shape[static_cast<std::size_t>(dim)];
      require(0 <= start && start <= end && end <= size && step >= 1, "slice bounds out of range for size " + std::to_string(size));
      TensorType out = in;
      out.shape[static_cast<std::size_t>(dim)] = (end - start + step - 1) / step;
      return out;
    }
    default:
      throw IrError(std::string("no view rule for ") + op_name(op));
  }
}

}  // namespace

TensorType infer_type(Op op, const std::vector<TensorType>& in, const Attributes& attrs) {
  const int arity = op_arity(op);
  require(arity < 0 || static_cast<int>(in.size()) == arity,
          std::to_string(in.size()) + " inputs, the op takes " + std::to_string(arity));
  switch (op_kind(op)) {
    case OpKind::kInput:
      throw IrError("graph inputs have no rule; their type is given");
    case OpKind::kConstant:
    case OpKind::kRandom:
      require(std::all_of(attrs.ints.begin(), attrs.ints.end(), [](int64_t s) { return s >= 0; }), "constant sizes must be >= 0");
      require(op != Op::iota || attrs.ints.size() == 1, "iota needs ints {n}");
      require(op != Op::bernoulli || (is_floating(attrs.dtype) && attrs.scalar >= 0 && attrs.scalar <= 1),
              "bernoulli needs a floating dtype and a probability in [0, 1]");
      return {attrs.dtype, attrs.ints};
    case OpKind::kUnary:
      if (op == Op::cast) return {attrs.dtype, in[0].shape};
      require(is_floating(in[0].dtype) || op == Op::neg || op == Op::relu || op == Op::detach,
              std::string(op_name(op)) + " needs a floating input");
      return in[0];
    case OpKind::kBinary:
      require(in[0].dtype == in[1].dtype, std::string("operands differ in dtype (") + dtype_name(in[0].dtype) + ", " +
                                              dtype_name(in[1].dtype) + "); cast explicitly");
      return {is_comparison(op) ? DType::b8 : in[0].dtype, broadcast(in)};
    case OpKind::kTernary:
      require(in[0].dtype == DType::b8, "where's condition must be b8");
      require(in[1].dtype == in[2].dtype, "where's branches differ in dtype");
      return {in[1].dtype, broadcast(in)};
    case OpKind::kReduction: {
      require(!attrs.ints.empty(), "a reduction needs axes");
      std::vector<bool> reduced(static_cast<std::size_t>(in[0].rank()), false);
      for (int64_t axis : attrs.ints) reduced[static_cast<std::size_t>(normalize_axis(axis, in[0].rank()))] = true;
      std::vector<int64_t> shape;
      for (std::size_t i = 0; i < reduced.size(); ++i) {
        if (!reduced[i]) shape.push_back(in[0].shape[i]);
        else if (attrs.keepdim) shape.push_back(1);
      }
      return {in[0].dtype, shape};
    }
    case OpKind::kView:
      return view_type(op, in[0], attrs);
    case OpKind::kExtern:
      return extern_type(op, in, attrs);
  }
  throw IrError("unknown op kind");
}

}  // namespace trainc::ir
