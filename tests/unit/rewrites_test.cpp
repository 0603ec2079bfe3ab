// The rewrites inductor runs on a program before fusion, on small graphs: slice gradients into a
// concat (slice_grads_to_concat), products made in the layout they are read in
// (transpose_products), sums and products of bf16 values made in float32 (sums_of_widened,
// products_to_float).
#include <catch2/catch.hpp>

#include "support/ir_builders.h"
#include "trainc/compile/passes/products_to_float.h"
#include "trainc/compile/passes/slice_grads_to_concat.h"
#include "trainc/compile/passes/sums_of_widened.h"
#include "trainc/compile/passes/transpose_products.h"

using namespace trainc;
using namespace trainc::ir;
using trainc::test::bf16;
using trainc::test::f32;
using trainc::test::ints;

TEST_CASE("a sum of slice gradients tiling a dimension becomes a concat", "[unit][fusion]") {
  //   add(add(slice_backward(a, 0:4), slice_backward(b, 4:8)), slice_backward(c, 8:12))  ->  concat(a, b, c)
  Graph g;
  std::vector<ValueId> parts;
  for (int i = 0; i < 3; ++i) parts.push_back(g.add_input("g" + std::to_string(i), f32({2, 4})));
  const auto piece = [&](ValueId part, int64_t start) { return g.add(Op::slice_backward, {part}, ints({1, start, start + 4, 1, 2, 12})); };
  g.mark_output(g.add(Op::add, {g.add(Op::add, {piece(parts[0], 0), piece(parts[1], 4)}), piece(parts[2], 8)}));
  const Graph rewritten = slice_grads_to_concat(g);
  verify(rewritten);
  REQUIRE(rewritten.size() == 4);
  CHECK(rewritten.node(3).op == Op::concat);
  CHECK(rewritten.node(3).inputs == std::vector<ValueId>{0, 1, 2});
  // With a gap the sum stays.
  Graph gap;
  const ValueId a = gap.add_input("a", f32({2, 4}));
  const ValueId b = gap.add_input("b", f32({2, 4}));
  gap.mark_output(gap.add(Op::add, {gap.add(Op::slice_backward, {a}, ints({1, 0, 4, 1, 2, 12})),
                                    gap.add(Op::slice_backward, {b}, ints({1, 8, 12, 1, 2, 12}))}));
  CHECK(slice_grads_to_concat(gap).size() == gap.size());
}

TEST_CASE("the transpose of a product is made as the product of the transposes", "[unit][fusion]") {
  //   permute(matmul(x^T, g), {1, 0})   ->   matmul(permute(g), permute(x^T))    (a weight gradient)
  Graph g;
  const ValueId x = g.add_input("x", f32({8, 3}));
  const ValueId grad = g.add_input("g", f32({8, 5}));
  const ValueId product = g.add(Op::matmul, {g.add(Op::permute, {x}, ints({1, 0})), grad});
  g.mark_output(g.add(Op::permute, {product}, ints({1, 0})));
  const Graph rewritten = transpose_products(g);
  verify(rewritten);
  const Node& result = rewritten.node(rewritten.outputs()[0]);
  CHECK(result.op == Op::matmul);
  CHECK(result.type.shape == std::vector<int64_t>{5, 3});
  CHECK(rewritten.node(result.inputs[0]).op == Op::permute);
  CHECK(rewritten.node(result.inputs[0]).inputs[0] == 1);  // g
  // A product something else reads too is left alone.
  Graph shared = g;
  shared.mark_output(product);
  CHECK(transpose_products(shared).node(transpose_products(shared).outputs()[0]).op == Op::permute);
}

TEST_CASE("a cast between a product and its transpose moves past the transpose", "[unit][fusion]") {
  //   permute(cast(matmul(x^T, g), f32), {1, 0})   ->   cast(matmul(permute(g), permute(x^T)), f32)
  // (autocast's weight gradient: a bf16 product, cast to float32, transposed)
  Graph g;
  const ValueId x = g.add_input("x", bf16({8, 3}));
  const ValueId grad = g.add_input("g", bf16({8, 5}));
  const ValueId product = g.add(Op::matmul, {g.add(Op::permute, {x}, ints({1, 0})), grad});
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  const ValueId widened = g.add(Op::cast, {product}, to_f32);
  g.mark_output(g.add(Op::permute, {widened}, ints({1, 0})));
  const Graph rewritten = transpose_products(g);
  verify(rewritten);
  const Node& result = rewritten.node(rewritten.outputs()[0]);
  CHECK(result.op == Op::cast);
  CHECK(result.type == f32({5, 3}));
  const Node& made = rewritten.node(result.inputs[0]);
  CHECK(made.op == Op::matmul);
  CHECK(made.type == bf16({5, 3}));
  CHECK(rewritten.node(made.inputs[0]).inputs[0] == 1);  // g
  // A cast something else reads too is left alone.
  Graph shared = g;
  shared.mark_output(widened);
  CHECK(transpose_products(shared).node(transpose_products(shared).outputs()[0]).op == Op::permute);
}

TEST_CASE("a leading-axis sum of a bf16 value cast to float32 sums the bf16 value itself", "[unit][fusion]") {
  Graph g;
  const ValueId x = g.add_input("x", {DType::bf16, {6, 8}});
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  const ValueId wide = g.add(Op::cast, {x}, to_f32);
  g.mark_output(g.add(Op::sum, {wide}, ints({0})));   // leading: ATen's, reads the bf16 value
  g.mark_output(g.add(Op::sum, {wide}, ints({-1})));  // trailing: a kernel's, which casts as it reads
  const Graph rewritten = sums_of_widened(g);
  verify(rewritten);
  const Node& leading = rewritten.node(rewritten.outputs()[0]);
  CHECK(leading.op == Op::sum_to_float);
  CHECK(leading.inputs == std::vector<ValueId>{x});
  CHECK(leading.type == f32({8}));
  const Node& trailing = rewritten.node(rewritten.outputs()[1]);
  CHECK(trailing.op == Op::sum);
  CHECK(rewritten.node(trailing.inputs[0]).op == Op::cast);
  // The schedule no longer stores the float32 cast for ATen when only the leading sum read it.
  Graph only_leading;
  const ValueId y = only_leading.add_input("y", {DType::bf16, {6, 8}});
  only_leading.mark_output(only_leading.add(Op::sum, {only_leading.add(Op::cast, {y}, to_f32)}, ints({0})));
  const Graph plain = sums_of_widened(only_leading);
  CHECK(plain.size() == 2);  // the input and one sum_to_float: the cast is gone
}

TEST_CASE("a widened leading-axis sum of a bf16 value is one sum to float32", "[unit][fusion]") {
  // cast(sum(g: bf16 [6, 8], {0}), f32): a bias gradient under autocast.
  Graph g;
  const ValueId grad = g.add_input("g", bf16({6, 8}));
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  const ValueId sum = g.add(Op::sum, {grad}, ints({0}));
  g.mark_output(g.add(Op::cast, {sum}, to_f32));
  const Graph rewritten = sums_of_widened(g);
  verify(rewritten);
  REQUIRE(rewritten.size() == 2);
  const Node& result = rewritten.node(rewritten.outputs()[0]);
  CHECK(result.op == Op::sum_to_float);
  CHECK(result.inputs == std::vector<ValueId>{grad});
  CHECK(result.type == f32({8}));
  // Left alone: a bf16 sum something else reads, and a trailing sum (a kernel's).
  Graph shared = g;
  shared.mark_output(sum);
  CHECK(to_text(sums_of_widened(shared)) == to_text(shared));
  Graph trailing;
  trailing.mark_output(trailing.add(Op::cast, {trailing.add(Op::sum, {trailing.add_input("g", bf16({6, 8}))}, ints({1}))}, to_f32));
  CHECK(to_text(sums_of_widened(trailing)) == to_text(trailing));
}

TEST_CASE("a float32 cast of a bf16 matrix product is one product to float32", "[unit][fusion]") {
  // g: bf16 [5, 4], x: bf16 [4, 3]; cast(g x, f32) is a weight gradient under autocast.
  Graph g;
  const ValueId grad = g.add_input("g", bf16({5, 4}));
  const ValueId x = g.add_input("x", bf16({4, 3}));
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  const ValueId product = g.add(Op::matmul, {grad, x});
  g.mark_output(g.add(Op::cast, {product}, to_f32));
  const Graph rewritten = products_to_float(g);
  verify(rewritten);
  REQUIRE(rewritten.size() == 3);  // the inputs and the product: no cast, no bf16 product left
  const Node& result = rewritten.node(rewritten.outputs()[0]);
  CHECK(result.op == Op::matmul_to_float);
  CHECK(result.inputs == std::vector<ValueId>{grad, x});
  CHECK(result.type == f32({5, 3}));
  // Left alone: a product something else reads in bf16, a cast to another dtype, a batched product.
  Graph shared = g;
  shared.mark_output(product);
  CHECK(to_text(products_to_float(shared)) == to_text(shared));
  Graph to_f16;
  Attributes f16_attrs;
  f16_attrs.dtype = DType::f16;
  to_f16.mark_output(to_f16.add(Op::cast, {to_f16.add(Op::matmul, {to_f16.add_input("g", bf16({5, 4})), to_f16.add_input("x", bf16({4, 3}))})},
                                f16_attrs));
  CHECK(to_text(products_to_float(to_f16)) == to_text(to_f16));
  Graph batched;
  batched.mark_output(batched.add(
      Op::cast, {batched.add(Op::matmul, {batched.add_input("g", bf16({2, 5, 4})), batched.add_input("x", bf16({2, 4, 3}))})}, to_f32));
  CHECK(to_text(products_to_float(batched)) == to_text(batched));
}
