// The inductor's graph passes on small graphs drawn in the comments: which nodes fuse into which
// kernel and in what order the steps run (passes/fusion, sink_pointwise), how views compose into
// strided reads (codegen/strided_access), which buffers share memory (passes/memory_plan), and the
// code a small kernel renders to. The rewrites before fusion: rewrites_test.cpp; sums over
// leading dimensions inside kernels (on a GPU): column_sums_fusion_test.cpp.
#include <algorithm>

#include <catch2/catch.hpp>

#include "support/ir_builders.h"
#include "support/schedule_steps.h"
#include "trainc/compile/codegen/cpp_kernels.h"
#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/codegen/strided_access.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/memory_plan.h"
#include "trainc/compile/passes/rematerialize.h"
#include "trainc/compile/passes/sink_pointwise.h"

using namespace trainc;
using namespace trainc::ir;
using Catch::Matchers::Contains;
using trainc::test::bf16;
using trainc::test::f32;
using trainc::test::ints;
using trainc::test::scalar;
using trainc::test::steps_of;

TEST_CASE("a chain of pointwise ops is one kernel that stores only what leaves it", "[unit][fusion]") {
  //   x ──exp──mul──relu──> out
  //   y ────────┘
  Graph g;
  const ValueId x = g.add_input("x", f32({8, 16}));
  const ValueId y = g.add_input("y", f32({8, 16}));
  const ValueId out = g.add(Op::relu, {g.add(Op::mul, {g.add(Op::exp, {x}), y})});
  g.mark_output(out);
  const Schedule s = schedule_kernels(g);
  CHECK(steps_of(g, s) == std::vector<std::string>{"exp mul relu"});
  CHECK(s.kernels[0].stores == std::vector<ValueId>{out});
  CHECK_FALSE(s.kernels[0].has_reduction());
}

TEST_CASE("matmul stays an ATen call, and the bias and activation after it fuse", "[unit][fusion]") {
  //   x ──matmul──add──relu──> out
  //   w ──┘  b ───┘
  Graph g;
  const ValueId x = g.add_input("x", f32({4, 8}));
  const ValueId w = g.add_input("w", f32({8, 5}));
  const ValueId b = g.add_input("b", f32({5}));
  g.mark_output(g.add(Op::relu, {g.add(Op::add, {g.add(Op::matmul, {x, w}), b})}));
  const Schedule s = schedule_kernels(g);
  CHECK(steps_of(g, s) == std::vector<std::string>{"aten:matmul", "add relu"});
}

TEST_CASE("a cast into bf16 joins the kernel of the value it casts, and of a parameter or a view, it stays ATen's", "[unit][fusion]") {
  //   x ──exp──cast(bf16)──> out           (an activation under autocast: one kernel, exp never stored)
  //   w ──cast(bf16)──> w16                (a weight for a GEMM: ATen keeps its strides)
  //   x ──exp──permute──cast(bf16)──> t16  (a view: ATen keeps the view's strides too)
  Graph g;
  const ValueId x = g.add_input("x", f32({4, 8}));
  const ValueId w = g.add_input("w", f32({8, 4}));
  Attributes to_bf16;
  to_bf16.dtype = DType::bf16;
  const ValueId activation = g.add(Op::cast, {g.add(Op::exp, {x})}, to_bf16);
  g.mark_output(activation);
  g.mark_output(g.add(Op::cast, {w}, to_bf16));
  const Schedule s = schedule_kernels(g);
  CHECK(steps_of(g, s) == std::vector<std::string>{"exp cast", "aten:cast"});
  CHECK(s.kernels[0].stores == std::vector<ValueId>{activation});

  Graph h;
  const ValueId y = h.add_input("y", f32({4, 8}));
  const ValueId e = h.add(Op::exp, {y});
  h.mark_output(h.add(Op::cast, {h.add(Op::permute, {e}, ints({1, 0}))}, to_bf16));
  CHECK(steps_of(h, schedule_kernels(h)) == std::vector<std::string>{"exp", "aten:cast"});
}

TEST_CASE("a loss's mean over a few thousand rows is one kernel, and a whole reduction of a large tensor is not", "[unit][fusion]") {
  //   loss[n] ──mul(mask)──sum──div──> mean     (the rows kept, summed and counted: one block)
  //   mask[n] ─────────────sum──┘
  for (const int64_t n : {int64_t{2048}, int64_t{65536}}) {
    INFO(n << " rows");
    Graph g;
    const ValueId loss = g.add_input("loss", f32({n}));
    const ValueId mask = g.add_input("mask", f32({n}));
    const ValueId kept = g.add(Op::mul, {loss, mask});
    const ValueId total = g.add(Op::sum, {kept}, ints({0}));
    g.mark_output(g.add(Op::div, {total, g.add(Op::sum, {g.add(Op::exp, {mask})}, ints({0}))}));
    const Schedule s = schedule_kernels(g);
    if (n == 2048) {
      CHECK(steps_of(g, s) == std::vector<std::string>{"mul sum exp sum div"});
      CHECK(s.kernels[0].reduce_from == 0);
    } else {
      // One block would read all 65,536: the sum runs in a kernel of its own.
      CHECK(s.kernel_of[static_cast<std::size_t>(total)] != s.kernel_of[static_cast<std::size_t>(kept)]);
    }
  }
}

TEST_CASE("layer norm is one kernel: two row reductions and the pointwise ops around them", "[unit][fusion]") {
  //   x ──sum──div(D)──sub──mul──sum──div──add(eps)──rsqrt──mul──> out
  //   └────────────────┘              (rows of x: one value per row)  ┘
  Graph g;
  const ValueId x = g.add_input("x", f32({6, 10}));
  const ValueId d = g.add(Op::constant, {}, scalar(10.0));
  const ValueId mean = g.add(Op::div, {g.add(Op::sum, {x}, ints({1}, true)), d});
  const ValueId centered = g.add(Op::sub, {x, mean});
  const ValueId var = g.add(Op::div, {g.add(Op::sum, {g.add(Op::mul, {centered, centered})}, ints({1}, true)), d});
  const ValueId inv = g.add(Op::rsqrt, {g.add(Op::add, {var, g.add(Op::constant, {}, scalar(1e-5))})});
  g.mark_output(g.add(Op::mul, {centered, inv}));
  const Schedule s = schedule_kernels(g);
  REQUIRE(s.kernels.size() == 1);
  CHECK(s.kernels[0].has_reduction());
  CHECK(s.kernels[0].reduce_from == 1);
  CHECK(steps_of(g, s) == std::vector<std::string>{"sum div sub mul sum div add rsqrt mul"});
  CHECK(s.kernels[0].stores.size() == 1);
}

TEST_CASE("a value recomputed from saved ones joins the newest kernel, between the two sums that read it", "[unit][fusion]") {
  // A layer norm's backward with x-hat recomputed from the saved x, mean and 1/std:
  //   g ──sum──div──sub──────────mul──sum──div──mul──sub──> dx
  //   x, mean, rstd ──sub──mul──┘ (reads no kernel's value)  ┘
  Graph g;
  const ValueId grad = g.add_input("g", f32({6, 10}));
  const ValueId x = g.add_input("x", f32({6, 10}));
  const ValueId mean = g.add_input("mean", f32({6, 1}));
  const ValueId rstd = g.add_input("rstd", f32({6, 1}));
  const ValueId d = g.add(Op::constant, {}, scalar(10.0));
  const ValueId centered_grad = g.add(Op::sub, {grad, g.add(Op::div, {g.add(Op::sum, {grad}, ints({1}, true)), d})});
  const ValueId xhat = g.add(Op::mul, {g.add(Op::sub, {x, mean}), rstd});
  const ValueId projection = g.add(Op::div, {g.add(Op::sum, {g.add(Op::mul, {grad, xhat})}, ints({1}, true)), d});
  g.mark_output(g.add(Op::sub, {centered_grad, g.add(Op::mul, {xhat, projection})}));
  const Schedule s = schedule_kernels(g);
  CHECK(steps_of(g, s) == std::vector<std::string>{"sum div sub sub mul mul sum div mul sub"});
  // A pointwise node that reads another kernel's value it cannot join still starts its own.
  Graph h;
  const ValueId r = h.add_input("r", f32({6, 1}));
  const ValueId y = h.add_input("y", f32({6, 10}));
  const ValueId e = h.add(Op::exp, {r});
  h.mark_output(h.add(Op::exp, {y}));
  h.mark_output(h.add(Op::mul, {e, y}));
  CHECK(steps_of(h, schedule_kernels(h)) == std::vector<std::string>{"exp", "exp", "mul"});
}

TEST_CASE("fusion refuses: leading-axis reductions, growing broadcasts, views of members, newer inputs", "[unit][fusion]") {
  SECTION("a reduction over the leading axis is an ATen call reading a stored input") {
    //   x ──exp──sum(axis 0)──> out
    Graph g;
    const ValueId x = g.add_input("x", f32({6, 10}));
    g.mark_output(g.add(Op::sum, {g.add(Op::exp, {x})}, ints({0})));
    const Schedule s = schedule_kernels(g);
    CHECK(steps_of(g, s) == std::vector<std::string>{"exp", "aten:sum"});
  }
  SECTION("a small producer is not recomputed for every element of a larger consumer") {
    //   r[6,1] ──exp──mul──> out[6,10]
    //   x[6,10] ──────┘
    Graph g;
    const ValueId r = g.add_input("r", f32({6, 1}));
    const ValueId x = g.add_input("x", f32({6, 10}));
    g.mark_output(g.add(Op::mul, {g.add(Op::exp, {r}), x}));
    CHECK(steps_of(g, schedule_kernels(g)) == std::vector<std::string>{"exp", "mul"});
  }
  SECTION("a view of a member is read from memory, so its reader runs after the kernel") {
    //   x ──exp──permute──add──> out
    Graph g;
    const ValueId x = g.add_input("x", f32({4, 4}));
    const ValueId e = g.add(Op::exp, {x});
    g.mark_output(e);
    g.mark_output(g.add(Op::add, {g.add(Op::permute, {e}, ints({1, 0})), x}));
    const Schedule s = schedule_kernels(g);
    CHECK(steps_of(g, s) == std::vector<std::string>{"exp", "add"});
  }
  SECTION("a node reading a step newer than the producer's kernel starts its own, unless sunk first") {
    //   a = exp(x)            (kernel made here)
    //   m = matmul(w, v)      (a newer step)
    //   out = a + m
    Graph g;
    const ValueId x = g.add_input("x", f32({4, 4}));
    const ValueId w = g.add_input("w", f32({4, 4}));
    const ValueId a = g.add(Op::exp, {x});
    const ValueId m = g.add(Op::matmul, {w, w});
    g.mark_output(g.add(Op::add, {a, m}));
    CHECK(steps_of(g, schedule_kernels(g)) == std::vector<std::string>{"exp", "aten:matmul", "add"});
    const Graph sunk = sink_pointwise(g);
    verify(sunk);
    CHECK(steps_of(sunk, schedule_kernels(sunk)) == std::vector<std::string>{"aten:matmul", "exp add"});
  }
}

TEST_CASE("a value stored only for a later pointwise kernel is recomputed there instead", "[unit][fusion]") {
  //   a = exp(x); s = a * a ──matmul(s, w) = m
  //   b = a * m ──> out          (b's kernel runs after the GEMM and loaded a from the first kernel)
  const auto program = [](bool reduce_after) {
    Graph g;
    const ValueId x = g.add_input("x", f32({4, 8}));
    const ValueId w = g.add_input("w", f32({8, 8}));
    const ValueId a = g.add(Op::exp, {x});
    const ValueId m = g.add(Op::matmul, {g.add(Op::mul, {a, a}), w});
    const ValueId b = g.add(Op::mul, {a, m});
    g.mark_output(reduce_after ? g.add(Op::sum, {b}, ints({1})) : b);
    return g;
  };
  const Graph g = program(false);
  const Schedule before = schedule_kernels(g);
  CHECK(steps_of(g, before) == std::vector<std::string>{"exp mul", "aten:matmul", "mul"});
  CHECK(before.kernels[0].stores.size() == 2);  // a * a for the GEMM, a for the last kernel

  const Rematerialized copied = rematerialize_loads(g, before);
  CHECK(copied.copied_values == 1);
  verify(copied.graph);
  const Schedule after = schedule_kernels(copied.graph, copied.copies);
  CHECK(steps_of(copied.graph, after) == std::vector<std::string>{"exp mul", "aten:matmul", "exp mul"});
  CHECK(after.kernels[0].stores.size() == 1);  // only what the GEMM reads

  // A reader kernel with a reduction (its column passes would each recompute the copy) loads instead.
  const Graph reduced = program(true);
  CHECK(rematerialize_loads(reduced, schedule_kernels(reduced)).copied_values == 0);

  // An original that only the reader kernel read is dropped, and so is its kernel:
  //   a = exp(x); m = matmul(p, q); b = a * m   ->   m = matmul(p, q); [a' = exp(x); b = a' * m]
  Graph only_later;
  const ValueId ox = only_later.add_input("x", f32({4, 8}));
  const ValueId op = only_later.add_input("p", f32({4, 8}));
  const ValueId oq = only_later.add_input("q", f32({8, 8}));
  const ValueId oa = only_later.add(Op::exp, {ox});
  only_later.mark_output(only_later.add(Op::mul, {oa, only_later.add(Op::matmul, {op, oq})}));
  const Schedule first = schedule_kernels(only_later);
  REQUIRE(steps_of(only_later, first) == std::vector<std::string>{"exp", "aten:matmul", "mul"});
  const Rematerialized moved = rematerialize_loads(only_later, first);
  verify(moved.graph);
  CHECK(moved.graph.size() == only_later.size());
  CHECK(steps_of(moved.graph, schedule_kernels(moved.graph, moved.copies)) == std::vector<std::string>{"aten:matmul", "exp mul"});
}

TEST_CASE("views compose into strides over their base, and a reshape no strides express copies", "[unit][fusion]") {
  //   x[4,6] ──permute──slice(dim 1, 1:4:2)     x ──permute──reshape[24] (not a view)
  Graph g;
  const ValueId x = g.add_input("x", f32({4, 6}));
  const ValueId t = g.add(Op::permute, {x}, ints({1, 0}));
  const ValueId sliced = g.add(Op::slice, {t}, ints({1, 1, 4, 2}));
  const ValueId flat = g.add(Op::reshape, {t}, ints({24}));
  const ValueId grown = g.add(Op::expand, {g.add(Op::reshape, {x}, ints({1, 4, 6}))}, ints({3, 4, 6}));
  const auto accesses = codegen::strided_accesses(g);
  CHECK(accesses[static_cast<std::size_t>(t)].strides == std::vector<int64_t>{1, 6});
  CHECK(accesses[static_cast<std::size_t>(sliced)].base == x);
  CHECK(accesses[static_cast<std::size_t>(sliced)].strides == std::vector<int64_t>{1, 12});
  CHECK(accesses[static_cast<std::size_t>(sliced)].offset == 6);
  CHECK(accesses[static_cast<std::size_t>(flat)].base == flat);
  CHECK(accesses[static_cast<std::size_t>(grown)].strides == std::vector<int64_t>{0, 6, 1});
  CHECK(codegen::view_strides({2, 3}, {1, 2}, {6}) == std::nullopt);
  CHECK(codegen::view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}) == std::vector<int64_t>{4, 1});
}

TEST_CASE("the memory plan shares slots between values whose lifetimes do not overlap", "[unit][fusion]") {
  //   e = exp(x); m1 = matmul(e, x); t = tanh(m1); m2 = matmul(t, e); s = sigmoid(m2); out = matmul(s, x)
  //   e lives until m2, so t needs a second slot; s takes e's slot after m2.
  Graph g;
  const ValueId x = g.add_input("x", f32({16, 16}));
  const ValueId e = g.add(Op::exp, {x});
  const ValueId t = g.add(Op::tanh, {g.add(Op::matmul, {e, x})});
  const ValueId s = g.add(Op::sigmoid, {g.add(Op::matmul, {t, e})});
  g.mark_output(g.add(Op::matmul, {s, x}));
  const Schedule schedule = schedule_kernels(g);
  REQUIRE(schedule.kernels.size() == 3);
  const MemoryPlan plan = plan_memory(g, schedule);
  CHECK(plan.slot_bytes.size() == 2);
  CHECK(plan.slot_of[static_cast<std::size_t>(s)] == plan.slot_of[static_cast<std::size_t>(e)]);
  CHECK(plan.slot_of[static_cast<std::size_t>(t)] != plan.slot_of[static_cast<std::size_t>(e)]);
  CHECK(plan.planned_bytes == 3 * 16 * 16 * 4);
  CHECK(plan.arena_bytes() == 2 * 16 * 16 * 4);
  // Outputs escape the run: never in the arena.
  Graph returned;
  const ValueId y = returned.add_input("y", f32({4}));
  returned.mark_output(returned.add(Op::reshape, {returned.add(Op::exp, {y})}, ints({2, 2})));
  const Schedule rs = schedule_kernels(returned);
  CHECK(plan_memory(returned, rs).slot_bytes.empty());
  // A concat of slices of one stored value may be a view of it (runtime/aten_executor), so that
  // value keeps its slot while the concat is read: n may not take h's slot before the matmul.
  //   h = exp(x); c = concat(slice(h, 0:2), slice(h, 2:4)); n = neg(y); out = matmul(n, c)
  Graph joined;
  const ValueId jx = joined.add_input("x", f32({4, 4}));
  const ValueId jy = joined.add_input("y", f32({4, 4}));
  const ValueId h = joined.add(Op::exp, {jx});
  const ValueId c = joined.add(Op::concat, {joined.add(Op::slice, {h}, ints({1, 0, 2, 1})), joined.add(Op::slice, {h}, ints({1, 2, 4, 1}))}, ints({1}));
  const ValueId neg = joined.add(Op::neg, {jy});
  joined.mark_output(joined.add(Op::matmul, {neg, c}));
  const Schedule js = schedule_kernels(joined);
  REQUIRE(steps_of(joined, js) == std::vector<std::string>{"exp", "aten:concat", "neg", "aten:matmul"});
  const MemoryPlan jp = plan_memory(joined, js);
  CHECK(jp.slot_of[static_cast<std::size_t>(neg)] != jp.slot_of[static_cast<std::size_t>(h)]);
  // Returned, the concat takes its root out of the arena with it.
  joined.mark_output(c);
  CHECK(plan_memory(joined, schedule_kernels(joined)).slot_of[static_cast<std::size_t>(h)] == -1);
}

TEST_CASE("golden: the C++ of a small softmax kernel", "[unit][fusion]") {
  Graph g;
  const ValueId x = g.add_input("x", f32({3, 8}));
  const ValueId shifted = g.add(Op::sub, {x, g.add(Op::amax, {x}, ints({1}, true))});
  const ValueId e = g.add(Op::exp, {shifted});
  g.mark_output(g.add(Op::div, {e, g.add(Op::sum, {e}, ints({1}, true))}));
  const Schedule s = schedule_kernels(g);
  const codegen::RenderedProgram program = codegen::render_cpp_kernels(g, s);
  REQUIRE(program.kernels.size() == 1);
  CHECK(program.kernels[0].arguments == std::vector<ValueId>{0, 5});
  CHECK(program.kernels[0].source == R"(
// kernel 0: reduction over [3, 8], reducing from dim 1; amax sub exp sum div; reads 0.00 MB, writes 0.00 MB
extern "C" void trainc_kernel_0(void* const* args) {
  const float* __restrict p0 = static_cast<const float*>(args[0]);
  float* __restrict s5 = static_cast<float*>(args[1]);
  for (int64_t o = 0; o < 3; ++o) {
    const int64_t i0 = (o / 1) % 3;
    const int64_t o0 = 0 + i0 * 8;
    const int64_t o1 = 0 + i0 * 8;
    float acc1 = (-__builtin_inff());
    #pragma omp simd reduction(max:acc1)
    for (int64_t j0 = 0; j0 < 8; ++j0) {
      acc1 = p0[o0 + j0] > acc1 ? p0[o0 + j0] : acc1;
    }
    const float v1 = acc1;
    float acc4 = float(0);
    #pragma omp simd reduction(+:acc4)
    for (int64_t j0 = 0; j0 < 8; ++j0) {
      const float v2 = (p0[o0 + j0] - v1);
      const float v3 = k_exp(v2);
      acc4 += v3;
    }
    const float v4 = acc4;
    #pragma omp simd
    for (int64_t j0 = 0; j0 < 8; ++j0) {
      const float v2 = (p0[o0 + j0] - v1);
      const float v3 = k_exp(v2);
      const float v5 = (v3 / v4);
      s5[o1 + j0] = v5;
    }
  }
}
)");
  CHECK_THAT(program.text(), Contains("k_bf16_store"));
}

TEST_CASE("golden: the CUDA of the same softmax kernel, and blocks sized to the row", "[unit][fusion]") {
  const auto softmax = [](int64_t rows, int64_t columns) {
    Graph g;
    const ValueId x = g.add_input("x", f32({rows, columns}));
    const ValueId shifted = g.add(Op::sub, {x, g.add(Op::amax, {x}, ints({1}, true))});
    const ValueId e = g.add(Op::exp, {shifted});
    g.mark_output(g.add(Op::div, {e, g.add(Op::sum, {e}, ints({1}, true))}));
    return g;
  };
  const Graph g = softmax(3, 8);
  const codegen::RenderedProgram program = codegen::render_cuda_kernels(g, schedule_kernels(g));
  REQUIRE(program.kernels.size() == 1);
  CHECK(program.kernels[0].arguments == std::vector<ValueId>{0, 5});
  CHECK(program.kernels[0].block == 32);
  CHECK(program.kernels[0].grid == 3);  // a block per row
  // Rows of 8 floats, one group a thread: the row is loaded once, 16 bytes at a time, before the
  // passes that read it (see the next test case).
  CHECK(program.kernels[0].source == R"(
// kernel 0: reduction over [3, 8], reducing from dim 1; amax sub exp sum div; reads 0.00 MB, writes 0.00 MB
extern "C" __global__ void __launch_bounds__(32) trainc_kernel_0(const float* __restrict__ p0, float* __restrict__ s1) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  __shared__ float shared2[33];
  __shared__ float shared3[33];
  for (int o = blockIdx.x; o < 3; o += gridDim.x) {
    const int i0 = (o / 1) % 3;
    const int o0 = 0 + i0 * 8;
    const int o1 = 0 + i0 * 8;
    const int jv = threadIdx.x * 8;
    float r0[8];
    if (threadIdx.x < 1) {
      k_load8(p0 + o0 + jv, r0);
    }
    float acc2 = (-__int_as_float(0x7f800000));
    for (int cv = threadIdx.x; cv < 1; cv += 32) {
      const int jv = cv * 8;
      #pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int j0 = jv + u;
        acc2 = r0[u] > acc2 ? r0[u] : acc2;
      }
    }
    const float v2 = k_block_reduce<false>(acc2, (-__int_as_float(0x7f800000)), shared2);
    float acc3 = float(0);
    for (int cv = threadIdx.x; cv < 1; cv += 32) {
      const int jv = cv * 8;
      #pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int j0 = jv + u;
        const float v4 = (r0[u] - v2);
        const float v5 = k_exp(v4);
        acc3 += v5;
      }
    }
    const float v3 = k_block_reduce<true>(acc3, float(0), shared3);
    for (int cv = threadIdx.x; cv < 1; cv += 32) {
      const int jv = cv * 8;
      float w1[8];
      #pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int j0 = jv + u;
        const float v4 = (r0[u] - v2);
        const float v5 = k_exp(v4);
        const float v1 = (v5 / v3);
        w1[u] = v1;
      }
      k_store8(s1 + o1 + jv, w1);
    }
  }
}
)");
  CHECK_THAT(program.text(), Contains("k_bf16_store") && Contains("__shfl_xor_sync"));
  // Blocks: a power of two within 32..1024, four columns a thread, or two groups of 8 columns
  // when the row is loaded 16 bytes at a time.
  const Graph layer = softmax(16, 768), odd_layer = softmax(16, 770), vocabulary = softmax(2, 50257);
  CHECK(codegen::render_cuda_kernels(layer, schedule_kernels(layer)).kernels[0].block == 64);
  CHECK(codegen::render_cuda_kernels(odd_layer, schedule_kernels(odd_layer)).kernels[0].block == 256);
  CHECK(codegen::render_cuda_kernels(vocabulary, schedule_kernels(vocabulary)).kernels[0].block == 1024);
  // Pointwise kernels: 256 threads a block, a block per 256 elements.
  Graph pointwise;
  pointwise.mark_output(pointwise.add(Op::exp, {pointwise.add_input("x", f32({10, 99}))}));
  const codegen::RenderedKernel exp_kernel = codegen::render_cuda_kernels(pointwise, schedule_kernels(pointwise)).kernels[0];
  CHECK(exp_kernel.block == 256);
  CHECK(exp_kernel.grid == 4);  // 990 elements, not a multiple of 8: one a thread
  CHECK_THAT(exp_kernel.source, Contains("for (int e = blockIdx.x * 256 + threadIdx.x; e < 990; e += gridDim.x * 256)"));
  // 32-bit indices only while a loop counter one grid-stride step (65536 blocks of 256) past the
  // last element still fits.
  const auto exp_over = [](int64_t n) {
    Graph graph;
    graph.mark_output(graph.add(Op::exp, {graph.add_input("x", f32({n}))}));
    return codegen::render_cuda_kernels(graph, schedule_kernels(graph)).kernels[0].source;
  };
  const int64_t two_to_31 = int64_t{1} << 31, stride = 65536 * 256;
  CHECK_THAT(exp_over(two_to_31 - stride - 1), Contains("for (int e = "));
  CHECK_THAT(exp_over(two_to_31 - stride + 1), Contains("for (int64_t e = "));
  // The same threshold when 8 elements a thread are moved together (lengths a multiple of 8).
  CHECK_THAT(exp_over(two_to_31 - stride - 8), Contains("for (int ev = "));
  CHECK_THAT(exp_over(two_to_31 - stride), Contains("for (int64_t ev = "));
}

// A row a warp (warp_rows): rows a one-warp block covers, 1,024 of them or more, run eight a block;
// each warp's reductions and its row's stores are its own, so nothing in the row loop names the
// block's threads or waits for the block. Fewer rows, or a launch shape of wider rows, keep a
// block a row.
TEST_CASE("CUDA row kernels whose row a warp covers run eight rows a block and a row a warp", "[unit][fusion]") {
  const auto softmax = [](int64_t rows) {
    Graph g;
    const ValueId x = g.add_input("x", f32({rows, 256}));
    const ValueId max = g.add(Op::amax, {x}, ints({1}, true));
    const ValueId e = g.add(Op::exp, {g.add(Op::sub, {x, max})});
    g.mark_output(g.add(Op::div, {e, g.add(Op::sum, {e}, ints({1}, true))}));
    g.mark_output(max);  // a value stored once a row
    return g;
  };
  const Graph g = softmax(2048);
  const codegen::RenderedKernel kernel = codegen::render_cuda_kernels(g, schedule_kernels(g)).kernels.at(0);
  CHECK(kernel.block == 256);
  CHECK(kernel.grid == 256);
  const std::string header = "for (int o = blockIdx.x * 8 + (threadIdx.x >> 5); o < 2048; o += gridDim.x * 8) {";
  REQUIRE_THAT(kernel.source, Contains(header));
  const std::string loop = kernel.source.substr(kernel.source.find(header) + header.size());
  CHECK_THAT(loop, Contains("k_warp_reduce<false>(acc") && Contains("k_warp_reduce<true>(acc") && Contains("if (lane == 0) {"));
  CHECK_THAT(loop, !Contains("threadIdx") && !Contains("__syncthreads") && !Contains("__shared__"));
  const Graph fewer = softmax(1023);
  const codegen::RenderedKernel one_warp = codegen::render_cuda_kernels(fewer, schedule_kernels(fewer)).kernels.at(0);
  CHECK(one_warp.block == 32);
  CHECK(one_warp.grid == 1023);
  CHECK_THAT(one_warp.source, Contains("k_block_reduce<true>(acc") && !Contains("k_warp_reduce"));
  // The widest launch shape max-autotune measures: 64 threads a row, a block a row.
  const codegen::RenderedKernel wide = codegen::render_cuda_kernels(g, schedule_kernels(g), "", codegen::tuned_launch_shapes().back()).kernels.at(0);
  CHECK(wide.block == 64);
  CHECK(wide.grid == 2048);
}

TEST_CASE("CUDA pointwise kernels over rows of a multiple of 8 move contiguous bf16 and float32 operands 16 bytes at a time",
          "[unit][fusion]") {
  // y = x * scale + bias over [64, 24], bf16: x and y walk their rows, bias is read at the same
  // column of every row (aligned too), scale is one value per row (a scalar load).
  Graph g;
  const ValueId x = g.add_input("x", {DType::bf16, {64, 24}});
  const ValueId bias = g.add_input("bias", {DType::bf16, {24}});
  const ValueId scale = g.add_input("scale", {DType::bf16, {64, 1}});
  g.mark_output(g.add(Op::add, {g.add(Op::mul, {x, scale}), bias}));
  const codegen::RenderedKernel kernel = codegen::render_cuda_kernels(g, schedule_kernels(g)).kernels.at(0);
  CHECK(kernel.grid == 1);  // 64 * 24 / 8 threads
  CHECK_THAT(kernel.source, Contains("for (int ev = blockIdx.x * 256 + threadIdx.x; ev < 192; ev += gridDim.x * 256)"));
  CHECK_THAT(kernel.source, Contains("k_load8(p0 + o0 + jv, r0);"));  // x
  CHECK_THAT(kernel.source, Contains("k_load8(p2 + ") && Contains("k_store8(s"));  // bias
  CHECK_THAT(kernel.source, Contains("p1[o"));  // the per-row scale stays a scalar load
  // x, bias and y need aligned pointers; scale does not.
  std::vector<ValueId> aligned;
  for (int a : kernel.aligned_arguments) aligned.push_back(kernel.arguments.at(static_cast<std::size_t>(a)));
  std::sort(aligned.begin(), aligned.end());
  CHECK(aligned == std::vector<ValueId>{x, bias, kernel.arguments.back()});
  // 45 elements (contiguous dimensions merge into one row, not a multiple of 8): one element a
  // thread, nothing aligned.
  Graph odd;
  odd.mark_output(odd.add(Op::exp, {odd.add_input("x", f32({5, 9}))}));
  const codegen::RenderedKernel scalar = codegen::render_cuda_kernels(odd, schedule_kernels(odd)).kernels.at(0);
  CHECK_THAT(scalar.source, Contains("for (int e = ") && !Contains("k_load8(p"));
  CHECK(scalar.aligned_arguments.empty());
  // A transposed read stays one element at a time; the kernel's other operands still vectorize.
  Graph transposed;
  const ValueId square = transposed.add_input("square", f32({16, 16}));
  transposed.mark_output(transposed.add(Op::add, {square, transposed.add(Op::permute, {square}, ints({1, 0}))}));
  const codegen::RenderedKernel mixed = codegen::render_cuda_kernels(transposed, schedule_kernels(transposed)).kernels.at(0);
  CHECK_THAT(mixed.source, Contains("k_load8(p0 + ") && Contains("p0[o1 + j0 * 16]"));
}

TEST_CASE("CUDA kernels whose code differs only in the values they name are compiled once", "[unit][fusion]") {
  // Two layers of the same work, and a third over another shape; each layer's kernel reads a
  // product, so none joins the kernel before it.
  Graph g;
  for (const int64_t columns : {64, 64, 48}) {
    const ValueId x = g.add(Op::matmul, {g.add_input("x", f32({4, columns})), g.add_input("w", f32({columns, columns}))});
    g.mark_output(g.add(Op::tanh, {g.add(Op::mul, {x, x})}));
  }
  const codegen::RenderedProgram program = codegen::render_cuda_kernels(g, schedule_kernels(g), "fwd");
  REQUIRE(program.kernels.size() == 3);
  CHECK(program.kernels[0].symbol == "trainc_kernel_fwd_0");
  CHECK(program.kernels[1].symbol == "trainc_kernel_fwd_0");  // launches kernel 0's code with its own arguments
  CHECK(program.kernels[2].symbol == "trainc_kernel_fwd_2");
  CHECK(program.kernels[1].arguments != program.kernels[0].arguments);
  CHECK_THAT(program.kernels[1].source, Contains("(the code of kernel 0)") && !Contains("__global__"));
  const std::string text = program.text();
  std::size_t definitions = 0;
  for (std::size_t at = text.find("__global__"); at != std::string::npos; at = text.find("__global__", at + 1)) ++definitions;
  CHECK(definitions == 2);
  // Names within the kernel are numbered by first appearance: its pointers, then its values.
  CHECK_THAT(program.kernels[0].source, Contains("(const float* __restrict__ p0, float* __restrict__ s1)"));
}
