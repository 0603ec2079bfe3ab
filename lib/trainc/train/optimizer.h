// defines: make_optimizer, set_learning_rate, record_learning_rate, clipped_step
//
// Hugging Face's optimizer setup: weight decay applies to every parameter except biases and
// normalization weights. Those are exactly the parameters with fewer than two dimensions in the
// zoo models (and in most TorchScript models), which is the rule used here.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>

#include "trainc/config/training_arguments.h"
#include "trainc/models/model.h"

namespace trainc {

// capturable: the learning rate and step counts live on the device (CapturableAdamW / CapturableSGD),
// for a step captured as a CUDA graph.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingArguments& args, Model& model, bool capturable = false);

// Sets every group's learning rate; a capturable optimizer's device copy too (no host sync).
void set_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate);

// Sets every group's learning rate (what a checkpoint saves) and nothing on the device: for a step
// whose start on the device writes the rate its update reads (train/device_step_start).
void record_learning_rate(torch::optim::Optimizer& optimizer, double learning_rate);

// Clips the gradients of `parameters` to a global norm of max_grad_norm (<= 0: no clipping) and
// takes the optimizer's step; returns the norm before clipping, on the device. CapturableAdamW
// applies clipping's factor inside its fused update instead of scaling the gradients first.
torch::Tensor clipped_step(torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& parameters, double max_grad_norm);

}  // namespace trainc
