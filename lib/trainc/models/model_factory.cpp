// Builds the model a config names and checks that it fits the data.
#include <numeric>

#include "trainc/common/error.h"
#include "trainc/models/cnn.h"
#include "trainc/models/gpt.h"
#include "trainc/models/mlp.h"
#include "trainc/models/model.h"
#include "trainc/models/torchscript_model.h"

namespace trainc {

int64_t Model::parameter_count() {
  int64_t count = 0;
  for (const auto& item : named_parameters()) count += item.second.numel();
  return count;
}

std::unique_ptr<Model> make_model(const ModelConfig& config, const ModelInputs& inputs, bool gradient_checkpointing) {
  const auto shape_text = [&] { return c10::str(c10::IntArrayRef(inputs.sample_shape)); };
  if (gradient_checkpointing && config.name != "gpt") {
    throw UserError("gradient_checkpointing: supported for model.name gpt; got model.name " + config.name);
  }
  if (inputs.language_model && (config.name == "mlp" || config.name == "cnn")) {
    throw UserError("model.name: " + config.name + " is a classifier, but the data is a token stream; use model.name gpt");
  }
  if (config.name == "mlp") {
    const int64_t features = std::accumulate(inputs.sample_shape.begin(), inputs.sample_shape.end(), int64_t{1}, std::multiplies<>());
    if (features != config.input_size) {
      throw UserError("model.input_size: got " + std::to_string(config.input_size) + ", but the data has " +
                      std::to_string(features) + " features per sample (shape " + shape_text() + ")");
    }
    return std::make_unique<ModuleModel<Mlp>>(
        Mlp(config),
        "mlp " + std::to_string(config.input_size) + " -> " + c10::str(c10::IntArrayRef(config.hidden_sizes)) + " -> " +
            std::to_string(config.num_classes),
        [config](const std::string& name) { return mlp_alternative_checkpoint_name(config, name); });
  }
  if (config.name == "cnn") {
    const std::vector<int64_t> expected = {config.in_channels, 28, 28};
    if (inputs.sample_shape != expected) {
      throw UserError("model.name: cnn needs images of shape " + c10::str(c10::IntArrayRef(expected)) +
                      ", but the data has samples of shape " + shape_text());
    }
    return std::make_unique<ModuleModel<Cnn>>(Cnn(config), "cnn channels " + c10::str(c10::IntArrayRef(config.channels)));
  }
  if (config.name == "gpt") {
    if (!inputs.language_model) {
      throw UserError("model.name: gpt needs token data (data.kind tokens, text or synthetic), got samples of shape " +
                      shape_text());
    }
    return std::make_unique<ModuleModel<Gpt>>(
        Gpt(config, gradient_checkpointing),
        "gpt n_layer " + std::to_string(config.n_layer) + ", n_head " + std::to_string(config.n_head) + ", n_embd " +
            std::to_string(config.n_embd) + ", vocab " + std::to_string(config.vocab_size) + ", block " +
            std::to_string(config.block_size));
  }
  TRAINC_CHECK(config.name == "torchscript", "unknown model " + config.name);
  return std::make_unique<TorchScriptModel>(*config.path, inputs.language_model, config.num_classes, inputs.token_bound);
}

}  // namespace trainc
