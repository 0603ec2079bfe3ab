// defines: CompiledStep
//
// A training step compiled for the aot_eager backend: the forward program, then the backward
// program, each run op by op through ATen. Its result is the micro-batch's loss; the gradients
// (scaled by grad_scale, the backward's seed) are accumulated into the parameters' .grad as eager
// backward() does, and the buffers the step updates (batch-norm statistics) are written back.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "trainc/compile/partition/partition.h"

namespace trainc {

class CompiledStep {
 public:
  CompiledStep(StepPrograms programs, std::vector<int> updated_buffers, std::vector<int> gradient_inputs);

  // `tensors`: the step's inputs in capture order (parameters, buffers, inputs, targets).
  at::Tensor run(const std::vector<at::Tensor>& tensors, double grad_scale) const;

  const StepPrograms& programs() const { return programs_; }

 private:
  StepPrograms programs_;
  std::vector<int> updated_buffers_;
  std::vector<int> gradient_inputs_;
};

}  // namespace trainc
