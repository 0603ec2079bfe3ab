// text: any UTF-8 (or other) text file, tokenized byte by byte: token = byte value, vocabulary 256.
#include <torch/torch.h>

#include <fstream>
#include <iterator>

#include "trainc/common/error.h"
#include "trainc/data/dataset.h"

namespace trainc {
namespace {

torch::Tensor read_bytes_as_tokens(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError(path + ": cannot open the text file (does it exist?)");
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  torch::Tensor tokens = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(tokens.data_ptr(), bytes.data(), bytes.size());
  return tokens.to(torch::kLong);
}

}  // namespace

DataSplits load_text_data(const DataConfig& data, const ModelConfig& model, int64_t block_size) {
  if (model.vocab_size < 256) {
    throw UserError("model.vocab_size: got " + std::to_string(model.vocab_size) +
                    ", expected at least 256 for data.kind text (one token per byte)");
  }
  return token_stream_splits(data, block_size, read_bytes_as_tokens, "bytes");
}

}  // namespace trainc
