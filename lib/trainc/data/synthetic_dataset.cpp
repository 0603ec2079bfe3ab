// synthetic: random data of the shape the model takes, for benchmarks and tests.
//  - gpt: a uniform random token stream of num_samples windows;
//  - mlp, cnn: Gaussian inputs labelled by a fixed random linear map (argmax), so it is learnable.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "trainc/common/error.h"
#include "trainc/data/dataset.h"

namespace trainc {

DataSplits load_synthetic_data(const DataConfig& data, const ModelConfig& model, int64_t block_size, int64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) + 1);
  DataSplits splits;
  const int64_t samples = data.num_samples;
  if (model.name == "gpt") {
    splits.language_model = true;
    splits.sample_shape = {block_size};
    const torch::Tensor tokens = torch::randint(model.vocab_size, {samples * block_size + 1}, generator, torch::kLong);
    split_token_tail(splits, tokens, block_size, data.validation_split, "data.kind synthetic");
  } else if (model.name == "mlp" || model.name == "cnn") {
    splits.sample_shape = model.name == "mlp" ? std::vector<int64_t>{model.input_size}
                                              : std::vector<int64_t>{model.in_channels, 28, 28};
    std::vector<int64_t> shape = {samples};
    shape.insert(shape.end(), splits.sample_shape.begin(), splits.sample_shape.end());
    const torch::Tensor inputs = torch::randn(shape, generator, torch::kFloat);
    const torch::Tensor mixing = torch::randn({inputs[0].numel(), model.num_classes}, generator, torch::kFloat);
    const torch::Tensor labels = inputs.flatten(1).matmul(mixing).argmax(1);
    split_tail(splits, inputs, labels, data.validation_split);
  } else {
    throw UserError("data.kind: synthetic data is generated for the zoo models (mlp, cnn, gpt); model.name " + model.name +
                    " needs a data file");
  }
  splits.description = "synthetic (" + std::to_string(samples) + " samples)";
  return splits;
}

}  // namespace trainc
