// defines: make_optimizer, set_learning_rate
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

}  // namespace trainc
