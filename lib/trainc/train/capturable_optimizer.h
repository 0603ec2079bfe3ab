// defines: DeviceStateOptimizer, CapturableAdamW, CapturableSGD
//
// Optimizers whose learning rate and step counts live in device tensors, so that their update can
// be captured in a CUDA graph and replayed: a replay reads the learning rate written before it and
// advances the step counts on the device, where host scalars would be frozen into the graph at
// capture. Same arithmetic, options and checkpoint state as torch::optim::AdamW and SGD; the device
// step counts are copied into that state before a checkpoint is written and rebuilt from it after
// one is loaded, so checkpoints stay interchangeable with the eager optimizers'.
//
// The state (moments, step counts) is created by the first step, which must therefore run before
// any capture: a capture records work without doing it.
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <optional>
#include <set>
#include <unordered_map>

#include "trainc/compile/optimizations.h"

namespace trainc {

class DeviceStateOptimizer {
 public:
  virtual ~DeviceStateOptimizer() = default;
  // Writes the learning rate every group's update reads: one device-side fill, no host sync.
  virtual void set_device_learning_rate(double learning_rate) = 0;
  // That learning rate, a float32 scalar on the parameters' device, for a writer on the device
  // (train/device_step_start); made on first use.
  virtual at::Tensor device_learning_rate() = 0;
  // For a step's start on the device: the step counts of `params`, which the caller advances before
  // the next step(); that step then leaves them as they are, and must update exactly these
  // parameters (checked). Each of them has stepped before, so its count exists. Empty for an
  // optimizer that keeps no counts. A capture that fails before that step ends the run, so nothing
  // undoes this.
  virtual std::vector<at::Tensor> step_counts_advanced_before_next_step(const std::vector<at::Tensor>& params) {
    (void)params;
    return {};
  }
  // Copies what lives on the device into the state a checkpoint saves (a host sync).
  virtual void store_device_state() {}
};

class CapturableAdamW : public torch::optim::AdamW, public DeviceStateOptimizer {
 public:
  // With trainc's AdamW kernel, tracks the parameters on a GPU for bf16 shadows (switch
  // parameter_shadows): the kernel writes each one's shadow as it updates it.
  CapturableAdamW(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamWOptions defaults = {});
  ~CapturableAdamW() override;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void load(torch::serialize::InputArchive& archive) override;
  void set_device_learning_rate(double learning_rate) override;
  at::Tensor device_learning_rate() override;
  std::vector<at::Tensor> step_counts_advanced_before_next_step(const std::vector<at::Tensor>& params) override;
  void store_device_state() override;
  // The next step reads every gradient multiplied by `coefficient` (a 0-dim float32 tensor on the
  // parameters' device: gradient clipping's factor, grad_norm). On a GPU trainc's kernel multiplies
  // each gradient by it as it loads it (ATen's fused update divides by its inverse), instead of a
  // separate pass scaling them in place.
  void scale_gradients_in_next_step(const at::Tensor& coefficient) { coefficient_ = coefficient; }

 private:
  // trainc's AdamW kernel where it takes the tensors (switch adamw_kernel), decided when the
  // optimizer is made rather than at every step.
  const bool adamw_kernel_ = optimization_enabled(Optimization::adamw_kernel);
  const bool shadows_ = optimization_enabled(Optimization::parameter_shadows);
  // The bf16 shadows kernel updates of `params` write, and their record once written.
  std::vector<at::Tensor> shadows_to_update(at::TensorList params) const;
  void updated_shadows(at::TensorList params) const;
  void cast_shadows(at::TensorList params) const;  // after an update that wrote the parameters only
  at::Tensor coefficient_;                             // for the next step only; undefined: 1
  std::optional<std::set<const void*>> advanced_;      // for the next step only: the parameters whose counts are advanced
  at::Tensor learning_rate_;                           // float32 scalar on the parameters' device
  std::unordered_map<const void*, at::Tensor> steps_;  // per parameter (TensorImpl), float32 on the device
};

// Plain SGD (no momentum: what make_optimizer builds for optim: sgd), learning rate on the device.
class CapturableSGD : public torch::optim::SGD, public DeviceStateOptimizer {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
  void set_device_learning_rate(double learning_rate) override;
  at::Tensor device_learning_rate() override;

 private:
  at::Tensor learning_rate_;
};

}  // namespace trainc
