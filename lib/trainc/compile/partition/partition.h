// defines: StepPrograms, partition
//
// Partition splits the joint graph into the two programs a training step runs: the forward
// program (loss, buffer updates, and the tensors the backward needs) and the backward program
// (the gradients). What crosses between them is chosen here: results of extern ops, reductions and
// random draws are saved; cheap pointwise values and views are recomputed in the backward from
// what is saved, which keeps fewer large tensors alive between the two programs. One exception:
// a parameter (a step input with a gradient) cast to bf16 or f16, as autocast casts the weights,
// is saved. It costs half the parameter's bytes, where casting it again costs a kernel launch and
// a read of the float32 parameter per weight (GPT-2: 98 launches, about 0.3 ms a step, for 0.25 GB).
#pragma once

#include <vector>

#include "trainc/compile/autodiff/autodiff.h"

namespace trainc {

struct StepPrograms {
  // Inputs: the step's inputs. Outputs: the joint graph's forward outputs, then the saved values.
  ir::Graph forward;
  // Inputs: backward_step_inputs (step inputs it reads), then the saved values, then loss_grad.
  // Outputs: the gradients, in the order of JointGraph::gradient_inputs.
  ir::Graph backward;
  int forward_results = 0;                // forward outputs before the saved values
  std::vector<int> backward_step_inputs;  // positions among the step inputs
  int saved = 0;
  int recomputed = 0;  // forward nodes the backward recomputes
};

StepPrograms partition(const JointGraph& joint);

}  // namespace trainc
