// defines: GradScale, CompiledStep, ProgramRunner
//
// A compiled training step: the forward program, then the backward program, each run by the
// backend's executor (aot_eager: op by op through ATen; inductor: fused kernels and ATen calls). Its result is the micro-batch's loss; the gradients
// (scaled by grad_scale, the backward's seed) are accumulated into the parameters' .grad as eager
// backward() does, and the buffers the step updates (batch-norm statistics) are written back.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <utility>
#include <vector>

#include "trainc/compile/partition/partition.h"

namespace trainc {

// The backward's seed, the factor the gradients are scaled by: a number, or a 0-dim float32
// tensor on the step's device that the step reads when it runs (fp16's loss scale inside a CUDA
// graph, where a number would be recorded once and replayed as it was). A tensor is read, never
// kept: pass one made for the step. Both constructors are explicit, so that a host number is
// always chosen in so many words where a graph might record it.
struct GradScale {
  explicit GradScale(double scale) : value(scale) {}
  explicit GradScale(at::Tensor scale) : tensor(std::move(scale)) {}
  double value = 1.0;
  at::Tensor tensor;  // when defined, the seed instead of value
};

// Runs one program: its inputs in order, on `device`; its outputs in order. The runner owns the
// inputs, so a program can release each one after its last use.
using ProgramRunner = std::function<std::vector<at::Tensor>(std::vector<at::Tensor>, at::Device)>;

class CompiledStep {
 public:
  // Without runners, both programs run through ATen (aot_eager).
  CompiledStep(StepPrograms programs, std::vector<int> updated_buffers, std::vector<int> gradient_inputs,
               ProgramRunner forward = nullptr, ProgramRunner backward = nullptr);

  // `tensors`: the step's inputs in capture order (parameters, buffers, inputs, targets).
  at::Tensor run(const std::vector<at::Tensor>& tensors, const GradScale& grad_scale) const;

  CompiledStep(const CompiledStep&) = delete;  // the ATen runners refer to programs_
  CompiledStep& operator=(const CompiledStep&) = delete;

  const StepPrograms& programs() const { return programs_; }

 private:
  StepPrograms programs_;
  std::vector<int> updated_buffers_;
  std::vector<int> gradient_inputs_;
  ProgramRunner forward_;
  ProgramRunner backward_;
  // The backward's seed, a 0-dim tensor of `value`. Kept for reuse per value, dtype and device
  // (each step's fill was a launch on a CUDA graph's path), up to kKeptSeeds of them and only when
  // made outside a capture. One kept is never dropped: a graph captured reading it reads it at each
  // replay, whatever value the steps after the capture ask for.
  at::Tensor seed(double value, const at::TensorOptions& options) const;
  static constexpr std::size_t kKeptSeeds = 8;
  mutable std::vector<std::pair<double, at::Tensor>> seeds_;
};

}  // namespace trainc
