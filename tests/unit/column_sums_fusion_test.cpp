// On a GPU, sums over leading dimensions (parameter gradients) as column members of the kernels
// that make or load what they add up (passes/fusion), where a sum met before such a kernel waits
// for it, and where one that no kernel takes is placed; and the CUDA those kernels render to.
#include <algorithm>

#include <catch2/catch.hpp>

#include "support/ir_builders.h"
#include "support/schedule_steps.h"
#include "support/scoped_variable.h"
#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/runtime/cuda_modules.h"

using namespace trainc;
using namespace trainc::ir;
using Catch::Matchers::Contains;
using trainc::test::f32;
using trainc::test::ints;
using trainc::test::scalar;
using trainc::test::steps_of;

TEST_CASE("on a GPU a sum over the leading dimensions joins the kernel that makes or loads what it sums", "[unit][fusion]") {
  // A layer norm's backward with its parameters' gradients (g: the output's gradient, x: x-hat):
  //   g ──sum(rows)──div──sub──> dx (element)     sum over the leading dims of g      (bias)
  //                                               sum over the leading dims of g * x  (weight)
  // twice: the second layer's g is a product's output.
  Graph g;
  const auto layer = [&](ValueId grad, ValueId x) {
    const ValueId d = g.add(Op::constant, {}, scalar(64.0));
    g.mark_output(g.add(Op::sub, {grad, g.add(Op::div, {g.add(Op::sum, {grad}, ints({2}, true)), d})}));
    const ValueId bias = g.add(Op::sum, {grad}, ints({0, 1}));
    const ValueId weight = g.add(Op::sum, {g.add(Op::mul, {grad, x})}, ints({0, 1}));
    g.mark_output(bias);
    g.mark_output(weight);
    return std::vector<ValueId>{bias, weight};
  };
  const std::vector<ValueId> sums = layer(g.add_input("g", f32({16, 64, 64})), g.add_input("x", f32({16, 64, 64})));
  const ValueId product = g.add(Op::matmul, {g.add_input("g2", f32({16, 64, 64})), g.add_input("w2", f32({64, 64}))});
  layer(product, g.add_input("x2", f32({16, 64, 64})));
  // Without column sums (the CPU), they are ATen calls reading stored values.
  CHECK(steps_of(g, schedule_kernels(g)) ==
        std::vector<std::string>{"sum div sub", "aten:sum", "mul", "aten:sum", "aten:matmul", "sum div sub", "aten:sum", "mul", "aten:sum"});
  // Over fewer than 1024 rows (a kernel of fewer blocks than a GPU has room for), they stay ATen's.
  Graph few;
  const ValueId small = few.add_input("g", f32({4, 8, 64}));
  few.mark_output(few.add(Op::exp, {small}));
  few.mark_output(few.add(Op::sum, {few.add(Op::exp, {small})}, ints({0, 1})));
  CHECK(steps_of(few, schedule_kernels(few, {}, true)) == std::vector<std::string>{"exp exp", "aten:sum"});
  // With them, the sum of g joins the kernel that loads g, and the sum of g * x the kernel that
  // computes g * x (the same one: g * x reads no kernel's value and joins the newest).
  const Schedule s = schedule_kernels(g, {}, /*column_sums=*/true);
  CHECK(steps_of(g, s) == std::vector<std::string>{"sum div sub sum mul sum", "aten:matmul", "sum div sub sum mul sum"});
  const FusedKernel& first = s.kernels.front();
  CHECK(first.reduce_from == 2);
  CHECK(first.column_split == 2);
  CHECK(std::count(first.roles.begin(), first.roles.end(), KernelRole::column) == 2);

  const codegen::RenderedProgram program = codegen::render_cuda_kernels(g, s, "bwd");
  REQUIRE(program.kernels.size() == 2);
  const codegen::RenderedKernel& kernel = program.kernels.front();
  CHECK(kernel.finish_outputs == sums);
  // 8 groups of 8 columns, one a lane: a row a warp, eight rows a block (warp_rows), and a block's
  // partial sums added over its warps in shared memory.
  CHECK(kernel.block == 256);
  CHECK(kernel.grid == 128);
  CHECK(kernel.workspace_floats == 2 * 128 * 64);
  CHECK(kernel.finish_symbol == "trainc_kernel_bwd_0_finish");
  CHECK(kernel.finish_grid == 4);  // two sums of 64 columns, 32 a block
  // Both begin by waiting for the kernel before them, so runtime/cuda_modules may launch them early.
  CHECK(kernel_waits_for_previous(kernel.source, kernel.symbol));
  CHECK(kernel_waits_for_previous(kernel.source, kernel.finish_symbol));
  CHECK_THAT(kernel.source, Contains("float* __restrict__ ws)") && Contains("o = blockIdx.x * 8 + (threadIdx.x >> 5); o < 1024; o += gridDim.x * 8)") &&
                                Contains("k_warp_reduce<true>(acc") && Contains("__shared__ float warp_sums[8][64];") &&
                                Contains("__global__ void __launch_bounds__(1024) trainc_kernel_bwd_0_finish("));
  CHECK_THAT(kernel.source, !Contains("k_block_reduce"));
  for (ValueId sum : sums) CHECK(std::find(kernel.arguments.begin(), kernel.arguments.end(), sum) == kernel.arguments.end());  // the finish writes them
  // A thread owns one group of the row: g and x are loaded once a row, before the row's sum and
  // the pass that stores dx and adds the column sums.
  const auto count = [&](const std::string& source, const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = source.find(text); at != std::string::npos; at = source.find(text, at + 1)) ++n;
    return n;
  };
  CHECK(count(kernel.source, "k_load8(p") == 2);
  CHECK(kernel.source.find("k_load8(p") < kernel.source.find("k_warp_reduce"));
  // Under each launch shape max-autotune measures, the same blocks and partial sums: the shapes
  // share the default's finish and workspace (a shape of 64 threads a row takes the eight rows of
  // a block in turn).
  const auto finish_header = [](const codegen::RenderedKernel& k) {  // "// the column sums: N blocks' partial sums added in order"
    const std::size_t at = k.source.find("// the column sums:");
    return k.source.substr(at, k.source.find('\n', at) - at);
  };
  for (const codegen::LaunchShape& shape : codegen::tuned_launch_shapes()) {
    INFO(shape.name());
    const codegen::RenderedKernel shaped = codegen::render_cuda_kernels(g, s, "bwd", shape).kernels.front();
    CHECK(shaped.grid == kernel.grid);
    CHECK(shaped.workspace_floats == kernel.workspace_floats);
    CHECK(shaped.finish_grid == kernel.finish_grid);
    CHECK(finish_header(shaped) == finish_header(kernel));
  }
  {
    // Without warp_rows: a one-warp block a row, which stores its partial sums itself.
    test::ScopedVariable off(kDisableOptimizationsVariable, "warp_rows");
    const codegen::RenderedKernel one_warp = codegen::render_cuda_kernels(g, s, "bwd").kernels.front();
    CHECK(one_warp.grid == 1024);  // 1024 rows, the least a column sum joins, and the most blocks it runs
    CHECK(one_warp.block == 32);
    CHECK(one_warp.workspace_floats == 2 * 1024 * 64);
    CHECK_THAT(one_warp.source, Contains("k_store8(ws + ") && Contains("k_block_reduce<true>(acc") && !Contains("warp_sums"));
    CHECK(count(one_warp.source, "k_load8(p") == 2);
  }
  // The second layer's kernel launches the first one's code, its finish included.
  CHECK(program.kernels[1].symbol == "trainc_kernel_bwd_0");
  CHECK(program.kernels[1].finish_symbol == "trainc_kernel_bwd_0_finish");
  CHECK(program.symbols() ==
        std::vector<std::string>{"trainc_kernel_bwd_0", "trainc_kernel_bwd_0", "trainc_kernel_bwd_0_finish", "trainc_kernel_bwd_0_finish"});
  CHECK(program.finish_launches() == std::vector<int>{2, 3});
}

TEST_CASE("on a GPU a column sum does not join a kernel that reduces over every dimension", "[unit][fusion]") {
  //   x ──exp──sum(all)──> total       (a single row: the kernel's one block)
  //          └─sum(rows)──> columns    (per column: its rows are not the kernel's)
  Graph g;
  const ValueId e = g.add(Op::exp, {g.add_input("x", f32({2048, 8}))});
  const ValueId total = g.add(Op::sum, {e}, ints({0, 1}));
  const ValueId columns = g.add(Op::sum, {e}, ints({0}));
  g.mark_output(total);
  g.mark_output(columns);
  const Schedule s = schedule_kernels(g, {}, /*column_sums=*/true);
  CHECK(s.kernel_of[static_cast<std::size_t>(total)] == s.kernel_of[static_cast<std::size_t>(e)]);
  CHECK(s.kernel_of[static_cast<std::size_t>(columns)] != s.kernel_of[static_cast<std::size_t>(e)]);
  for (const FusedKernel& kernel : s.kernels) CHECK(kernel.column_split == 0);
}

TEST_CASE("on a GPU a column sum met before the kernel that loads what it sums waits for that kernel", "[unit][fusion]") {
  // Autodiff emits a layer norm's bias gradient before the kernel that loads g (a product's output):
  //   g = a @ w ──sum(leading)──> bias                       (met first)
  //             ──sum(rows)──div──sub──> dx                  (the kernel that loads g)
  // and a second sum whose value a later node reads before any kernel loads what it adds up.
  Graph g;
  const ValueId grad = g.add(Op::matmul, {g.add_input("a", f32({16, 64, 64})), g.add_input("w", f32({64, 64}))});
  const ValueId bias = g.add(Op::sum, {grad}, ints({0, 1}));
  const ValueId d = g.add(Op::constant, {}, scalar(64.0));
  g.mark_output(g.add(Op::sub, {grad, g.add(Op::div, {g.add(Op::sum, {grad}, ints({2}, true)), d})}));
  g.mark_output(bias);
  const ValueId other = g.add(Op::matmul, {g.add_input("b", f32({16, 64, 64})), g.add_input("v", f32({64, 64}))});
  const ValueId unloaded = g.add(Op::sum, {other}, ints({0, 1}));
  g.mark_output(g.add(Op::mul, {unloaded, g.add_input("s", f32({64}))}));
  g.mark_output(g.add(Op::exp, {other}));

  const Schedule s = schedule_kernels(g, {}, /*column_sums=*/true);
  // The bias sum joins the layer norm's kernel; the second sum is an ATen call placed before its
  // reader, and the exp after it still loads `other` in a kernel of its own.
  CHECK(steps_of(g, s) == std::vector<std::string>{"aten:matmul", "sum div sub sum", "aten:matmul", "aten:sum", "mul", "exp"});
  const FusedKernel& kernel = s.kernels.front();
  CHECK(kernel.roles.back() == KernelRole::column);
  CHECK(kernel.members.back() == bias);
  CHECK(s.kernel_of[static_cast<std::size_t>(unloaded)] == -1);
  // Without column sums (the CPU), the bias sum stays where autodiff put it.
  CHECK(steps_of(g, schedule_kernels(g)) ==
        std::vector<std::string>{"aten:matmul", "aten:sum", "sum div sub", "aten:matmul", "aten:sum", "mul", "exp"});
}

TEST_CASE("a column sum that no kernel takes is placed after a few steps, not at the program's end", "[unit][fusion]") {
  //   g = a @ w ──sum(leading)──> out     then ten products, and a kernel loading g only after them
  Graph g;
  const ValueId grad = g.add(Op::matmul, {g.add_input("a", f32({16, 64, 64})), g.add_input("w", f32({64, 64}))});
  g.mark_output(g.add(Op::sum, {grad}, ints({0, 1})));
  ValueId chain = g.add_input("c", f32({64, 64}));
  for (int i = 0; i < 10; ++i) chain = g.add(Op::matmul, {chain, chain});
  g.mark_output(chain);
  g.mark_output(g.add(Op::exp, {grad}));
  const std::vector<std::string> steps = steps_of(g, schedule_kernels(g, {}, /*column_sums=*/true));
  REQUIRE(steps.size() == 13);
  CHECK(steps[9] == "aten:sum");  // placed once 8 steps (8 of the chain's products) have passed without a kernel taking it
  CHECK(steps.back() == "exp");
}

TEST_CASE("a column sum placed for its age goes before an ATen call or a new kernel, not between a kernel and what joins it",
          "[unit][fusion]") {
  //   g = a @ w ──sum(leading)──> out          (no kernel ever loads g)
  //   `kernels` row sums of other inputs, each a kernel; then x - m, which reads no kernel's value
  //   and joins the newest kernel; then a product
  const auto schedule_with = [](int kernels) {
    Graph g;
    const ValueId grad = g.add(Op::matmul, {g.add_input("a", f32({16, 64, 64})), g.add_input("w", f32({64, 64}))});
    g.mark_output(g.add(Op::sum, {grad}, ints({0, 1})));
    for (int i = 0; i < kernels; ++i) g.mark_output(g.add(Op::sum, {g.add_input("r" + std::to_string(i), f32({16, 64, 64}))}, ints({2})));
    g.mark_output(g.add(Op::sub, {g.add_input("x", f32({16, 64, 64})), g.add_input("m", f32({16, 64, 64}))}));
    g.mark_output(g.add(Op::matmul, {g.add_input("b", f32({64, 64})), g.add_input("c", f32({64, 64}))}));
    return steps_of(g, schedule_kernels(g, {}, /*column_sums=*/true));
  };
  // After eight kernels the sum has waited 8 steps: it goes before the product.
  const std::vector<std::string> eight = schedule_with(8);
  REQUIRE(eight.size() == 11);
  CHECK(eight[8] == "sum sub");  // the last row sum's kernel takes x - m
  CHECK(eight[9] == "aten:sum");
  CHECK(eight[10] == "aten:matmul");
  // With a ninth, it goes before the ninth kernel, which still takes x - m.
  const std::vector<std::string> nine = schedule_with(9);
  REQUIRE(nine.size() == 12);
  CHECK(nine[9] == "aten:sum");
  CHECK(nine[10] == "sum sub");
  CHECK(nine[11] == "aten:matmul");
}
