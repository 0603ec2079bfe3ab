// The compile planner's IR: the op table, every op's shape rule (one table row per op at least,
// checked), the verifier and the printer.
#include <catch2/catch.hpp>

#include <set>

#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/ir/graph.h"
#include "trainc/compile/passes/cse.h"
#include "trainc/compile/passes/dce.h"

using namespace trainc::ir;
using trainc::JointGraph;
using trainc::differentiate;
using Catch::Matchers::Contains;

namespace {

TensorType f32(std::vector<int64_t> shape) { return {DType::f32, std::move(shape)}; }

struct ShapeCase {
  Op op;
  std::vector<TensorType> inputs;
  Attributes attrs;
  TensorType expected;  // ignored when `error` is set
  std::string error;    // a substring of the IrError, or empty
};

Attributes ints(std::vector<int64_t> values) {
  Attributes attrs;
  attrs.ints = std::move(values);
  return attrs;
}

std::vector<ShapeCase> shape_cases() {
  Attributes keepdim = ints({-1});
  keepdim.keepdim = true;
  Attributes to_bf16;
  to_bf16.dtype = DType::bf16;
  Attributes constant = ints({2, 3});
  constant.scalar = 0.5;
  Attributes iota = ints({7});
  iota.dtype = DType::i64;
  Attributes draw = ints({3, 4});
  draw.scalar = 0.9;
  Attributes f32_loss;  // linear_cross_entropy: the loss in float32, label smoothing 0.1
  f32_loss.dtype = DType::f32;
  f32_loss.scalar = 0.1;
  const auto bf16 = [](std::vector<int64_t> shape) { return TensorType{DType::bf16, std::move(shape)}; };
  std::vector<ShapeCase> cases = {
      {Op::constant, {}, constant, f32({2, 3}), ""},
      {Op::cast, {f32({4})}, to_bf16, {DType::bf16, {4}}, ""},
      {Op::add, {f32({8, 1}), f32({4})}, {}, f32({8, 4}), ""},
      {Op::sub, {f32({3}), f32({4})}, {}, {}, "cannot broadcast"},
      {Op::mul, {f32({2, 3}), {DType::bf16, {2, 3}}}, {}, {}, "differ in dtype"},
      {Op::div, {f32({2, 3}), f32({2, 3})}, {}, f32({2, 3}), ""},
      {Op::pow, {f32({2, 3}), f32({})}, {}, f32({2, 3}), ""},
      {Op::maximum, {f32({1, 5}), f32({6, 1})}, {}, f32({6, 5}), ""},
      {Op::gt, {f32({5}), f32({5})}, {}, {DType::b8, {5}}, ""},
      {Op::eq, {f32({5}), f32({1})}, {}, {DType::b8, {5}}, ""},
      {Op::where, {{DType::b8, {4, 1}}, f32({4, 3}), f32({3})}, {}, f32({4, 3}), ""},
      {Op::where, {f32({4}), f32({4}), f32({4})}, {}, {}, "condition must be b8"},
      {Op::sum, {f32({2, 3, 4})}, ints({1}), f32({2, 4}), ""},
      {Op::amax, {f32({2, 3, 4})}, keepdim, f32({2, 3, 1}), ""},
      {Op::sum, {f32({2, 3})}, ints({2}), {}, "out of range"},
      {Op::reshape, {f32({2, 6})}, ints({3, 4}), f32({3, 4}), ""},
      {Op::reshape, {f32({2, 6})}, ints({5}), {}, "changes the element count"},
      {Op::permute, {f32({2, 3, 4})}, ints({2, 0, 1}), f32({4, 2, 3}), ""},
      {Op::permute, {f32({2, 3})}, ints({0, 0}), {}, "not a permutation"},
      {Op::expand, {f32({3, 1})}, ints({2, 3, 5}), f32({2, 3, 5}), ""},
      {Op::expand, {f32({3, 2})}, ints({3, 5}), {}, "is not 1"},
      {Op::slice, {f32({4, 10})}, ints({1, 2, 9, 3}), f32({4, 3}), ""},
      {Op::slice, {f32({4, 10})}, ints({1, 2, 11, 1}), {}, "out of range"},
      {Op::matmul, {f32({5, 2, 3}), f32({3, 4})}, {}, f32({5, 2, 4}), ""},
      {Op::matmul, {f32({5, 2, 3}), f32({1, 3, 4})}, {}, f32({5, 2, 4}), ""},
      {Op::matmul, {f32({2, 3}), f32({4, 5})}, {}, {}, "inner dimensions differ"},
      {Op::matmul_bias, {f32({5, 2, 3}), f32({3, 4}), f32({4})}, {}, f32({5, 2, 4}), ""},
      {Op::matmul_bias, {f32({2, 3}), f32({3, 4}), f32({2, 4})}, {}, {}, "needs a bias [n]"},
      {Op::embedding, {f32({100, 16}), {DType::i64, {4, 8}}}, {}, f32({4, 8, 16}), ""},
      {Op::embedding, {f32({100, 16}), f32({4})}, {}, {}, "indices must be i64"},
      {Op::attention, {f32({2, 4, 8, 16}), f32({2, 4, 8, 16}), f32({2, 4, 8, 32})}, {}, f32({2, 4, 8, 32}), ""},
      {Op::attention_grad, {f32({2, 4, 8, 16}), f32({2, 4, 8, 16}), f32({2, 4, 8, 16}), f32({2, 4, 8, 16})}, {}, f32({3, 2, 4, 8, 16}), ""},
      {Op::attention_grad, {f32({2, 4, 8, 16}), f32({2, 4, 8, 16}), f32({2, 4, 8, 32}), f32({2, 4, 8, 16})}, {}, {}, "of one type"},
      {Op::conv2d, {f32({2, 3, 28, 28}), f32({8, 3, 3, 3})}, ints({1, 1}), f32({2, 8, 28, 28}), ""},
      {Op::conv2d, {f32({2, 3, 28, 28}), f32({8, 4, 3, 3})}, ints({1, 1}), {}, "channels differ"},
      {Op::iota, {}, iota, {DType::i64, {7}}, ""},
      {Op::bernoulli, {}, draw, f32({3, 4}), ""},
      {Op::detach, {{DType::i64, {3}}}, {}, {DType::i64, {3}}, ""},
      {Op::concat, {f32({2, 3}), f32({2, 5})}, ints({1}), f32({2, 8}), ""},
      {Op::concat, {f32({2, 3}), f32({3, 5})}, ints({1}), {}, "differ outside dimension"},
      {Op::slice_backward, {f32({4, 3})}, ints({1, 2, 9, 3, 4, 10}), f32({4, 10}), ""},
      {Op::slice_backward, {f32({4, 2})}, ints({1, 2, 9, 3, 4, 10}), {}, "does not fit"},
      {Op::embedding_grad, {f32({4, 8, 16}), {DType::i64, {4, 8}}}, ints({100}), f32({100, 16}), ""},
      {Op::conv2d_input_grad, {f32({2, 8, 28, 28}), f32({2, 3, 28, 28}), f32({8, 3, 3, 3})}, ints({1, 1}), f32({2, 3, 28, 28}), ""},
      {Op::conv2d_weight_grad, {f32({2, 8, 28, 28}), f32({2, 3, 28, 28}), f32({8, 3, 3, 3})}, ints({1, 1}), f32({8, 3, 3, 3}), ""},
      {Op::conv2d_weight_grad, {f32({2, 8, 27, 28}), f32({2, 3, 28, 28}), f32({8, 3, 3, 3})}, ints({1, 1}), {}, "does not fit"},
      {Op::max_pool2d_indices, {f32({2, 3, 28, 28})}, ints({2, 2, 0}), {DType::i64, {2, 3, 14, 14}}, ""},
      {Op::max_pool2d_indices, {f32({2, 3, 28, 28})}, ints({2, 2, 3}), {}, "padding"},
      {Op::max_pool2d, {f32({2, 3, 28, 28}), {DType::i64, {2, 3, 14, 14}}}, ints({2, 2, 0}), f32({2, 3, 14, 14}), ""},
      {Op::max_pool2d, {f32({2, 3, 28, 28}), f32({2, 3, 14, 14})}, ints({2, 2, 0}), {}, "max_pool2d_indices"},
      {Op::max_pool2d_grad, {f32({2, 3, 14, 14}), f32({2, 3, 28, 28}), {DType::i64, {2, 3, 14, 14}}}, ints({2, 2, 0}),
       f32({2, 3, 28, 28}), ""},
      {Op::avg_pool2d, {f32({2, 3, 28, 28})}, ints({3, 2, 1, 1}), f32({2, 3, 14, 14}), ""},
      {Op::avg_pool2d_grad, {f32({2, 3, 14, 14}), f32({2, 3, 28, 28})}, ints({3, 2, 1, 1}), f32({2, 3, 28, 28}), ""},
      {Op::linear_cross_entropy, {bf16({6, 5}), bf16({7, 5}), {DType::i64, {6}}}, f32_loss, f32({6}), ""},
      {Op::linear_cross_entropy, {bf16({6, 5}), f32({7, 5}), {DType::i64, {6}}}, f32_loss, {}, "one floating dtype"},
      {Op::linear_cross_entropy, {f32({6, 5}), f32({7, 5}), {DType::i64, {5}}}, f32_loss, {}, "targets must be i64 [N]"},
      {Op::linear_cross_entropy_grad, {bf16({6, 5}), bf16({7, 5}), {DType::i64, {6}}, f32({6})}, f32_loss, bf16({6 * 5 + 7 * 5}), ""},
      {Op::linear_cross_entropy_grad, {bf16({6, 5}), bf16({7, 5}), {DType::i64, {6}}, bf16({6})}, f32_loss, {}, "the loss's type"},
      {Op::sum_to_float, {bf16({16, 4, 8})}, ints({0, 1}), f32({8}), ""},
      {Op::sum_to_float, {f32({16, 8})}, ints({0}), {}, "sums bf16 or f16"},
      {Op::matmul_to_float, {bf16({768, 16}), bf16({16, 3072})}, {}, f32({768, 3072}), ""},
      {Op::matmul_to_float, {f32({4, 16}), f32({16, 8})}, {}, {}, "multiplies bf16 or f16"},
      {Op::matmul_to_float, {bf16({2, 4, 16}), bf16({16, 8})}, {}, {}, "multiplies matrices"},
      {Op::matmul_to_float, {bf16({4, 16}), bf16({15, 8})}, {}, {}, "inner dimensions differ"},
      {Op::attention_and_lse, {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 6})}, {}, bf16({2, 3, 4, 6}), ""},
      {Op::attention_lse, {bf16({2, 3, 4, 6})}, {}, f32({2, 3, 4}), ""},
      {Op::attention_lse, {bf16({2, 12, 6})}, {}, {}, "takes an attention's output"},
      {Op::attention_grad_from_lse,
       {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), f32({2, 3, 4}), bf16({2, 3, 4, 8})}, {},
       bf16({3, 2, 3, 4, 8}), ""},
      {Op::attention_grad_from_lse,
       {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 6}), f32({2, 3, 4}), bf16({2, 3, 4, 8})}, {}, {},
       "takes attention_and_lse's output bf16[2, 3, 4, 8]"},
      {Op::attention_grad_from_lse,
       {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), f32({2, 3}), bf16({2, 3, 4, 8})}, {}, {},
       "takes the output's attention_lse f32[2, 3, 4]"},
      // The stack [2, 4, 3, 3, 8] (576 elements, 1152 bytes: 18 x 64), then 72 float32 sums in 144.
      {Op::attention_grad_and_bias_sums,
       {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), f32({2, 3, 4}), bf16({2, 3, 4, 8})}, {},
       bf16({576 + 144}), ""},
      {Op::attention_grad_and_bias_sums,
       {bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), bf16({2, 3, 4, 8}), f32({2, 4}), bf16({2, 3, 4, 8})}, {}, {},
       "takes the output's attention_lse f32[2, 3, 4]"},
      // 9 float32 sums are 36 bytes: no whole number of float64 elements.
      {Op::attention_grad_and_bias_sums,
       {{DType::f64, {1, 1, 2, 3}}, {DType::f64, {1, 1, 2, 3}}, {DType::f64, {1, 1, 2, 3}}, {DType::f64, {1, 1, 2, 3}}, f32({1, 1, 2}),
        {DType::f64, {1, 1, 2, 3}}},
       {}, {}, "do not fill whole elements of f64"},
      {Op::embedding_grad_add, {bf16({10, 8}), f32({2, 3, 8}), {DType::i64, {2, 3}}}, ints({10}), f32({10, 8}), ""},
      {Op::embedding_grad_add, {bf16({10, 7}), f32({2, 3, 8}), {DType::i64, {2, 3}}}, ints({10}), {}, "adds into a floating [10, 8]"},
      {Op::embedding_grad_add, {{DType::i64, {10, 8}}, f32({2, 3, 8}), {DType::i64, {2, 3}}}, ints({10}), {}, "adds into a floating"},
      {Op::matmul_bias_gelu, {bf16({2, 5, 8}), bf16({8, 6}), bf16({6})}, {}, bf16({2, 2, 5, 6}), ""},
      {Op::matmul_bias_gelu, {f32({5, 8}), f32({8, 6}), f32({6})}, {}, {}, "multiplies bf16 or f16"},
      {Op::matmul_bias_gelu, {bf16({5, 8}), bf16({8, 6}), bf16({5})}, {}, {}, "needs a bias [n]"},
      {Op::matmul_gelu_grad, {bf16({2, 5, 8}), bf16({8, 6}), bf16({2, 5, 6})}, {}, bf16({2, 5, 6}), ""},
      {Op::matmul_gelu_grad, {f32({5, 8}), f32({8, 6}), f32({5, 6})}, {}, {}, "multiplies bf16 or f16"},
      {Op::matmul_gelu_grad, {bf16({5, 8}), bf16({8, 6}), bf16({6, 5})}, {}, {}, "GELU input has the product's type bf16[5, 6]"},
      {Op::bitcast, {bf16({8})}, f32_loss, f32({4}), ""},
      {Op::bitcast, {bf16({7})}, f32_loss, {}, "not a whole number of f32"},
      {Op::bitcast, {bf16({2, 4})}, f32_loss, {}, "takes a flat tensor"},
      // 6 float32 losses in 12 bf16 elements, the gradient from element 32 (64 bytes), rows of 64, then
      // the weight padded to 64 rows.
      {Op::linear_cross_entropy_and_dlogits, {bf16({6, 5}), bf16({7, 5}), {DType::i64, {6}}}, f32_loss, bf16({32 + 6 * 64 + 64 * 5}), ""},
      {Op::linear_cross_entropy_and_dlogits, {{DType::f64, {5, 5}}, {DType::f64, {7, 5}}, {DType::i64, {5}}}, f32_loss, {},
       "do not fill whole elements of f64"},
      // x's gradient, then the weight's over the 64 padded rows.
      {Op::linear_cross_entropy_grad_from_dlogits, {bf16({32 + 6 * 64 + 64 * 5}), bf16({6, 5}), bf16({7, 5}), f32({6})}, f32_loss,
       bf16({6 * 5 + 64 * 5}), ""},
      {Op::linear_cross_entropy_grad_from_dlogits, {bf16({6 * 64}), bf16({6, 5}), bf16({7, 5}), f32({6})}, f32_loss, {},
       "takes linear_cross_entropy_and_dlogits's bf16[736]"},
  };
  for (Op op : {Op::neg, Op::exp, Op::log, Op::tanh, Op::erf, Op::sqrt, Op::rsqrt, Op::reciprocal, Op::relu, Op::sigmoid}) {
    cases.push_back({op, {f32({3, 7})}, {}, f32({3, 7}), ""});
  }
  cases.push_back({Op::exp, {{DType::i64, {3}}}, {}, {}, "needs a floating input"});
  return cases;
}

}  // namespace

TEST_CASE("the op table: unique names, consistent kinds and arities", "[unit][ir]") {
  std::set<std::string> names;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    INFO(op_name(op));
    CHECK(names.insert(op_name(op)).second);
    const OpKind kind = op_kind(op);
    if (kind == OpKind::kUnary || kind == OpKind::kReduction || kind == OpKind::kView) CHECK(op_arity(op) == 1);
    if (kind == OpKind::kBinary) CHECK(op_arity(op) == 2);
    if (kind == OpKind::kTernary) CHECK(op_arity(op) == 3);
    if (kind == OpKind::kInput || kind == OpKind::kConstant || kind == OpKind::kRandom) CHECK(op_arity(op) == 0);
  }
}

TEST_CASE("every op's shape rule, table-driven, with every op covered", "[unit][ir]") {
  std::set<Op> covered = {Op::input};  // inputs carry a given type and have no rule
  for (const ShapeCase& c : shape_cases()) {
    INFO(op_name(c.op) << " expecting " << (c.error.empty() ? c.expected.str() : "error: " + c.error));
    covered.insert(c.op);
    if (c.error.empty()) {
      CHECK(infer_type(c.op, c.inputs, c.attrs) == c.expected);
    } else {
      CHECK_THROWS_WITH(infer_type(c.op, c.inputs, c.attrs), Contains(c.error));
    }
  }
  CHECK(static_cast<int>(covered.size()) == kOpCount);
}

TEST_CASE("a graph prints as text and verifies", "[unit][ir]") {
  //   x: f32[8, 4]   w: f32[4]
  //        \         /
  //         mul(x, w) -> sum over axis 1 -> output
  Graph graph;
  const ValueId x = graph.add_input("x", f32({8, 4}));
  const ValueId w = graph.add_input("w", f32({4}));
  const ValueId product = graph.add(Op::mul, {x, w});
  const ValueId total = graph.add(Op::sum, {product}, ints({1}));
  graph.mark_output(total);
  CHECK_NOTHROW(verify(graph));
  CHECK(to_text(graph) ==
        "graph(%0: f32[8, 4] x, %1: f32[4] w) {\n"
        "  %2: f32[8, 4] = mul(%0, %1)\n"
        "  %3: f32[8] = sum(%2) {ints=[1]}\n"
        "  return (%3)\n"
        "}\n");
}

TEST_CASE("ill-typed nodes are refused when added and caught by the verifier", "[unit][ir]") {
  Graph graph;
  const ValueId x = graph.add_input("x", f32({2, 3}));
  CHECK_THROWS_WITH(graph.add(Op::matmul, {x, x}), Contains("%1 = matmul: matmul inner dimensions differ"));
  CHECK_THROWS_WITH(graph.add(Op::input, {}), Contains("add_input"));

  std::vector<Node> nodes = graph.nodes();
  Node wrong;
  wrong.op = Op::relu;
  wrong.inputs = {x};
  wrong.type = f32({3, 2});
  nodes.push_back(wrong);
  CHECK_THROWS_WITH(verify(Graph::from_nodes(nodes, {1})), Contains("%1 = relu: typed f32[3, 2], its inputs give f32[2, 3]"));

  Node early;
  early.op = Op::neg;
  early.inputs = {2};
  early.type = f32({2, 3});
  std::vector<Node> out_of_order = {graph.nodes()[0], early, early};
  CHECK_THROWS_WITH(verify(Graph::from_nodes(out_of_order, {})), Contains("%1 = neg: input %2 is not defined before use"));
}

TEST_CASE("dead code elimination keeps inputs and what the outputs need", "[unit][ir][passes]") {
  //   x -> neg (unused)     x -> exp -> output     y (unused input, kept)
  Graph graph;
  const ValueId x = graph.add_input("x", f32({3}));
  graph.add_input("y", f32({3}));
  graph.add(Op::neg, {x});
  graph.mark_output(graph.add(Op::exp, {x}));
  const Graph pruned = eliminate_dead_code(graph);
  CHECK_NOTHROW(verify(pruned));
  CHECK(to_text(pruned) ==
        "graph(%0: f32[3] x, %1: f32[3] y) {\n"
        "  %2: f32[3] = exp(%0)\n"
        "  return (%2)\n"
        "}\n");
}

TEST_CASE("common subexpression elimination merges identical nodes, not different attributes", "[unit][ir][passes]") {
  //   a = exp(x); b = exp(x); c = add(a, b); s1 = sum(c, axis 0); s2 = sum(c, axis 1)
  Graph graph;
  const ValueId x = graph.add_input("x", f32({2, 2}));
  const ValueId a = graph.add(Op::exp, {x});
  const ValueId b = graph.add(Op::exp, {x});
  const ValueId c = graph.add(Op::add, {a, b});
  graph.mark_output(graph.add(Op::sum, {c}, ints({0})));
  graph.mark_output(graph.add(Op::sum, {c}, ints({1})));
  const Graph merged = eliminate_dead_code(eliminate_common_subexpressions(graph));
  CHECK_NOTHROW(verify(merged));
  CHECK(to_text(merged) ==
        "graph(%0: f32[2, 2] x) {\n"
        "  %1: f32[2, 2] = exp(%0)\n"
        "  %2: f32[2, 2] = add(%1, %1)\n"
        "  %3: f32[2] = sum(%2) {ints=[0]}\n"
        "  %4: f32[2] = sum(%2) {ints=[1]}\n"
        "  return (%3, %4)\n"
        "}\n");
}

TEST_CASE("max pooling's backward scatters to the positions its forward found, without pooling again", "[unit][ir][autodiff]") {
  Graph forward;
  const ValueId x = forward.add_input("x", f32({2, 3, 8, 8}));
  const ValueId indices = forward.add(Op::max_pool2d_indices, {x}, ints({2, 2, 0}));
  const ValueId pooled = forward.add(Op::max_pool2d, {x, indices}, ints({2, 2, 0}));
  forward.mark_output(forward.add(Op::sum, {pooled}, ints({0, 1, 2, 3})));
  const JointGraph joint = differentiate(forward, {true});
  int pools = 0, grads = 0;
  for (const Node& node : joint.graph.nodes()) {
    pools += node.op == Op::max_pool2d_indices;
    if (node.op != Op::max_pool2d_grad) continue;
    ++grads;
    CHECK(joint.graph.node(node.inputs[2]).op == Op::max_pool2d_indices);
  }
  CHECK(pools == 1);
  CHECK(grads == 1);
}
