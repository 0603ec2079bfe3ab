#include "trainc/models/cnn.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>

namespace trainc {

CnnImpl::CnnImpl(const ModelConfig& config) {
  int64_t channels = config.in_channels;
  int64_t side = 28;
  for (int64_t out : config.channels) {
    features_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, out, 3).padding(1).bias(false)));
    features_->push_back(torch::nn::BatchNorm2d(out));
    features_->push_back(torch::nn::ReLU());
    features_->push_back(torch::nn::MaxPool2d(2));
    channels = out;
    side /= 2;
  }
  register_module("features", features_);
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
  head_ = register_module("head", torch::nn::Linear(channels * side * side, config.num_classes));
}

torch::Tensor CnnImpl::forward(const torch::Tensor& images) {
  return head_->forward(dropout_->forward(features_->forward(images).flatten(1)));
}

}  // namespace trainc
