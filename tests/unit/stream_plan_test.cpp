// Which ATen calls of a program a CUDA graph records on a second stream, when the main stream
// waits for them, and how long the memory they read stays theirs (passes/stream_plan,
// passes/memory_plan).
#include <catch2/catch.hpp>

#include "support/ir_builders.h"
#include "support/schedule_steps.h"
#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/memory_plan.h"
#include "trainc/compile/passes/stream_plan.h"

using namespace trainc;
using namespace trainc::ir;
using trainc::test::f32;
using trainc::test::steps_of;

namespace {

// A layer's backward in miniature:
//   g ──exp──> d ──matmul(d, v)──> x ──tanh──> dx      (the input gradient: the next layer waits)
//   a ──┐     └──matmul(a^T, d)──> w ──neg──> dw      (the weight gradient: only returned)
//              └──matmul(d, u)──> b                    (returned as it is)
struct Layer {
  Graph graph;
  ValueId d, x, w, b, dx, dw;
};

Layer layer() {
  Layer l;
  Graph& g = l.graph;
  const ValueId grad = g.add_input("g", f32({16, 16}));
  const ValueId a = g.add_input("a", f32({16, 16}));
  const ValueId v = g.add_input("v", f32({16, 16}));
  const ValueId u = g.add_input("u", f32({16, 16}));
  l.d = g.add(Op::exp, {grad});
  l.x = g.add(Op::matmul, {l.d, v});
  l.w = g.add(Op::matmul, {a, l.d});
  l.b = g.add(Op::matmul, {l.d, u});
  l.dx = g.add(Op::tanh, {l.x});
  l.dw = g.add(Op::neg, {l.w});
  g.mark_output(l.dx);
  g.mark_output(l.dw);
  g.mark_output(l.b);
  return l;
}

// The arena slot `memory` gives value `id` (-1: none).
int slot(const MemoryPlan& memory, ValueId id) { return memory.slot_of[static_cast<std::size_t>(id)]; }

}  // namespace

TEST_CASE("only the ATen calls that the outputs alone wait for go to the second stream", "[unit][fusion]") {
  const Layer l = layer();
  const Schedule schedule = schedule_kernels(l.graph);
  REQUIRE(steps_of(l.graph, schedule) == std::vector<std::string>{"exp", "aten:matmul", "aten:matmul", "aten:matmul", "tanh neg"});
  const StreamPlan plan = plan_streams(l.graph, schedule, int64_t{1} << 30, /*tail_on_main=*/true);
  // x feeds a kernel (tanh); w feeds one too (neg) even though that kernel only makes an output:
  // kernels stay on the main stream, so what they read does. b is read by nothing but the end.
  CHECK(plan.batch == std::vector<int32_t>{-1, -1, -1, 0, -1});
  CHECK(plan.batches == 1);
  CHECK(plan.wait_before == std::vector<int32_t>(5, -1));
  CHECK(plan.join_step(0) == 5);
}

TEST_CASE("a chain of ATen calls that ends in an output goes to the second stream whole", "[unit][fusion]") {
  //   d = exp(g); w = matmul(a, d); w2 = matmul(w, a) (returned); x = matmul(d, v); dx = tanh(x)
  Graph g;
  const ValueId grad = g.add_input("g", f32({16, 16}));
  const ValueId a = g.add_input("a", f32({16, 16}));
  const ValueId v = g.add_input("v", f32({16, 16}));
  const ValueId d = g.add(Op::exp, {grad});
  const ValueId w = g.add(Op::matmul, {a, d});
  const ValueId w2 = g.add(Op::matmul, {w, a});
  const ValueId x = g.add(Op::matmul, {d, v});
  g.mark_output(g.add(Op::tanh, {x}));
  g.mark_output(w2);
  const Schedule schedule = schedule_kernels(g);
  REQUIRE(steps_of(g, schedule) == std::vector<std::string>{"exp", "aten:matmul", "aten:matmul", "aten:matmul", "tanh"});
  const StreamPlan plan = plan_streams(g, schedule, int64_t{1} << 30, /*tail_on_main=*/true);
  CHECK(plan.batch == std::vector<int32_t>{-1, 0, 0, -1, -1});
}

TEST_CASE("the main stream waits for a batch once the next is complete, and its reads stay in memory until then", "[unit][fusion]") {
  // Four layers: each returns a product of its input d (the second stream's, its own batch: it
  // reads more than 1 byte) and passes on tanh(matmul(d, u)) (the main stream's):
  //   d0 = exp(g); p_i = matmul(d_i, v_i) (returned); d_i+1 = tanh(matmul(d_i, u_i))
  Graph g;
  const ValueId grad = g.add_input("g", f32({16, 16}));
  ValueId d = g.add(Op::exp, {grad});
  std::vector<ValueId> kernels = {d};
  for (int i = 0; i < 4; ++i) {
    const ValueId v = g.add_input("v" + std::to_string(i), f32({16, 16}));
    const ValueId u = g.add_input("u" + std::to_string(i), f32({16, 16}));
    g.mark_output(g.add(Op::matmul, {d, v}));
    d = g.add(Op::tanh, {g.add(Op::matmul, {d, u})});
    kernels.push_back(d);
  }
  g.mark_output(d);
  const Schedule schedule = schedule_kernels(g);
  const std::vector<std::string> layer = {"aten:matmul", "aten:matmul", "tanh"};
  std::vector<std::string> expected = {"exp"};
  for (int i = 0; i < 4; ++i) expected.insert(expected.end(), layer.begin(), layer.end());
  REQUIRE(steps_of(g, schedule) == expected);
  const StreamPlan plan = plan_streams(g, schedule, 1, /*tail_on_main=*/true);
  CHECK(plan.batch == std::vector<int32_t>{-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1});
  CHECK(plan.batches == 4);
  // Batch 0 is waited for once batch 1 is queued, batch 1 once batch 2 is, ...; the last at the end.
  CHECK(plan.wait_before == std::vector<int32_t>{-1, -1, -1, -1, -1, 0, -1, -1, 1, -1, -1, 2, -1});
  CHECK(plan.join_step(0) == 5);
  CHECK(plan.join_step(3) == 13);

  // Without a second stream, a later kernel may store into the slot of the value a product read;
  // with one, not before the main stream waited for the product's batch.
  const MemoryPlan alone = plan_memory(g, schedule);
  const MemoryPlan beside = plan_memory(g, schedule, plan);
  CHECK(slot(alone, kernels[0]) == slot(alone, kernels[1]));   // d0's last reader runs before d1 is stored
  CHECK(slot(beside, kernels[0]) != slot(beside, kernels[1]));  // batch 0 reads d0 until the wait before step 5
  CHECK(beside.arena_bytes() > alone.arena_bytes());
}

TEST_CASE("the ATen calls after the main stream's last step stay on it and wait for what they read", "[unit][fusion]") {
  // A backward's end in miniature: w = matmul(a, d) is the head's weight gradient (returned, and read
  // by e), dx = tanh(matmul(d, v)) the main stream's last kernel; e = matmul(w, dx) (the embedding's
  // gradient added into the head's) and s = matmul(dx, a) only the outputs read:
  //   d = exp(g); w = matmul(a, d); dx = tanh(matmul(d, v)); e = matmul(w, dx); s = matmul(dx, a)
  Graph g;
  const ValueId grad = g.add_input("g", f32({16, 16}));
  const ValueId a = g.add_input("a", f32({16, 16}));
  const ValueId v = g.add_input("v", f32({16, 16}));
  const ValueId d = g.add(Op::exp, {grad});
  const ValueId w = g.add(Op::matmul, {a, d});
  const ValueId dx = g.add(Op::tanh, {g.add(Op::matmul, {d, v})});
  g.mark_output(g.add(Op::matmul, {w, dx}));
  g.mark_output(g.add(Op::matmul, {dx, a}));
  g.mark_output(w);
  const Schedule schedule = schedule_kernels(g);
  REQUIRE(steps_of(g, schedule) == std::vector<std::string>{"exp", "aten:matmul", "aten:matmul", "tanh", "aten:matmul", "aten:matmul"});

  // Without the rule, the two products after tanh go to the second stream, queued after w.
  const StreamPlan queued = plan_streams(g, schedule, int64_t{1} << 30, /*tail_on_main=*/false);
  CHECK(queued.batch == std::vector<int32_t>{-1, 0, -1, -1, 0, 0});
  CHECK(queued.wait_before == std::vector<int32_t>(6, -1));

  // With it, only w does; the product that reads w waits for its batch first.
  const StreamPlan plan = plan_streams(g, schedule, int64_t{1} << 30, /*tail_on_main=*/true);
  CHECK(plan.batch == std::vector<int32_t>{-1, 0, -1, -1, -1, -1});
  CHECK(plan.batches == 1);
  CHECK(plan.wait_before == std::vector<int32_t>{-1, -1, -1, -1, 0, -1});
  CHECK(plan.join_step(0) == 4);
  // The earlier wait keeps what w's batch reads safe: d stays allocated until it, so tanh, before
  // it, does not store into d's slot (as without a second stream it may).
  const MemoryPlan alone = plan_memory(g, schedule), beside = plan_memory(g, schedule, plan);
  CHECK(slot(alone, d) == slot(alone, dx));
  CHECK(slot(beside, d) != slot(beside, dx));
}

TEST_CASE("a tail step waits for the batches it reads through views unless an earlier wait covered them", "[unit][fusion]") {
  // Three second-stream products of d in batches of their own (batch_bytes 1), the main stream's
  // kernel dx, then a tail that reads a transpose (a view) of the first product and the third product:
  //   d = exp(g); w_i = matmul(a_i, d); dx = tanh(matmul(d, v)); e = matmul(permute(w0), dx); f = matmul(w2, dx)
  Graph g;
  const ValueId grad = g.add_input("g", f32({16, 16}));
  const ValueId v = g.add_input("v", f32({16, 16}));
  const ValueId d = g.add(Op::exp, {grad});
  std::vector<ValueId> w;
  for (int i = 0; i < 3; ++i) w.push_back(g.add(Op::matmul, {g.add_input("a" + std::to_string(i), f32({16, 16})), d}));
  const ValueId dx = g.add(Op::tanh, {g.add(Op::matmul, {d, v})});
  Attributes swap;
  swap.ints = {1, 0};
  const ValueId w0 = g.add(Op::permute, {w[0]}, swap);
  g.mark_output(g.add(Op::matmul, {w0, dx}));
  g.mark_output(g.add(Op::matmul, {w[2], dx}));
  for (ValueId product : w) g.mark_output(product);
  const Schedule schedule = schedule_kernels(g);
  REQUIRE(steps_of(g, schedule) ==
          std::vector<std::string>{"exp", "aten:matmul", "aten:matmul", "aten:matmul", "aten:matmul", "tanh", "aten:matmul", "aten:matmul"});
  const StreamPlan plan = plan_streams(g, schedule, 1, /*tail_on_main=*/true);
  CHECK(plan.batch == std::vector<int32_t>{-1, 0, 1, 2, -1, -1, -1, -1});
  CHECK(plan.batches == 3);
  // Batches 1 and 2 complete before the main stream's next step, which waits for batch 1 (and so
  // for batch 0). The first tail step reads batch 0 through the view: that wait covers it, and no
  // second one is recorded. The second tail step reads batch 2 and waits for it.
  CHECK(plan.wait_before == std::vector<int32_t>{-1, -1, -1, -1, 1, -1, -1, 2});
}

TEST_CASE("a program of ATen calls alone runs them all on the main stream as its tail", "[unit][fusion]") {
  //   w = matmul(a, b); x = matmul(w, a): both only returned
  Graph g;
  const ValueId a = g.add_input("a", f32({16, 16}));
  const ValueId b = g.add_input("b", f32({16, 16}));
  const ValueId w = g.add(Op::matmul, {a, b});
  g.mark_output(g.add(Op::matmul, {w, a}));
  g.mark_output(w);
  const Schedule schedule = schedule_kernels(g);
  REQUIRE(steps_of(g, schedule) == std::vector<std::string>{"aten:matmul", "aten:matmul"});
  CHECK(plan_streams(g, schedule, int64_t{1} << 30, /*tail_on_main=*/false).batch == std::vector<int32_t>{0, 0});
  const StreamPlan plan = plan_streams(g, schedule, int64_t{1} << 30, /*tail_on_main=*/true);
  CHECK(plan.batch == std::vector<int32_t>{-1, -1});
  CHECK(plan.batches == 0);
  CHECK(plan.empty());
}
