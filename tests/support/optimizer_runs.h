// defines: OptimizerRun, initial_parameters, adamw_groups, sgd_groups, trajectory_learning_rate, draw_gradients,
//          take_steps, take_steps_started_on_device, set_clipping_gradients
//
// The same training-free optimizer trajectory under two optimizers, for comparing a capturable
// optimizer with LibTorch's eager one, or clipping inside an update with clipping before it.
//
// Parameters of a few shapes in two groups (weight decay on the matrices only, as make_optimizer
// groups them), fresh random gradients at every step, a learning rate that changes at every
// step, and one parameter that gets a gradient only on even steps (its step count falls behind).
#pragma once

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "trainc/train/capturable_optimizer.h"
#include "trainc/train/device_step_start.h"
#include "trainc/train/optimizer.h"

namespace trainc::test {

struct OptimizerRun {
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

inline std::vector<torch::Tensor> initial_parameters(torch::Device device, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> params;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{17, 9}, {33, 4}, {9}, {4}, {5, 5}}) {
    params.push_back(torch::randn(shape, torch::TensorOptions().device(device)).set_requires_grad(true));
  }
  return params;
}

inline std::vector<torch::optim::OptimizerParamGroup> adamw_groups(const std::vector<torch::Tensor>& params) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto options = [](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(weight_decay));
  };
  groups.emplace_back(std::vector<torch::Tensor>{params[0], params[1], params[4]}, options(0.1));
  groups.emplace_back(std::vector<torch::Tensor>{params[2], params[3]}, options(0.0));
  return groups;
}

inline std::vector<torch::optim::OptimizerParamGroup> sgd_groups(const std::vector<torch::Tensor>& params) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{params[0], params[1], params[4]},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(1e-2).weight_decay(0.1)));
  groups.emplace_back(std::vector<torch::Tensor>{params[2], params[3]},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(1e-2)));
  return groups;
}

// The learning rate of the trajectory's step `step`.
inline double trajectory_learning_rate(int step) { return 1e-2 * (1.0 + 0.5 * std::cos(0.1 * step)); }

// The gradients of the trajectory's step `step`, drawn from `gradient_seed` + step; the parameters
// that get one.
inline std::vector<torch::Tensor> draw_gradients(OptimizerRun& run, int step, uint64_t gradient_seed) {
  torch::manual_seed(gradient_seed + static_cast<uint64_t>(step));
  std::vector<torch::Tensor> stepped;
  for (std::size_t i = 0; i < run.params.size(); ++i) {
    const bool skipped = i == 3 && step % 2 == 1;
    run.params[i].mutable_grad() = skipped ? torch::Tensor() : torch::randn_like(run.params[i]);
    if (!skipped) stepped.push_back(run.params[i]);
  }
  return stepped;
}

// Steps [first, last) of the trajectory: gradients drawn from `gradient_seed` + step.
inline void take_steps(OptimizerRun& run, int first, int last, uint64_t gradient_seed) {
  for (int step = first; step < last; ++step) {
    draw_gradients(run, step, gradient_seed);
    set_learning_rate(*run.optimizer, trajectory_learning_rate(step));
    run.optimizer->step();
  }
}

// Steps [first, last) of the trajectory, each started by `start` as a whole-step graph's replay
// starts it: the learning rate from its table (of trajectory_learning_rate, with `first` steps
// done, kept ahead of each step as the trainer keeps it), and past the run's first step the step
// counts of the parameters that get gradients advanced before the update, which leaves them.
inline void take_steps_started_on_device(OptimizerRun& run, DeviceStepStart& start, int first, int last, uint64_t gradient_seed) {
  auto& on_device = dynamic_cast<DeviceStateOptimizer&>(*run.optimizer);
  for (int step = first; step < last; ++step) {
    const std::vector<torch::Tensor> stepped = draw_gradients(run, step, gradient_seed);
    const std::vector<torch::Tensor> counts =
        step == first ? std::vector<torch::Tensor>{} : on_device.step_counts_advanced_before_next_step(stepped);
    start.before_step(step);
    start.start_step(on_device.device_learning_rate(), counts);
    run.optimizer->step();
  }
}

// Gradients for step `step` of a clipping comparison, drawn from `gradient_seed` + step: large
// every third step (clipping at 0.5 scales them by a factor far from 1), small otherwise (a factor
// of exactly 1); and a fixed learning rate.
inline void set_clipping_gradients(OptimizerRun& run, int step, uint64_t gradient_seed) {
  torch::manual_seed(gradient_seed + static_cast<uint64_t>(step));
  for (torch::Tensor& p : run.params) p.mutable_grad() = torch::randn_like(p) * (step % 3 == 0 ? 10.0 : 0.01);
  set_learning_rate(*run.optimizer, 1e-2);
}

}  // namespace trainc::test
