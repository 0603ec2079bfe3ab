// Builders for the aten ops that map onto IR primitives one to one or nearly: pointwise math,
// casts, reductions, views, lists, tensor creation, and the extern ops (matmul, convolution,
// pooling, embedding). Composite ops that decompose are in composites.cpp.
#include <cmath>

#include "trainc/compile/import/import_context.h"
#include "trainc/compile/optimizations.h"

namespace trainc {
namespace {

using ir::DType;
using ir::Op;
using ir::ValueId;
using Values = std::vector<ValueId>;
namespace jit = torch::jit;

std::vector<int64_t> out_shape(ImportContext& c, const jit::Node& n) { return c.traced_type(n.output()).shape; }

ir::Attributes ints(std::vector<int64_t> values) {
  ir::Attributes attrs;
  attrs.ints = std::move(values);
  return attrs;
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= std::max<int64_t>(rank, 1)) throw Unsupported("dimension " + std::to_string(dim) + " out of range");
  return d;
}

// The dtype two operands of a comparison meet in: a rank-0 tensor does not raise the other's type
// within its kind, as in ATen's type promotion.
DType common_dtype(ImportContext& c, const jit::Node& n) {
  const auto kind_rank = [](DType d) { return d == DType::b8 ? 0 : d == DType::i64 ? 1 : 2; };
  const auto precision = [](DType d) { return d == DType::f64 ? 3 : d == DType::f32 ? 2 : 1; };
  const jit::Value* a = arg(n, 0);
  const jit::Value* b = arg(n, 1);
  if (!c.is_tensor(b)) {
    const DType t = c.type(c.tensor(a)).dtype;
    return c.constant(b).isDouble() && kind_rank(t) < 2 ? DType::f32 : t;
  }
  const ir::TensorType& ta = c.type(c.tensor(a));
  const ir::TensorType& tb = c.type(c.tensor(b));
  if (ta.dtype == tb.dtype) return ta.dtype;
  if (kind_rank(ta.dtype) != kind_rank(tb.dtype)) return kind_rank(ta.dtype) > kind_rank(tb.dtype) ? ta.dtype : tb.dtype;
  if (ta.rank() == 0 && tb.rank() > 0) return tb.dtype;
  if (tb.rank() == 0 && ta.rank() > 0) return ta.dtype;
  return precision(ta.dtype) >= precision(tb.dtype) ? ta.dtype : tb.dtype;
}

ValueId not_(ImportContext& c, ValueId mask) { return c.binary(Op::eq, mask, c.scalar(0.0, DType::b8)); }

// --- pointwise -----------------------------------------------------------------------------------

Builder unary(Op op) {
  return [op](ImportContext& c, const jit::Node& n) -> Values {
    return {c.add(op, {c.cast(c.tensor(arg(n, 0)), out_dtype(c, n))})};
  };
}

// add/sub with alpha: a + alpha * b. rsub(a, b, alpha): b - alpha * a.
Builder add_sub(Op op, bool reversed) {
  return [op, reversed](ImportContext& c, const jit::Node& n) -> Values {
    const DType dtype = out_dtype(c, n);
    ValueId a = c.operand(arg(n, 0), dtype);
    ValueId b = c.operand(arg(n, 1), dtype);
    if (reversed) std::swap(a, b);
    const double alpha = n.inputs().size() > 2 ? c.double_arg(arg(n, 2)) : 1.0;
    // A bias added to a product nothing else reads (how the C++ frontend's F::linear traces over
    // a 3-D input: matmul, then add_) is the GEMM's own bias: one matmul_bias, its bias added in
    // the GEMM's epilogue (ATen's addmm), instead of a kernel that reads and writes the whole
    // product again.
    // The traced add must read aten::matmul's own output: ops that import as the value they are
    // given (contiguous, to) would hide the product's other readers.
    const ir::Node& product = c.graph().node(a);
    const bool reads_the_product = arg(n, 0)->node()->kind() == jit::aten::matmul && arg(n, 0)->uses().size() == 1;
    if (op == Op::add && !reversed && alpha == 1.0 && optimization_enabled(Optimization::bias_epilogue) && reads_the_product && product.op == Op::matmul &&
        c.type(product.inputs[1]).rank() == 2 && c.type(b).rank() == 1 && c.type(b).shape[0] == c.type(a).shape.back() &&
        c.type(b).dtype == c.type(a).dtype) {
      return {c.add(Op::matmul_bias, {product.inputs[0], product.inputs[1], b})};
    }
    if (alpha != 1.0) b = c.binary(Op::mul, b, c.scalar(alpha, dtype));
    return {c.binary(op, a, b)};
  };
}

Builder binary(Op op) {
  return [op](ImportContext& c, const jit::Node& n) -> Values {
    if (op == Op::div && n.inputs().size() > 2 && !c.is_none(arg(n, 2))) throw Unsupported("div with a rounding mode");
    const DType dtype = out_dtype(c, n);
    return {c.binary(op, c.operand(arg(n, 0), dtype), c.operand(arg(n, 1), dtype))};
  };
}

// gt, lt, ge, le, eq, ne from the IR's gt and eq.
Builder comparison(const std::string& name) {
  return [name](ImportContext& c, const jit::Node& n) -> Values {
    const DType dtype = common_dtype(c, n);
    const ValueId a = c.operand(arg(n, 0), dtype);
    const ValueId b = c.operand(arg(n, 1), dtype);
    if (name == "gt") return {c.binary(Op::gt, a, b)};
    if (name == "lt") return {c.binary(Op::gt, b, a)};
    if (name == "ge") return {not_(c, c.binary(Op::gt, b, a))};
    if (name == "le") return {not_(c, c.binary(Op::gt, a, b))};
    if (name == "eq") return {c.binary(Op::eq, a, b)};
    return {not_(c, c.binary(Op::eq, a, b))};
  };
}

// logical_and / logical_or / logical_not over b8 masks, as where and eq.
Builder logical(const std::string& name) {
  return [name](ImportContext& c, const jit::Node& n) -> Values {
    const ValueId a = c.cast(c.tensor(arg(n, 0)), DType::b8);
    if (name == "not") return {not_(c, a)};
    const ValueId b = c.cast(c.tensor(arg(n, 1)), DType::b8);
    const ValueId result = name == "and" ? c.add(Op::where, {a, b, c.scalar(0.0, DType::b8)}) : c.add(Op::where, {a, c.scalar(1.0, DType::b8), b});
    return {c.cast(result, out_dtype(c, n))};
  };
}

Values where(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  return {c.add(Op::where, {c.cast(c.tensor(arg(n, 0)), DType::b8), c.operand(arg(n, 1), dtype), c.operand(arg(n, 2), dtype)})};
}

Values masked_fill(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  return {c.add(Op::where, {c.cast(c.tensor(arg(n, 1)), DType::b8), c.operand(arg(n, 2), dtype), c.tensor(arg(n, 0))})};
}

// to, type_as, the autocast casts, contiguous, clone: only the dtype can change.
Values convert(ImportContext& c, const jit::Node& n) { return {c.cast(c.tensor(arg(n, 0)), out_dtype(c, n))}; }

// --- reductions ----------------------------------------------------------------------------------

std::vector<int64_t> all_axes(int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  return axes;
}

// sum(x, dtype) / sum(x, dims, keepdim, dtype), and mean alike.
Builder reduction(bool is_mean) {
  return [is_mean](ImportContext& c, const jit::Node& n) -> Values {
    const ValueId x = c.cast(c.tensor(arg(n, 0)), out_dtype(c, n));
    const int64_t rank = c.type(x).rank();
    std::vector<int64_t> axes = all_axes(rank);
    bool keepdim = false;
    if (n.inputs().size() >= 4) {
      if (!c.is_none(arg(n, 1))) axes = c.ints_arg(arg(n, 1));
      if (axes.empty()) axes = all_axes(rank);
      keepdim = c.bool_arg(arg(n, 2));
    }
    for (int64_t& axis : axes) axis = normalize_dim(axis, rank);
    if (rank == 0) return {x};
    return {is_mean ? c.mean(x, axes, keepdim) : c.sum(x, axes, keepdim)};
  };
}

Values amax(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  std::vector<int64_t> axes = c.ints_arg(arg(n, 1));
  if (axes.empty()) axes = all_axes(c.type(x).rank());
  ir::Attributes attrs = ints(axes);
  attrs.keepdim = c.bool_arg(arg(n, 2));
  return {c.add(Op::amax, {x}, attrs)};
}

// --- views and lists -----------------------------------------------------------------------------

// view, reshape, flatten, squeeze, unsqueeze, ...: the trace knows the result shape.
Values reshape_to_traced(ImportContext& c, const jit::Node& n) { return {c.reshape(c.tensor(arg(n, 0)), out_shape(c, n))}; }

Values permute(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  std::vector<int64_t> order = c.ints_arg(arg(n, 1));
  for (int64_t& d : order) d = normalize_dim(d, c.type(x).rank());
  return {c.add(Op::permute, {x}, ints(order))};
}

ValueId swap_dims(ImportContext& c, ValueId x, int64_t d0, int64_t d1) {
  const int64_t rank = c.type(x).rank();
  if (rank < 2) return x;
  std::vector<int64_t> order = all_axes(rank);
  std::swap(order[static_cast<std::size_t>(normalize_dim(d0, rank))], order[static_cast<std::size_t>(normalize_dim(d1, rank))]);
  return c.add(Op::permute, {x}, ints(order));
}

Values transpose(ImportContext& c, const jit::Node& n) {
  return {swap_dims(c, c.tensor(arg(n, 0)), c.int_arg(arg(n, 1)), c.int_arg(arg(n, 2)))};
}

Values t(ImportContext& c, const jit::Node& n) { return {swap_dims(c, c.tensor(arg(n, 0)), 0, 1)}; }

Values expand(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  const std::vector<int64_t> shape = out_shape(c, n);
  if (c.type(x).shape == shape) return {x};
  return {c.add(Op::expand, {x}, ints(shape))};
}

ValueId slice(ImportContext& c, ValueId x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t size = c.type(x).shape[static_cast<std::size_t>(dim)];
  const auto clamp = [size](int64_t i) { return std::min(std::max(i < 0 ? i + size : i, int64_t{0}), size); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  if (start == 0 && end == size && step == 1) return x;
  return c.add(Op::slice, {x}, ints({dim, start, end, step}));
}

Values slice_op(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  const int64_t rank = c.type(x).rank();
  const int64_t dim = normalize_dim(c.int_arg(arg(n, 1)), rank);
  const int64_t start = c.is_none(arg(n, 2)) ? 0 : c.int_arg(arg(n, 2));
  const int64_t end = c.is_none(arg(n, 3)) ? std::numeric_limits<int64_t>::max() : c.int_arg(arg(n, 3));
  const int64_t step = c.int_arg(arg(n, 4));
  if (step < 1) throw Unsupported("slice step " + std::to_string(step));
  return {slice(c, x, dim, start, std::min(end, c.type(x).shape[static_cast<std::size_t>(dim)]), step)};
}

Values select(ImportContext& c, const jit::Node& n) {
  const ValueId x = c.tensor(arg(n, 0));
  const int64_t dim = normalize_dim(c.int_arg(arg(n, 1)), c.type(x).rank());
  int64_t index = c.int_arg(arg(n, 2));
  if (index < 0) index += c.type(x).shape[static_cast<std::size_t>(dim)];
  return {c.reshape(slice(c, x, dim, index, index + 1, 1), out_shape(c, n))};
}

// split(x, size, dim), split_with_sizes(x, sizes, dim), chunk(x, chunks, dim), unbind(x, dim).
Builder split(const std::string& how) {
  return [how](ImportContext& c, const jit::Node& n) -> Values {
    const ValueId x = c.tensor(arg(n, 0));
    const int64_t rank = c.type(x).rank();
    const int64_t dim = normalize_dim(c.int_arg(arg(n, how == "unbind" ? 1 : 2)), rank);
    const int64_t size = c.type(x).shape[static_cast<std::size_t>(dim)];
    std::vector<int64_t> sizes;
    if (how == "split_with_sizes") {
      sizes = c.ints_arg(arg(n, 1));
    } else {
      const int64_t piece = how == "unbind" ? 1 : how == "chunk" ? (size + c.int_arg(arg(n, 1)) - 1) / c.int_arg(arg(n, 1)) : c.int_arg(arg(n, 1));
      for (int64_t start = 0; start < size; start += piece) sizes.push_back(std::min(piece, size - start));
    }
    Values pieces;
    int64_t start = 0;
    for (int64_t s : sizes) {
      ValueId piece = slice(c, x, dim, start, start + s, 1);
      if (how == "unbind") {
        std::vector<int64_t> shape = c.type(piece).shape;
        shape.erase(shape.begin() + dim);
        piece = c.reshape(piece, shape);
      }
      pieces.push_back(piece);
      start += s;
    }
    c.bind_list(n.output(), pieces);
    return {};
  };
}

Values list_construct(ImportContext& c, const jit::Node& n) {
  bool tensors = !n.inputs().empty();
  for (const jit::Value* input : n.inputs()) tensors = tensors && c.is_tensor(input);
  if (tensors) {
    Values items;
    for (const jit::Value* input : n.inputs()) items.push_back(c.tensor(input));
    c.bind_list(n.output(), items);
    return {};
  }
  const auto element = n.output()->type()->cast<c10::ListType>()->getElementType();
  if (element->kind() == c10::TypeKind::IntType) {
    std::vector<int64_t> values;
    for (const jit::Value* input : n.inputs()) values.push_back(c.int_arg(input));
    c.bind_constant(n.output(), c10::IValue(values));
  } else if (element->kind() == c10::TypeKind::FloatType) {
    std::vector<double> values;
    for (const jit::Value* input : n.inputs()) values.push_back(c.double_arg(input));
    c.bind_constant(n.output(), c10::IValue(values));
  } else if (element->kind() == c10::TypeKind::BoolType) {
    c10::List<bool> values;
    for (const jit::Value* input : n.inputs()) values.push_back(c.bool_arg(input));
    c.bind_constant(n.output(), c10::IValue(values));
  } else {
    throw Unsupported("a list of " + element->str());
  }
  return {};
}

Values broadcast_tensors(ImportContext& c, const jit::Node& n) {
  Values items = c.tensors_arg(arg(n, 0));
  std::vector<ir::TensorType> types;
  for (ValueId item : items) types.push_back({DType::f32, c.type(item).shape});
  ir::Attributes none;
  const std::vector<int64_t> shape = ir::infer_type(Op::add, {types.front(), types.back()}, none).shape;
  std::vector<int64_t> common = shape;
  for (const ir::TensorType& t : types) common = ir::infer_type(Op::add, {{DType::f32, common}, t}, none).shape;
  for (ValueId& item : items) {
    if (c.type(item).shape != common) item = c.add(Op::expand, {item}, ints(common));
  }
  c.bind_list(n.output(), items);
  return {};
}

Values list_unpack(ImportContext& c, const jit::Node& n) {
  const Values items = c.tensors_arg(arg(n, 0));
  if (items.size() != n.outputs().size()) throw Unsupported("unpacking a list of another length");
  return items;
}

Values cat(ImportContext& c, const jit::Node& n, bool stack) {
  const DType dtype = out_dtype(c, n);
  Values items;
  for (ValueId item : c.tensors_arg(arg(n, 0))) items.push_back(c.cast(item, dtype));
  const int64_t rank = c.type(items.front()).rank() + (stack ? 1 : 0);
  const int64_t dim = normalize_dim(c.int_arg(arg(n, 1)), rank);
  if (stack) {
    for (ValueId& item : items) {
      std::vector<int64_t> shape = c.type(item).shape;
      shape.insert(shape.begin() + dim, 1);
      item = c.reshape(item, shape);
    }
  }
  if (items.size() == 1) return {items.front()};
  return {c.add(Op::concat, items, ints({dim}))};
}

// --- linear algebra and the other extern ops -----------------------------------------------------

// matmul with ATen's rules for 1-D operands, in the IR's >= 2-D form.
ValueId matmul(ImportContext& c, ValueId a, ValueId b, const std::vector<int64_t>& result_shape) {
  if (c.type(a).rank() == 1) a = c.reshape(a, {1, c.type(a).shape[0]});
  if (c.type(b).rank() == 1) b = c.reshape(b, {c.type(b).shape[0], 1});
  return c.reshape(c.add(Op::matmul, {a, b}), result_shape);
}

Values matmul_op(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  return {matmul(c, c.cast(c.tensor(arg(n, 0)), dtype), c.cast(c.tensor(arg(n, 1)), dtype), out_shape(c, n))};
}

// linear(x, weight, bias) = x @ weight^T + bias; with a bias, one matmul_bias (one rounding, as
// eager's addmm) where the shapes allow it.
Values linear(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  const ValueId weight = c.cast(c.tensor(arg(n, 1)), dtype);
  const ValueId x = c.cast(c.tensor(arg(n, 0)), dtype);
  const bool has_bias = n.inputs().size() > 2 && !c.is_none(arg(n, 2));
  if (has_bias && optimization_enabled(Optimization::bias_epilogue) && c.type(x).rank() >= 2 && c.type(weight).rank() == 2 && c.type(c.tensor(arg(n, 2))).rank() == 1) {
    return {c.add(Op::matmul_bias, {x, swap_dims(c, weight, 0, 1), c.cast(c.tensor(arg(n, 2)), dtype)})};
  }
  ValueId y = matmul(c, x, swap_dims(c, weight, 0, 1), out_shape(c, n));
  if (has_bias) y = c.binary(Op::add, y, c.cast(c.tensor(arg(n, 2)), dtype));
  return {y};
}

// addmm(bias, a, b, beta, alpha) = beta * bias + alpha * (a @ b).
Values addmm(ImportContext& c, const jit::Node& n) {
  const DType dtype = out_dtype(c, n);
  ValueId product = matmul(c, c.cast(c.tensor(arg(n, 1)), dtype), c.cast(c.tensor(arg(n, 2)), dtype), out_shape(c, n));
  ValueId bias = c.cast(c.tensor(arg(n, 0)), dtype);
  const double beta = n.inputs().size() > 3 ? c.double_arg(arg(n, 3)) : 1.0;
  const double alpha = n.inputs().size() > 4 ? c.double_arg(arg(n, 4)) : 1.0;
  if (beta == 1.0 && alpha == 1.0 && c.type(bias).rank() == 1 && optimization_enabled(Optimization::bias_epilogue)) {
    const ir::Node& made = c.graph().node(product);
    if (made.op == Op::matmul) return {c.add(Op::matmul_bias, {made.inputs[0], made.inputs[1], bias})};
  }
  if (alpha != 1.0) product = c.binary(Op::mul, product, c.scalar(alpha, dtype));
  if (beta != 1.0) bias = c.binary(Op::mul, bias, c.scalar(beta, dtype));
  return {c.binary(Op::add, bias, product)};
}

Values embedding(ImportContext& c, const jit::Node& n) {
  if (n.inputs().size() > 2 && c.int_arg(arg(n, 2)) != -1) throw Unsupported("embedding with a padding_idx");
  if (n.inputs().size() > 3 && c.bool_arg(arg(n, 3))) throw Unsupported("embedding with scale_grad_by_freq");
  if (n.inputs().size() > 4 && c.bool_arg(arg(n, 4))) throw Unsupported("sparse embedding gradients");
  const ValueId table = c.tensor(arg(n, 0));
  const ValueId indices = c.cast(c.tensor(arg(n, 1)), DType::i64);
  // Every row in order (a position embedding's arange over its whole table) is the table itself: no
  // gather in the forward, and its gradient is the incoming one, not a scatter into a zeroed table.
  if (c.graph().node(indices).op == Op::iota && c.type(indices).shape == std::vector<int64_t>{c.type(table).shape.at(0)}) return {table};
  return {c.add(Op::embedding, {table, indices})};
}

int64_t square(ImportContext& c, const jit::Value* value, const std::string& what, int64_t if_empty) {
  const std::vector<int64_t> v = c.ints_arg(value);
  if (v.empty()) return if_empty;
  if (v.size() == 2 && v[0] != v[1]) throw Unsupported(what + " differs between height and width");
  if (v.size() > 2) throw Unsupported(what + " of rank " + std::to_string(v.size()));
  return v[0];
}

// conv2d(x, w, b, stride, padding, dilation, groups) and the general convolution forms
// (x, w, b, stride, padding, dilation, transposed, output_padding, groups, ...).
Builder convolution(bool general) {
  return [general](ImportContext& c, const jit::Node& n) -> Values {
    const DType dtype = out_dtype(c, n);
    const ValueId x = c.cast(c.tensor(arg(n, 0)), dtype);
    if (c.type(x).rank() != 4) throw Unsupported("only 2-d convolutions");
    if (!c.constant(arg(n, 4)).isIntList() && !c.constant(arg(n, 4)).isInt()) throw Unsupported("padding given as a string");
    const int64_t stride = square(c, arg(n, 3), "stride", 1);
    const int64_t padding = square(c, arg(n, 4), "padding", 0);
    if (square(c, arg(n, 5), "dilation", 1) != 1) throw Unsupported("dilated convolution");
    if (general && c.bool_arg(arg(n, 6))) throw Unsupported("transposed convolution");
    if (c.int_arg(arg(n, general ? 8 : 6)) != 1) throw Unsupported("grouped convolution");
    ValueId y = c.add(Op::conv2d, {x, c.cast(c.tensor(arg(n, 1)), dtype)}, ints({stride, padding}));
    if (!c.is_none(arg(n, 2))) {
      const ValueId bias = c.cast(c.tensor(arg(n, 2)), dtype);
      y = c.binary(Op::add, y, c.reshape(bias, {1, c.type(bias).shape[0], 1, 1}));
    }
    return {y};
  };
}

Values max_pool2d(ImportContext& c, const jit::Node& n) {
  const int64_t kernel = square(c, arg(n, 1), "kernel_size", 1);
  const int64_t stride = square(c, arg(n, 2), "stride", kernel);
  const int64_t padding = square(c, arg(n, 3), "padding", 0);
  if (square(c, arg(n, 4), "dilation", 1) != 1) throw Unsupported("dilated pooling");
  if (c.bool_arg(arg(n, 5))) throw Unsupported("ceil_mode pooling");
  // The window maxima's positions first, then the maxima read at them: the backward takes the
  // same positions instead of pooling again.
  const ValueId input = c.tensor(arg(n, 0));
  const ValueId indices = c.add(Op::max_pool2d_indices, {input}, ints({kernel, stride, padding}));
  return {c.add(Op::max_pool2d, {input, indices}, ints({kernel, stride, padding}))};
}

Values avg_pool2d(ImportContext& c, const jit::Node& n) {
  const int64_t kernel = square(c, arg(n, 1), "kernel_size", 1);
  const int64_t stride = square(c, arg(n, 2), "stride", kernel);
  const int64_t padding = square(c, arg(n, 3), "padding", 0);
  if (c.bool_arg(arg(n, 4))) throw Unsupported("ceil_mode pooling");
  if (n.inputs().size() > 6 && !c.is_none(arg(n, 6))) throw Unsupported("avg_pool2d with a divisor_override");
  return {c.add(Op::avg_pool2d, {c.tensor(arg(n, 0))}, ints({kernel, stride, padding, c.bool_arg(arg(n, 5)) ? 1 : 0}))};
}

// --- creation and sizes --------------------------------------------------------------------------

// arange(end, ...), arange(start, end, ...), arange(start, end, step, ...): start + step * iota.
Values arange(ImportContext& c, const jit::Node& n) {
  const ir::TensorType out = c.traced_type(n.output());
  const bool with_start = n.inputs().size() >= 6;
  const bool with_step = n.inputs().size() >= 7;
  const double start = with_start ? c.double_arg(arg(n, 0)) : 0.0;
  const double step = with_step ? c.double_arg(arg(n, 2)) : 1.0;
  ir::Attributes attrs = ints({out.shape[0]});
  attrs.dtype = out.dtype;
  ValueId values = c.add(Op::iota, {}, attrs);
  if (step != 1.0) values = c.binary(Op::mul, values, c.scalar(step, out.dtype));
  if (start != 0.0) values = c.binary(Op::add, values, c.scalar(start, out.dtype));
  return {values};
}

// ones, zeros, full and their _like forms: a constant of the traced type.
Builder filled(double value, int value_arg) {
  return [value, value_arg](ImportContext& c, const jit::Node& n) -> Values {
    const ir::TensorType out = c.traced_type(n.output());
    ir::Attributes attrs = ints(out.shape);
    attrs.dtype = out.dtype;
    attrs.scalar = value_arg >= 0 ? c.double_arg(arg(n, static_cast<std::size_t>(value_arg))) : value;
    return {c.add(Op::constant, {}, attrs)};
  };
}

// triu / tril: keep x where (column - row) >= k (triu) or <= k (tril).
Builder triangle(bool upper) {
  return [upper](ImportContext& c, const jit::Node& n) -> Values {
    const ValueId x = c.tensor(arg(n, 0));
    const std::vector<int64_t>& shape = c.type(x).shape;
    if (shape.size() < 2) throw Unsupported("triu/tril of a vector");
    const int64_t k = n.inputs().size() > 1 ? c.int_arg(arg(n, 1)) : 0;
    ir::Attributes rows_attrs = ints({shape[shape.size() - 2]});
    rows_attrs.dtype = DType::i64;
    ir::Attributes cols_attrs = ints({shape.back()});
    cols_attrs.dtype = DType::i64;
    const ValueId rows = c.reshape(c.add(Op::iota, {}, rows_attrs), {shape[shape.size() - 2], 1});
    const ValueId cols = c.reshape(c.add(Op::iota, {}, cols_attrs), {1, shape.back()});
    const ValueId offset = c.binary(Op::sub, cols, rows);
    const ValueId keep = upper ? c.binary(Op::gt, offset, c.scalar(static_cast<double>(k - 1), DType::i64))
                               : c.binary(Op::gt, c.scalar(static_cast<double>(k + 1), DType::i64), offset);
    return {c.add(Op::where, {keep, x, c.scalar(0.0, c.type(x).dtype)})};
  };
}

Values size(ImportContext& c, const jit::Node& n) {
  const ir::TensorType type = c.traced_type(arg(n, 0));
  if (n.inputs().size() == 1) {
    c.bind_constant(n.output(), c10::IValue(type.shape));
  } else {
    c.bind_constant(n.output(), c10::IValue(type.shape[static_cast<std::size_t>(normalize_dim(c.int_arg(arg(n, 1)), type.rank()))]));
  }
  return {};
}

Values number_to_tensor(ImportContext& c, const jit::Node& n) { return {c.scalar(c.double_arg(arg(n, 0)), out_dtype(c, n))}; }

Values data_dependent(ImportContext& c, const jit::Node& n) { throw Unsupported("reads a tensor's value on the host"); }

// An in-place form (add_, masked_fill_, ...): the out-of-place builder, and when the tensor
// updated is a graph input, the update is recorded so the step writes it back.
Builder in_place(Builder builder) {
  return [builder](ImportContext& c, const jit::Node& n) -> Values {
    Values result = builder(c, n);
    if (c.is_graph_input(arg(n, 0))) c.update_buffer(arg(n, 0), c.cast(result.at(0), c.type(c.tensor(arg(n, 0))).dtype));
    return result;
  };
}

}  // namespace

void register_aten_ops(BuilderTable& table) {
  const auto both = [&table](const std::string& name, Builder builder) {
    table["aten::" + name] = builder;
    table["aten::" + name + "_"] = in_place(builder);
  };
  for (const auto& [name, op] : std::vector<std::pair<std::string, Op>>{
           {"neg", Op::neg}, {"exp", Op::exp}, {"log", Op::log}, {"tanh", Op::tanh}, {"erf", Op::erf}, {"sqrt", Op::sqrt},
           {"rsqrt", Op::rsqrt}, {"reciprocal", Op::reciprocal}, {"relu", Op::relu}, {"sigmoid", Op::sigmoid}}) {
    both(name, unary(op));
  }
  both("add", add_sub(Op::add, false));
  both("sub", add_sub(Op::sub, false));
  table["aten::rsub"] = add_sub(Op::sub, true);
  both("mul", binary(Op::mul));
  both("div", binary(Op::div));
  both("pow", binary(Op::pow));
  table["aten::maximum"] = binary(Op::maximum);
  for (const std::string name : {"gt", "lt", "ge", "le", "eq", "ne"}) table["aten::" + name] = comparison(name);
  table["aten::where"] = where;
  table["aten::logical_and"] = logical("and");
  table["aten::logical_or"] = logical("or");
  table["aten::logical_not"] = logical("not");
  table["aten::broadcast_tensors"] = broadcast_tensors;
  both("masked_fill", masked_fill);
  for (const std::string name : {"to", "type_as", "_autocast_to_reduced_precision", "_autocast_to_full_precision", "_to_copy",
                                 "contiguous", "clone", "float", "alias"}) {
    table["aten::" + name] = convert;
  }
  table["aten::detach"] = [](ImportContext& c, const jit::Node& n) -> Values { return {c.add(Op::detach, {c.tensor(arg(n, 0))})}; };
  table["aten::sum"] = reduction(false);
  table["aten::mean"] = reduction(true);
  table["aten::amax"] = amax;
  for (const std::string name : {"view", "reshape", "_reshape_alias", "flatten", "unflatten", "squeeze", "unsqueeze", "view_as",
                                 "reshape_as"}) {
    table["aten::" + name] = reshape_to_traced;
  }
  table["aten::permute"] = permute;
  table["aten::transpose"] = transpose;
  table["aten::t"] = t;
  table["aten::expand"] = expand;
  table["aten::expand_as"] = expand;
  table["aten::slice"] = slice_op;
  table["aten::select"] = select;
  for (const std::string how : {"split", "split_with_sizes", "chunk", "unbind"}) table["aten::" + how] = split(how);
  table["prim::ListConstruct"] = list_construct;
  table["prim::ListUnpack"] = list_unpack;
  table["aten::cat"] = [](ImportContext& c, const jit::Node& n) { return cat(c, n, false); };
  table["aten::stack"] = [](ImportContext& c, const jit::Node& n) { return cat(c, n, true); };
  for (const std::string name : {"matmul", "mm", "bmm"}) table["aten::" + name] = matmul_op;
  table["aten::linear"] = linear;
  table["aten::addmm"] = addmm;
  table["aten::embedding"] = embedding;
  table["aten::conv2d"] = convolution(false);
  table["aten::convolution"] = convolution(true);
  table["aten::_convolution"] = convolution(true);
  table["aten::max_pool2d"] = max_pool2d;
  table["aten::avg_pool2d"] = avg_pool2d;
  table["aten::arange"] = arange;
  table["aten::ones"] = filled(1.0, -1);
  table["aten::ones_like"] = filled(1.0, -1);
  table["aten::zeros"] = filled(0.0, -1);
  table["aten::zeros_like"] = filled(0.0, -1);
  table["aten::full"] = filled(0.0, 1);
  table["aten::full_like"] = filled(0.0, 1);
  table["aten::triu"] = triangle(true);
  table["aten::tril"] = triangle(false);
  table["aten::size"] = size;
  table["prim::NumToTensor"] = number_to_tensor;
  table["aten::item"] = data_dependent;
  table["aten::Int"] = data_dependent;
  table["aten::_local_scalar_dense"] = data_dependent;
}

}  // namespace trainc
