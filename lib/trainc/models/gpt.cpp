#include "trainc/models/gpt.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/normalization.h>
#include <torch/nn/init.h>

#include <cmath>

#include "trainc/compat/torch_compat.h"
#include "trainc/models/checkpointed.h"

namespace trainc {

namespace F = torch::nn::functional;

GptLayerNormImpl::GptLayerNormImpl(int64_t width, bool bias) {
  weight_ = register_parameter("weight", torch::ones({width}));
  if (bias) bias_ = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor GptLayerNormImpl::forward(const torch::Tensor& x) {
  return at::layer_norm(x, {weight_.size(0)}, weight_, bias_, 1e-5);
}

namespace {

// A layer's x @ weight^T + bias as ATen's linear computes it, which is what Python's nn.Linear
// runs, not the C++ frontend's F::linear (Linear::forward): over a 3-D input that runs matmul and
// then `+=` its bias, so under autocast a float32 bias was added into the bf16 product by a kernel
// of its own, one that mixes dtypes and is not vectorized (docs/benchmarks.md: 6 ms of GPT-2's
// step). ATen's linear casts the bias with the rest and adds it in the GEMM's epilogue (addmm).
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) { return at::linear(x, layer->weight, layer->bias); }

}  // namespace

GptBlockImpl::GptBlockImpl(const ModelConfig& config) : n_head_(config.n_head), dropout_(config.dropout) {
  const int64_t width = config.n_embd;
  auto new_linear = [&](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(config.bias)); };
  ln_1_ = register_module("ln_1", GptLayerNorm(width, config.bias));
  c_attn_ = register_module("attn_c_attn", new_linear(width, 3 * width));
  attn_proj_ = register_module("attn_c_proj", new_linear(width, width));
  ln_2_ = register_module("ln_2", GptLayerNorm(width, config.bias));
  c_fc_ = register_module("mlp_c_fc", new_linear(width, 4 * width));
  mlp_proj_ = register_module("mlp_c_proj", new_linear(4 * width, width));
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), time = x.size(1), width = x.size(2);
  const auto heads = [&](const torch::Tensor& t) { return t.view({batch, time, n_head_, width / n_head_}).transpose(1, 2); };
  const std::vector<torch::Tensor> qkv = linear(c_attn_, ln_1_->forward(x)).split(width, 2);
  const torch::Tensor attended =
      causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), dropout_, is_training());
  torch::Tensor h = x + resid_dropout_->forward(linear(attn_proj_, attended.transpose(1, 2).contiguous().view({batch, time, width})));
  // GPT-2's GELU is the tanh approximation.
  const torch::Tensor hidden = F::gelu(linear(c_fc_, ln_2_->forward(h)), F::GELUFuncOptions().approximate("tanh"));
  return h + resid_dropout_->forward(linear(mlp_proj_, hidden));
}

GptImpl::GptImpl(const ModelConfig& config, bool gradient_checkpointing)
    : config_(config), gradient_checkpointing_(gradient_checkpointing) {
  wte_ = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  wpe_ = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  drop_ = register_module("drop", torch::nn::Dropout(config.dropout));
  for (int64_t i = 0; i < config.n_layer; ++i) {
    GptBlock block(config);
    blocks_->push_back(block);
    block_functions_.push_back([impl = block.ptr()](const torch::Tensor& x) { return impl->forward(x); });
  }
  register_module("h", blocks_);
  ln_f_ = register_module("ln_f", GptLayerNorm(config.n_embd, config.bias));
  if (!config.tie_embeddings) {
    lm_head_weight_ = register_parameter("lm_head_weight", torch::empty({config.vocab_size, config.n_embd}));
  }
  // GPT-2's initialization: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer).
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    if (p.dim() < 2) continue;  // LayerNorm weights stay 1, biases 0 (below)
    const bool residual = name.find("c_proj.weight") != std::string::npos;
    torch::nn::init::normal_(p, 0.0, residual ? residual_std : 0.02);
  }
  for (auto& item : named_parameters()) {
    if (item.key().find(".bias") != std::string::npos) item.value().zero_();
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens) {
  const int64_t time = tokens.size(1);
  TORCH_CHECK(time <= config_.block_size, "sequence of ", time, " tokens is longer than model.block_size ", config_.block_size);
  const torch::Tensor positions = torch::arange(time, tokens.options().dtype(torch::kLong));
  torch::Tensor x = drop_->forward(wte_->forward(tokens) + wpe_->forward(positions));
  for (std::size_t i = 0; i < blocks_->size(); ++i) {
    const bool recompute = gradient_checkpointing_ && is_training() && torch::GradMode::is_enabled();
    x = recompute ? checkpointed(&block_functions_[i], x) : block_functions_[i](x);
  }
  x = ln_f_->forward(x);
  // The head has no bias, so F::linear runs only the matmul. Its trace (the weight transposed, then
  // cast) is the form the compile planner's fused head recognizes (import/composites.cpp).
  return F::linear(x, config_.tie_embeddings ? wte_->weight : lm_head_weight_);
}

}  // namespace trainc
