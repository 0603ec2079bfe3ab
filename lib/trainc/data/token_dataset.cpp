// tokens: uint16 token files. Two layouts, told apart by the first int32:
//  - llm.c's .bin: a header of 256 int32 (magic 20240520, version 1, token count), then the tokens;
//  - nanoGPT's prepare scripts: the raw uint16 array, nothing else.
#include <torch/torch.h>

#include <array>
#include <fstream>

#include "trainc/common/error.h"
#include "trainc/data/dataset.h"

namespace trainc {
namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;
constexpr std::size_t kLlmcHeaderInts = 256;

torch::Tensor read_token_file(const std::string& path, int64_t vocab_size) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) throw UserError(path + ": cannot open the token file (does it exist?)");
  const auto file_size = static_cast<std::size_t>(file.tellg());
  file.seekg(0);
  std::size_t offset = 0;
  std::size_t count = file_size / 2;
  std::array<int32_t, kLlmcHeaderInts> header{};
  if (file_size >= sizeof(header)) {
    file.read(reinterpret_cast<char*>(header.data()), sizeof(header));
    if (header[0] == kLlmcMagic) {
      if (header[1] != kLlmcVersion) {
        throw UserError(path + ": llm.c token file version " + std::to_string(header[1]) + ", expected " +
                        std::to_string(kLlmcVersion) + " (uint16 tokens)");
      }
      offset = sizeof(header);
      if (header[2] < 0) {
        throw UserError(path + ": the llm.c header announces " + std::to_string(header[2]) + " tokens; expected a count >= 0 (a damaged header?)");
      }
      count = static_cast<std::size_t>(header[2]);
      const std::size_t announced = offset + 2 * count;
      if (file_size != announced) {
        throw UserError(path + ": " + (file_size < announced ? "truncated: " : "") + "the llm.c header announces " +
                        std::to_string(header[2]) + " tokens (" + std::to_string(announced) + " bytes), the file has " +
                        std::to_string(file_size) + " bytes" + (file_size > announced ? " (a damaged header, or data appended?)" : ""));
      }
    }
  }
  if (offset == 0 && file_size % 2 != 0) {
    throw UserError(path + ": " + std::to_string(file_size) +
                    " bytes is not a whole number of uint16 tokens (truncated, or not a token file)");
  }
  torch::Tensor tokens = torch::empty({static_cast<int64_t>(count)}, torch::kInt16);
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(reinterpret_cast<char*>(tokens.data_ptr()), static_cast<std::streamsize>(2 * count));
  if (static_cast<std::size_t>(file.gcount()) != 2 * count) throw UserError(path + ": read failed after " + std::to_string(file.gcount()) + " bytes");
  tokens = tokens.to(torch::kInt32).bitwise_and(0xFFFF).to(torch::kLong);  // uint16 stored in int16
  if (count > 0) {
    const int64_t largest = tokens.max().item<int64_t>();
    if (largest >= vocab_size) {
      throw UserError(path + ": token " + std::to_string(largest) + " at position " +
                      std::to_string(tokens.argmax().item<int64_t>()) + " is not below model.vocab_size (" +
                      std::to_string(vocab_size) + ")");
    }
  }
  return tokens;
}

}  // namespace

DataSplits load_token_data(const DataConfig& data, const ModelConfig& model, int64_t block_size) {
  // A TorchScript model has no model.vocab_size: its logits' width is checked against the data's
  // largest token at its first forward (TorchScriptModel), so any uint16 token is taken here.
  const int64_t vocab_size = model.name == "torchscript" ? int64_t{1} << 16 : model.vocab_size;
  return token_stream_splits(
      data, block_size, [&](const std::string& path) { return read_token_file(path, vocab_size); }, "tokens");
}

}  // namespace trainc
