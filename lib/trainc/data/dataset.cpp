#include "trainc/data/dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "trainc/common/error.h"

namespace trainc {
namespace {

// A generator for one epoch, independent of every other epoch and of LibTorch's RNG.
std::mt19937_64 epoch_generator(uint64_t seed, int64_t epoch) {
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch), 0x7a11u};
  return std::mt19937_64(sequence);
}

}  // namespace

std::vector<int64_t> Dataset::epoch_order(uint64_t seed, int64_t epoch) const {
  std::vector<int64_t> order(static_cast<std::size_t>(size()));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator = epoch_generator(seed, epoch);
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates, spelled out so every platform agrees
    std::swap(order[i - 1], order[generator() % i]);
  }
  return order;
}

std::vector<int64_t> Dataset::eval_order() const {
  std::vector<int64_t> order(static_cast<std::size_t>(size()));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

TensorDataset::TensorDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  TRAINC_CHECK(inputs_.size(0) == targets_.size(0), "inputs and targets differ in length");
}

Batch TensorDataset::get(const std::vector<int64_t>& keys) const {
  const torch::Tensor index = torch::tensor(keys, torch::kLong);
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

TokenWindowDataset::TokenWindowDataset(torch::Tensor tokens, int64_t block_size)
    : tokens_(std::move(tokens)), block_size_(block_size) {
  TRAINC_CHECK(tokens_.size(0) > block_size_, "token stream shorter than one window");
}

std::vector<int64_t> TokenWindowDataset::epoch_order(uint64_t seed, int64_t epoch) const {
  std::mt19937_64 generator = epoch_generator(seed, epoch);
  const auto starts = static_cast<uint64_t>(tokens_.size(0) - block_size_);  // valid starts: [0, n - block - 1]
  std::vector<int64_t> order(static_cast<std::size_t>(size()));
  for (auto& start : order) start = static_cast<int64_t>(generator() % starts);
  return order;
}

std::vector<int64_t> TokenWindowDataset::eval_order() const {
  std::vector<int64_t> order(static_cast<std::size_t>(size()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i) * block_size_;
  return order;
}

Batch TokenWindowDataset::get(const std::vector<int64_t>& keys) const {
  // [batch, block + 1] gathered in one index_select: offsets broadcast over the starts.
  const torch::Tensor starts = torch::tensor(keys, torch::kLong).unsqueeze(1);
  const torch::Tensor windows = tokens_.index_select(0, (starts + torch::arange(block_size_ + 1, torch::kLong)).view(-1))
                                    .view({static_cast<int64_t>(keys.size()), block_size_ + 1});
  using torch::indexing::Slice;
  return {windows.index({Slice(), Slice(0, block_size_)}), windows.index({Slice(), Slice(1, torch::indexing::None)})};
}

void split_tail(DataSplits& splits, const torch::Tensor& inputs, const torch::Tensor& targets, double fraction) {
  const int64_t total = inputs.size(0);
  const auto held_out = static_cast<int64_t>(static_cast<double>(total) * fraction);
  if (held_out == 0 || held_out == total) {
    splits.train = std::make_unique<TensorDataset>(inputs, targets);
    return;
  }
  splits.train = std::make_unique<TensorDataset>(inputs.slice(0, 0, total - held_out), targets.slice(0, 0, total - held_out));
  splits.eval = std::make_unique<TensorDataset>(inputs.slice(0, total - held_out), targets.slice(0, total - held_out));
}

void split_token_tail(DataSplits& splits, const torch::Tensor& tokens, int64_t block_size, double fraction,
                      const std::string& source) {
  const int64_t total = tokens.size(0);
  const auto held_out = static_cast<int64_t>(static_cast<double>(total) * fraction);
  const bool split = held_out > block_size;  // a held-out part needs at least one window
  const int64_t train_tokens = split ? total - held_out : total;
  if (train_tokens <= block_size) {
    throw UserError(source + ": " + std::to_string(train_tokens) + " training tokens, fewer than data.block_size + 1 (" +
                    std::to_string(block_size + 1) + ")");
  }
  splits.train = std::make_unique<TokenWindowDataset>(tokens.slice(0, 0, train_tokens), block_size);
  if (split) splits.eval = std::make_unique<TokenWindowDataset>(tokens.slice(0, train_tokens), block_size);
}

DataSplits token_stream_splits(const DataConfig& data, int64_t block_size,
                               const std::function<torch::Tensor(const std::string&)>& read, const std::string& unit) {
  DataSplits splits;
  splits.language_model = true;
  splits.sample_shape = {block_size};
  const torch::Tensor tokens = read(*data.train_path);
  if (data.eval_path) {
    const torch::Tensor eval_tokens = read(*data.eval_path);
    for (const auto& [path, stream] : {std::pair{*data.train_path, tokens}, std::pair{*data.eval_path, eval_tokens}}) {
      if (stream.size(0) <= block_size) {
        throw UserError(path + ": " + std::to_string(stream.size(0)) + " " + unit + ", fewer than data.block_size + 1 (" +
                        std::to_string(block_size + 1) + ")");
      }
    }
    splits.train = std::make_unique<TokenWindowDataset>(tokens, block_size);
    splits.eval = std::make_unique<TokenWindowDataset>(eval_tokens, block_size);
    splits.token_bound = eval_tokens.max().item<int64_t>() + 1;
  } else {
    split_token_tail(splits, tokens, block_size, data.validation_split, *data.train_path);
  }
  splits.token_bound = std::max(splits.token_bound, tokens.max().item<int64_t>() + 1);  // streams are never empty here
  splits.description = data.kind + " " + *data.train_path + " (" + std::to_string(tokens.size(0)) + " " + unit + ")";
  return splits;
}

DataSplits load_data(const DataConfig& data, const ModelConfig& model, int64_t seed) {
  const int64_t block_size = data.block_size.value_or(model.block_size);
  if (model.name == "gpt" && block_size > model.block_size) {
    throw UserError("data.block_size: got " + std::to_string(block_size) + ", longer than model.block_size (" +
                    std::to_string(model.block_size) + ")");
  }
  if (data.kind == "idx") return load_idx_data(data, model);
  if (data.kind == "tokens") return load_token_data(data, model, block_size);
  if (data.kind == "text") return load_text_data(data, model, block_size);
  if (data.kind == "csv") return load_csv_data(data, model);
  TRAINC_CHECK(data.kind == "synthetic", "unknown data kind " + data.kind);
  return load_synthetic_data(data, model, block_size, seed);
}

}  // namespace trainc
