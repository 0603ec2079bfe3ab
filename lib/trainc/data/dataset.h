// defines: Batch, Dataset, TensorDataset, TokenWindowDataset, DataSplits, load_data
//
// Datasets live in memory as tensors. Which samples a training epoch visits, and in what order,
// is a pure function of (data seed, epoch): a run resumed at any step sees exactly the batches the
// uninterrupted run would have seen.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainc/config/training_arguments.h"

namespace trainc {

struct Batch {
  torch::Tensor inputs;   // float features/images, or int64 tokens [batch, time]
  torch::Tensor targets;  // int64 class ids [batch], or next tokens [batch, time]
  int64_t size() const { return inputs.size(0); }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  // samples in one epoch
  // Sample keys for one training epoch, in visiting order.
  virtual std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const;
  // Sample keys for evaluation: every sample once, in a fixed order.
  virtual std::vector<int64_t> eval_order() const;
  virtual Batch get(const std::vector<int64_t>& keys) const = 0;
};

// Samples stacked along dim 0 with one class id each (idx, csv, synthetic classification).
class TensorDataset : public Dataset {
 public:
  TensorDataset(torch::Tensor inputs, torch::Tensor targets);
  int64_t size() const override { return inputs_.size(0); }
  Batch get(const std::vector<int64_t>& keys) const override;
  const torch::Tensor& inputs() const { return inputs_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor inputs_, targets_;
};

// Windows of block_size + 1 tokens from one stream: inputs are the first block_size tokens,
// targets the same shifted by one. Training draws random window starts (as nanoGPT does), one
// epoch being as many windows as fit end to end; evaluation walks the windows end to end.
class TokenWindowDataset : public Dataset {
 public:
  TokenWindowDataset(torch::Tensor tokens, int64_t block_size);  // tokens: int64 [n], n > block_size
  int64_t size() const override { return (tokens_.size(0) - 1) / block_size_; }
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const override;
  std::vector<int64_t> eval_order() const override;
  Batch get(const std::vector<int64_t>& keys) const override;  // keys are window starts

 private:
  torch::Tensor tokens_;
  int64_t block_size_;
};

struct DataSplits {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> eval;  // null when there is no held-out data
  bool language_model = false;
  std::vector<int64_t> sample_shape;  // one input sample (classification) or {block_size} (tokens)
  int64_t token_bound = 0;            // language models: the largest token in the files, plus one
  std::string description;
};

// Reads the data a config names. Bad files are UserErrors naming the file and where it is wrong.
DataSplits load_data(const DataConfig& data, const ModelConfig& model, int64_t seed);

// Readers, one per data kind (data/<kind>_dataset.cpp).
DataSplits load_idx_data(const DataConfig& data, const ModelConfig& model);
DataSplits load_token_data(const DataConfig& data, const ModelConfig& model, int64_t block_size);
DataSplits load_text_data(const DataConfig& data, const ModelConfig& model, int64_t block_size);
DataSplits load_csv_data(const DataConfig& data, const ModelConfig& model);
DataSplits load_synthetic_data(const DataConfig& data, const ModelConfig& model, int64_t block_size, int64_t seed);

// Splits the last `fraction` of samples (or of the token stream) off as the held-out set.
void split_tail(DataSplits& splits, const torch::Tensor& inputs, const torch::Tensor& targets, double fraction);
void split_token_tail(DataSplits& splits, const torch::Tensor& tokens, int64_t block_size, double fraction,
                      const std::string& source);

// Language-model splits for the file-based kinds (tokens, text): `read` turns a path into an int64
// token stream; the held-out stream comes from data.eval_path, or from the tail of the training one.
DataSplits token_stream_splits(const DataConfig& data, int64_t block_size,
                               const std::function<torch::Tensor(const std::string&)>& read, const std::string& unit);

}  // namespace trainc
