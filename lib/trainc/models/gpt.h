// defines: Gpt — a decoder-only transformer in the GPT-2 layout (as nanoGPT and llm.c build it):
// token + position embeddings, n_layer pre-LayerNorm blocks of causal self-attention and a GELU
// MLP, a final LayerNorm and a language-model head tied to the token embedding by default.
// GPT-2 124M: n_layer 12, n_head 12, n_embd 768, vocab_size 50257, block_size 1024.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

// LayerNorm with an optional bias (torch::nn::LayerNorm always has one).
class GptLayerNormImpl : public torch::nn::Module {
 public:
  GptLayerNormImpl(int64_t width, bool bias);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(GptLayerNorm);

class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);  // [batch, time, n_embd]

 private:
  int64_t n_head_;
  double dropout_;
  GptLayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  torch::nn::Linear c_attn_{nullptr}, attn_proj_{nullptr}, c_fc_{nullptr}, mlp_proj_{nullptr};
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(GptBlock);

class GptImpl : public torch::nn::Module {
 public:
  GptImpl(const ModelConfig& config, bool gradient_checkpointing);
  torch::Tensor forward(const torch::Tensor& tokens);  // [batch, time] -> logits [batch, time, vocab]

 private:
  ModelConfig config_;
  bool gradient_checkpointing_;
  torch::nn::Embedding wte_{nullptr}, wpe_{nullptr};
  torch::nn::Dropout drop_{nullptr};
  torch::nn::ModuleList blocks_;
  GptLayerNorm ln_f_{nullptr};
  torch::Tensor lm_head_weight_;  // undefined when tied to wte
  std::vector<std::function<torch::Tensor(const torch::Tensor&)>> block_functions_;  // for checkpointing
};
TORCH_MODULE(Gpt);

}  // namespace trainc
