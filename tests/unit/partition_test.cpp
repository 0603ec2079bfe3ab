// What the partition saves between the forward and backward programs, and that the two programs
// compute the joint graph's loss and gradients.
#include <map>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "support/scoped_variable.h"
#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/partition/partition.h"
#include "trainc/compile/runtime/aten_executor.h"

using namespace trainc;
using namespace trainc::ir;
using trainc::test::ScopedVariable;

namespace {

// A linear layer under autocast: loss = sum(cast(x W16^T, f32)^2) with W16 = cast(W, bf16).
//   x: bf16 [6, 4] (its gradient reads W16), W: f32 [3, 4] (a parameter)
JointGraph autocast_linear(bool w_needs_grad = true) {
  Graph forward;
  const ValueId x = forward.add_input("x", {DType::bf16, {6, 4}});
  const ValueId w = forward.add_input("w", {DType::f32, {3, 4}});
  Attributes to_bf16, to_f32, swap, all;
  to_bf16.dtype = DType::bf16;
  to_f32.dtype = DType::f32;
  swap.ints = {1, 0};
  all.ints = {0, 1};
  const ValueId w16 = forward.add(Op::cast, {w}, to_bf16);
  const ValueId y = forward.add(Op::cast, {forward.add(Op::matmul, {x, forward.add(Op::permute, {w16}, swap)})}, to_f32);
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::mul, {y, y})}, all));
  return differentiate(forward, {true, w_needs_grad});
}

// Casts of the parameter `w` (input 1) in `graph`.
int casts_of_parameter(const Graph& graph) {
  int casts = 0;
  for (const Node& node : graph.nodes()) {
    if (node.op == Op::cast && graph.node(node.inputs[0]).op == Op::input && graph.type(node.inputs[0]) == TensorType{DType::f32, {3, 4}}) ++casts;
  }
  return casts;
}

// The step's gradients through the two programs.
std::vector<at::Tensor> run_programs(const StepPrograms& programs, const std::vector<at::Tensor>& step_inputs, const at::Tensor& seed) {
  const std::vector<at::Tensor> forward = execute_with_aten(programs.forward, step_inputs);
  std::vector<at::Tensor> backward_inputs;
  for (int position : programs.backward_step_inputs) backward_inputs.push_back(step_inputs[static_cast<std::size_t>(position)]);
  backward_inputs.insert(backward_inputs.end(), forward.begin() + programs.forward_results, forward.end());
  backward_inputs.push_back(seed);
  return execute_with_aten(programs.backward, backward_inputs);
}

}  // namespace

TEST_CASE("a parameter cast to bf16 by the forward is saved for the backward, not cast again", "[unit][ir][partition]") {
  const JointGraph joint = autocast_linear();
  const std::vector<at::Tensor> step_inputs = {torch::randn({6, 4}).to(torch::kBFloat16), torch::randn({3, 4})};
  const at::Tensor seed = torch::full({}, 1.0, torch::kFloat);
  std::vector<at::Tensor> joint_inputs = step_inputs;
  joint_inputs.push_back(seed);
  const std::vector<at::Tensor> joint_results = execute_with_aten(joint.graph, joint_inputs);
  const std::vector<at::Tensor> expected(joint_results.begin() + joint.forward_outputs, joint_results.end());

  const StepPrograms saved = partition(joint);
  CHECK(casts_of_parameter(saved.forward) == 1);
  CHECK(casts_of_parameter(saved.backward) == 0);
  bool saves_the_cast = false;
  for (std::size_t i = static_cast<std::size_t>(saved.forward_results); i < saved.forward.outputs().size(); ++i) {
    const Node& node = saved.forward.node(saved.forward.outputs()[i]);
    saves_the_cast = saves_the_cast || (node.op == Op::cast && node.type == TensorType{DType::bf16, {3, 4}});
  }
  CHECK(saves_the_cast);

  StepPrograms recast;
  {
    ScopedVariable off(kDisableOptimizationsVariable, "saved_casts");
    recast = partition(joint);
  }
  CHECK(casts_of_parameter(recast.backward) == 1);
  CHECK(recast.saved == saved.saved - 1);
  // A float32 input the step does not differentiate (data, not a parameter) is cast again.
  CHECK(casts_of_parameter(partition(autocast_linear(/*w_needs_grad=*/false)).backward) == 1);

  for (const StepPrograms* programs : std::vector<const StepPrograms*>{&saved, &recast}) {
    const std::vector<at::Tensor> got = run_programs(*programs, step_inputs, seed);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("gradient " << i);
      CHECK(torch::equal(got[i], expected[i]));
    }
  }
}

namespace {

// A residual stream under autocast with a layer norm's statistics at each layer:
//   x0 = data, p_i = matmul(cast(x_{i-1}, bf16), W_i) (bf16), x_i = x_{i-1} + cast(p_i, f32),
//   mean_i = sum(x_i) / N, r_i = 1 / sqrt(sum(c_i * c_i) / N + eps), c_i = x_i - mean_i,
//   loss = sum_i sum(c_i * r_i * x_i).
// The backward of each layer needs x_i (through c_i) and the statistics mean_i and r_i.
JointGraph residual_stream(int layers) {
  Graph forward;
  const ValueId data = forward.add_input("x", {DType::f32, {8, 16}});
  std::vector<ValueId> weights;
  for (int i = 0; i < layers; ++i) weights.push_back(forward.add_input("w" + std::to_string(i), {DType::f32, {16, 16}}));
  Attributes to_bf16, to_f32, rows, all, keep_rows;
  to_bf16.dtype = DType::bf16;
  to_f32.dtype = DType::f32;
  keep_rows.ints = {1};
  keep_rows.keepdim = true;
  all.ints = {0, 1};
  const auto constant = [&](double value) {
    Attributes a;
    a.dtype = DType::f32;
    a.scalar = value;
    return forward.add(Op::constant, {}, a);
  };
  ValueId x = data, loss = -1;
  for (int i = 0; i < layers; ++i) {
    const ValueId w16 = forward.add(Op::cast, {weights[static_cast<std::size_t>(i)]}, to_bf16);
    const ValueId p = forward.add(Op::matmul, {forward.add(Op::cast, {x}, to_bf16), w16});
    x = forward.add(Op::add, {x, forward.add(Op::cast, {p}, to_f32)});
    const ValueId mean = forward.add(Op::div, {forward.add(Op::sum, {x}, keep_rows), constant(16.0)});
    const ValueId c = forward.add(Op::sub, {x, mean});
    const ValueId variance = forward.add(Op::div, {forward.add(Op::sum, {forward.add(Op::mul, {c, c})}, keep_rows), constant(16.0)});
    const ValueId r = forward.add(Op::rsqrt, {forward.add(Op::add, {variance, constant(1e-5)})});
    const ValueId term = forward.add(Op::sum, {forward.add(Op::mul, {forward.add(Op::mul, {c, r}), x})}, all);
    loss = loss < 0 ? term : forward.add(Op::add, {loss, term});
  }
  forward.mark_output(loss);
  return differentiate(forward, std::vector<bool>(static_cast<std::size_t>(layers) + 1, true));
}

// How many of the forward program's saved values come from nodes with op `op`.
int saved_of(const StepPrograms& programs, Op op) {
  int count = 0;
  for (std::size_t i = static_cast<std::size_t>(programs.forward_results); i < programs.forward.outputs().size(); ++i) {
    if (programs.forward.node(programs.forward.outputs()[i]).op == op) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("a residual stream and per-row statistics are saved where recomputing them costs more", "[unit][ir][partition]") {
  constexpr int kLayers = 4;
  const JointGraph joint = residual_stream(kLayers);
  const StepPrograms costed = partition(joint);
  StepPrograms recomputing;
  {
    ScopedVariable off(kDisableOptimizationsVariable, "recompute_cost");
    recomputing = partition(joint);
  }
  // Without the rule, the backward rebuilds each x_i from the products of every layer before it,
  // and each layer's statistics from their sums.
  CHECK(saved_of(recomputing, Op::matmul) == kLayers);
  CHECK(saved_of(recomputing, Op::sum) >= 2 * kLayers);
  CHECK(saved_of(recomputing, Op::add) == 0);
  // With it, each x_i is saved (recomputing x_1 reads the data and p_1, and each later x_i reads
  // x_{i-1} and p_i: more than x_i's own bytes), and so are mean_i and r_i (computed from sums
  // only); the products and the variances' sums are then not needed.
  CHECK(saved_of(costed, Op::add) == kLayers);  // x_i
  CHECK(saved_of(costed, Op::div) == kLayers);  // mean_i
  CHECK(saved_of(costed, Op::rsqrt) == kLayers);
  CHECK(saved_of(costed, Op::matmul) == 0);
  CHECK(saved_of(costed, Op::sum) == 0);
  CHECK(costed.recomputed < recomputing.recomputed);

  // Both compute the joint graph's gradients, bit for bit (the same ops on the same values).
  std::vector<at::Tensor> step_inputs = {torch::randn({8, 16})};
  for (int i = 0; i < kLayers; ++i) step_inputs.push_back(torch::randn({16, 16}) / 4);
  const at::Tensor seed = torch::full({}, 1.0, torch::kFloat);
  std::vector<at::Tensor> joint_inputs = step_inputs;
  joint_inputs.push_back(seed);
  const std::vector<at::Tensor> joint_results = execute_with_aten(joint.graph, joint_inputs);
  const std::vector<at::Tensor> expected(joint_results.begin() + joint.forward_outputs, joint_results.end());
  for (const StepPrograms* programs : std::vector<const StepPrograms*>{&costed, &recomputing}) {
    const std::vector<at::Tensor> got = run_programs(*programs, step_inputs, seed);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("gradient " << i);
      CHECK(torch::equal(got[i], expected[i]));
    }
  }
}

TEST_CASE("a statistic broadcast to a larger shape is recomputed, not saved", "[unit][ir][partition]") {
  //   b = sum(x, rows) [8, 1] + sum(x, columns) [1, 16]   (made of statistics only, but [8, 16])
  //   loss = sum(b * x): the backward reads b
  Graph forward;
  const ValueId x = forward.add_input("x", {DType::f32, {8, 16}});
  Attributes rows, columns, all;
  rows.ints = {1};
  rows.keepdim = true;
  columns.ints = {0};
  columns.keepdim = true;
  all.ints = {0, 1};
  const ValueId b = forward.add(Op::add, {forward.add(Op::sum, {x}, rows), forward.add(Op::sum, {x}, columns)});
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::mul, {b, x})}, all));
  const StepPrograms programs = partition(differentiate(forward, {true}));
  CHECK(saved_of(programs, Op::add) == 0);
  CHECK(saved_of(programs, Op::sum) == 2);
}

TEST_CASE("an activation a GEMM reads in both programs is saved, not recomputed and written again", "[unit][ir][partition]") {
  // An MLP: h = x @ w1, a = tanh(h) * h, loss = sum((a @ w2)^2). The second product reads `a` in
  // the forward, and its weight gradient reads `a` (transposed) in the backward.
  Graph forward;
  const ValueId x = forward.add_input("x", {DType::f32, {8, 16}});
  const ValueId w1 = forward.add_input("w1", {DType::f32, {16, 32}});
  const ValueId w2 = forward.add_input("w2", {DType::f32, {32, 4}});
  Attributes all;
  all.ints = {0, 1};
  const ValueId h = forward.add(Op::matmul, {x, w1});
  const ValueId a = forward.add(Op::mul, {forward.add(Op::tanh, {h}), h});
  const ValueId y = forward.add(Op::matmul, {a, w2});
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::mul, {y, y})}, all));
  const JointGraph joint = differentiate(forward, {false, true, true});
  const StepPrograms saving = partition(joint);
  StepPrograms recomputing;
  {
    ScopedVariable off(kDisableOptimizationsVariable, "saved_operands");
    recomputing = partition(joint);
  }
  // Without the rule, `a` is recomputed from h (the same bytes, so recompute_cost leaves it).
  CHECK(saved_of(recomputing, Op::mul) == 0);
  CHECK(recomputing.recomputed >= 2);
  // With it, `a` is saved and the backward recomputes only tanh(h) for a's gradient.
  CHECK(saved_of(saving, Op::mul) == 1);
  CHECK(saving.recomputed < recomputing.recomputed);

  const std::vector<at::Tensor> step_inputs = {torch::randn({8, 16}), torch::randn({16, 32}) / 4, torch::randn({32, 4}) / 4};
  const at::Tensor seed = torch::full({}, 1.0, torch::kFloat);
  const std::vector<at::Tensor> expected = run_programs(recomputing, step_inputs, seed);
  const std::vector<at::Tensor> got = run_programs(saving, step_inputs, seed);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(torch::equal(got[i], expected[i]));
}
