// What the partition saves between the forward and backward programs, and that the two programs
// compute the joint graph's loss and gradients.
#include <cstdlib>
#include <map>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/partition/partition.h"
#include "trainc/compile/runtime/aten_executor.h"

using namespace trainc;
using namespace trainc::ir;

namespace {

// Sets an environment variable for one scope, restoring what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    const char* previous = std::getenv(name);
    if (previous != nullptr) previous_ = previous;
    had_ = previous != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (had_) {
      setenv(name_, previous_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string previous_;
  bool had_ = false;
};

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
