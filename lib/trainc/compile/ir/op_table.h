// defines: Op, OpKind, TRAINC_IR_OPS, op_name, op_kind, op_arity, kOpCount
//
// The one list of the compile planner's IR operations. Every per-op table (names, kinds, arity,
// shape rules, and later autodiff rules and code generators) is generated from or checked against
// this X-macro, so adding an op without updating a table fails to compile.
//
// Columns: X(op, kind, arity)   arity: number of tensor inputs (-1: any number >= 1)
#pragma once

#include <cstdint>

namespace trainc::ir {

enum class OpKind : uint8_t {
  kInput,      // a graph input (parameter or batch tensor); no inputs
  kConstant,   // a value made from attributes alone: constant (a scalar broadcast), iota (0..n-1)
  kRandom,     // fresh random numbers from the device's generator (never recomputed, never merged)
  kUnary,      // elementwise f(x)
  kBinary,     // elementwise f(x, y) with broadcasting
  kTernary,    // where(condition, x, y) with broadcasting
  kReduction,  // over attribute `axes`, keeping dimensions as size 1 when `keepdim`
  kView,       // changes only how elements are indexed
  kExtern,     // lowered to a library call (matmul, convolution, attention, embedding)
};

// clang-format off
#define TRAINC_IR_OPS(X)          \
  X(input, kInput, 0)             \
  X(constant, kConstant, 0)       \
  X(iota, kConstant, 0)           \
  X(bernoulli, kRandom, 0)        \
  X(neg, kUnary, 1)               \
  X(exp, kUnary, 1)               \
  X(log, kUnary, 1)               \
  X(tanh, kUnary, 1)              \
  X(erf, kUnary, 1)               \
  X(sqrt, kUnary, 1)              \
  X(rsqrt, kUnary, 1)             \
  X(reciprocal, kUnary, 1)        \
  X(relu, kUnary, 1)              \
  X(sigmoid, kUnary, 1)           \
  X(cast, kUnary, 1)              \
  X(detach, kUnary, 1)            \
  X(add, kBinary, 2)              \
  X(sub, kBinary, 2)              \
  X(mul, kBinary, 2)              \
  X(div, kBinary, 2)              \
  X(pow, kBinary, 2)              \
  X(maximum, kBinary, 2)          \
  X(gt, kBinary, 2)               \
  X(eq, kBinary, 2)               \
  X(where, kTernary, 3)           \
  X(sum, kReduction, 1)           \
  X(amax, kReduction, 1)          \
  X(reshape, kView, 1)            \
  X(permute, kView, 1)            \
  X(expand, kView, 1)             \
  X(slice, kView, 1)              \
  X(matmul, kExtern, 2)           \
  X(matmul_bias, kExtern, 3)      \
  X(embedding, kExtern, 2)        \
  X(attention, kExtern, 3)        \
  X(attention_grad, kExtern, 4)   \
  X(conv2d, kExtern, 2)           \
  X(concat, kExtern, -1)          \
  X(slice_backward, kExtern, 1)   \
  X(embedding_grad, kExtern, 2)   \
  X(conv2d_input_grad, kExtern, 3) \
  X(conv2d_weight_grad, kExtern, 3) \
  X(max_pool2d_indices, kExtern, 1) \
  X(max_pool2d, kExtern, 2)       \
  X(max_pool2d_grad, kExtern, 3)  \
  X(avg_pool2d, kExtern, 1)       \
  X(avg_pool2d_grad, kExtern, 2)  \
  X(linear_cross_entropy, kExtern, 3) \
  X(linear_cross_entropy_grad, kExtern, 4) \
  X(sum_to_float, kExtern, 1)     \
  X(bitcast, kExtern, 1)          \
  X(linear_cross_entropy_and_dlogits, kExtern, 3) \
  X(linear_cross_entropy_grad_from_dlogits, kExtern, 4) \
  X(attention_and_lse, kExtern, 3) \
  X(attention_grad_from_lse, kExtern, 6) \
  X(matmul_to_float, kExtern, 2)   \
  X(attention_grad_and_bias_sums, kExtern, 6) \
  X(attention_lse, kExtern, 1)    \
  X(embedding_grad_add, kExtern, 3) \
  X(matmul_bias_gelu, kExtern, 3) \
  X(matmul_gelu_grad, kExtern, 3)
// clang-format on

enum class Op : uint8_t {
#define TRAINC_IR_OP_ENUM(op, kind, arity) op,
  TRAINC_IR_OPS(TRAINC_IR_OP_ENUM)
#undef TRAINC_IR_OP_ENUM
};

#define TRAINC_IR_OP_COUNT(op, kind, arity) +1
inline constexpr int kOpCount = 0 TRAINC_IR_OPS(TRAINC_IR_OP_COUNT);
#undef TRAINC_IR_OP_COUNT

const char* op_name(Op op);
OpKind op_kind(Op op);
int op_arity(Op op);
bool is_comparison(Op op);  // gt, eq: their result is bool

}  // namespace trainc::ir
