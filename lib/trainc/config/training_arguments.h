// defines: TrainingArguments, ModelConfig, DataConfig, RunConfig
//
// The run config. Each section is one X-macro table, the single source for the struct, YAML
// parsing, command-line flags, --help, --print-config and docs/config.md, so those can never
// drift apart. TrainingArguments follows Hugging Face's TrainingArguments: same field names,
// same defaults, same meaning. Fields are spelled as their YAML keys.
//
// Columns: X(type, name, default, choices, applies_to, help)
//   choices    "a|b|c" for enumerations, "" for free values
//   applies_to for model/data keys, the model names or data kinds that read the key ("" = all);
//              setting a key that the chosen model or data kind does not read is an error
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trainc {

using StringMap = std::map<std::string, std::string>;
using IntList = std::vector<int64_t>;
using StringList = std::vector<std::string>;

// clang-format off
#define TRAINC_TRAINING_ARGUMENTS(X) \
  X(std::string, output_dir, "trainer_output", "", "", "Directory for checkpoints, metrics.jsonl and the resolved config") \
  X(bool, overwrite_output_dir, false, "", "", "Allow writing into a non-empty output_dir (its old checkpoints are replaced)") \
  X(int64_t, per_device_train_batch_size, 8, "", "", "Training batch size per device") \
  X(int64_t, per_device_eval_batch_size, 8, "", "", "Evaluation batch size per device") \
  X(int64_t, gradient_accumulation_steps, 1, "", "", "Micro-batches accumulated before each optimizer step") \
  X(double, num_train_epochs, 3.0, "", "", "Epochs to train (a fraction trains part of the last epoch); ignored when max_steps > 0") \
  X(int64_t, max_steps, -1, "", "", "Total optimizer steps; overrides num_train_epochs when > 0") \
  X(double, learning_rate, 5e-5, "", "", "Peak learning rate") \
  X(double, weight_decay, 0.0, "", "", "AdamW weight decay (not applied to biases and normalization weights)") \
  X(double, adam_beta1, 0.9, "", "", "AdamW beta1") \
  X(double, adam_beta2, 0.999, "", "", "AdamW beta2") \
  X(double, adam_epsilon, 1e-8, "", "", "AdamW epsilon") \
  X(double, max_grad_norm, 1.0, "", "", "Clip the global gradient norm to this value (0 disables clipping)") \
  X(std::string, optim, "adamw_torch", "adamw_torch|adamw_torch_fused|sgd", "", "Optimizer (adamw_torch: multi-tensor AdamW; adamw_torch_fused: the fused AdamW kernel on a GPU)") \
  X(std::string, lr_scheduler_type, "linear", "linear|cosine|cosine_with_restarts|polynomial|constant|constant_with_warmup|inverse_sqrt|cosine_with_min_lr|warmup_stable_decay", "", "Learning-rate schedule") \
  X(StringMap, lr_scheduler_kwargs, {}, "", "", "Extra schedule arguments, e.g. {num_cycles: 2} or {min_lr_rate: 0.1}") \
  X(double, warmup_steps, 0.0, "", "", "Linear warmup steps; a value in (0, 1) is a ratio of the total steps") \
  X(double, warmup_ratio, 0.0, "", "", "Deprecated: warmup as a ratio of total steps; use warmup_steps < 1") \
  X(int64_t, seed, 42, "", "", "Seed for model initialization, dropout and (without data_seed) data order") \
  X(std::optional<int64_t>, data_seed, std::nullopt, "", "", "Seed for data shuffling; defaults to seed") \
  X(bool, bf16, false, "", "", "Train with bfloat16 autocast") \
  X(bool, fp16, false, "", "", "Train with float16 autocast and dynamic loss scaling, as GradScaler (GPU only; docs/running.md, fp16)") \
  X(std::optional<bool>, tf32, std::nullopt, "", "", "Allow TF32 matmuls on Ampere or newer GPUs") \
  X(std::string, logging_strategy, "steps", "no|steps|epoch", "", "When to log training metrics; epoch also logs at a last step inside an epoch") \
  X(double, logging_steps, 500.0, "", "", "Log every N steps; a value in (0, 1) is a ratio of the total steps") \
  X(bool, logging_first_step, false, "", "", "Also log the first step") \
  X(std::string, eval_strategy, "no", "no|steps|epoch", "", "When to evaluate on the held-out split; epoch also evaluates at a last step inside an epoch") \
  X(std::optional<double>, eval_steps, std::nullopt, "", "", "Evaluate every N steps (ratio if < 1); defaults to logging_steps") \
  X(std::string, save_strategy, "steps", "no|steps|epoch|best", "", "When to save a checkpoint; steps and epoch also save at the last step") \
  X(double, save_steps, 500.0, "", "", "Save every N steps; a value in (0, 1) is a ratio of the total steps") \
  X(std::optional<int64_t>, save_total_limit, std::nullopt, "", "", "Keep at most this many checkpoints (the best one is always kept)") \
  X(bool, save_only_model, false, "", "", "Save only the weights (such a checkpoint cannot be resumed from)") \
  X(bool, load_best_model_at_end, false, "", "", "Load the best checkpoint (by metric_for_best_model) when training ends") \
  X(std::optional<std::string>, metric_for_best_model, std::nullopt, "", "", "Metric that picks the best checkpoint, e.g. loss or accuracy") \
  X(std::optional<bool>, greater_is_better, std::nullopt, "", "", "Whether a larger metric_for_best_model is better; defaults from the metric's name") \
  X(std::optional<std::string>, resume_from_checkpoint, std::nullopt, "", "", "Checkpoint directory to resume from, or true (yes, on) for the newest in output_dir") \
  X(bool, dataloader_drop_last, false, "", "", "Drop the last incomplete batch of each epoch") \
  X(int64_t, dataloader_num_workers, 0, "", "", "Background threads preparing batches (0: on the training thread)") \
  X(std::optional<bool>, disable_tqdm, std::nullopt, "", "", "Disable the progress bar; by default it shows only on a terminal") \
  X(StringList, report_to, {"none"}, "none|all", "", "Integrations to report to; metrics.jsonl in output_dir is always written") \
  X(bool, gradient_checkpointing, false, "", "", "Recompute activations in the backward pass to save memory") \
  X(double, label_smoothing_factor, 0.0, "", "", "Label smoothing for the cross-entropy loss") \
  X(bool, torch_compile, false, "", "", "Compile the training step") \
  X(std::optional<std::string>, torch_compile_backend, std::nullopt, "eager|aot_eager|inductor|cudagraphs|ipex|hpu_backend|neuron", "", "Compile backend; implies torch_compile; chosen from the hardware when unset") \
  X(std::optional<std::string>, torch_compile_mode, std::nullopt, "default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs", "", "Compile mode; implies torch_compile") \
  X(bool, torch_compile_fullgraph, false, "", "", "trainc's: stop (exit 2) at a graph break instead of running that step eagerly, like torch.compile(fullgraph=True)") \
  X(bool, use_cpu, false, "", "", "Train on the CPU even when a GPU is present") \
  X(std::optional<std::string>, ddp_backend, std::nullopt, "nccl|gloo", "", "Distributed backend; defaults from the device") \
  X(int64_t, ddp_timeout, 1800, "", "", "Seconds a distributed collective may wait before the run fails") \
  X(std::string, log_level, "passive", "passive|debug|info|warning|error|critical", "", "Log level (passive: info)")

#define TRAINC_MODEL_CONFIG(X) \
  X(std::string, name, "mlp", "mlp|cnn|gpt|torchscript", "", "Model: a zoo model or a TorchScript file") \
  X(std::optional<std::string>, path, std::nullopt, "", "torchscript", "TorchScript .pt file (forward(input) -> logits)") \
  X(int64_t, input_size, 784, "", "mlp", "Input features") \
  X(IntList, hidden_sizes, (IntList{256, 128}), "", "mlp", "Hidden layer widths") \
  X(std::string, activation, "relu", "relu|gelu|tanh|silu", "mlp", "Hidden-layer activation") \
  X(int64_t, num_classes, 10, "", "mlp|cnn|torchscript", "Output classes") \
  X(int64_t, in_channels, 1, "", "cnn", "Input image channels (28x28 images)") \
  X(IntList, channels, (IntList{32, 64}), "", "cnn", "Channels of each conv + batch-norm + pool block") \
  X(double, dropout, 0.0, "", "mlp|cnn|gpt", "Dropout probability") \
  X(int64_t, vocab_size, 50257, "", "gpt", "Vocabulary size") \
  X(int64_t, n_layer, 12, "", "gpt", "Transformer blocks") \
  X(int64_t, n_head, 12, "", "gpt", "Attention heads") \
  X(int64_t, n_embd, 768, "", "gpt", "Embedding width") \
  X(int64_t, block_size, 1024, "", "gpt", "Context length") \
  X(bool, bias, true, "", "gpt", "Biases in linear and LayerNorm layers") \
  X(bool, tie_embeddings, true, "", "gpt", "Share the token embedding with the output head")

#define TRAINC_DATA_CONFIG(X) \
  X(std::string, kind, "synthetic", "idx|tokens|text|csv|synthetic", "", "Dataset kind") \
  X(std::optional<std::string>, train_path, std::nullopt, "", "idx|tokens|text|csv", "Training file (idx: the images file)") \
  X(std::optional<std::string>, train_labels_path, std::nullopt, "", "idx", "Training labels file") \
  X(std::optional<std::string>, eval_path, std::nullopt, "", "idx|tokens|text|csv", "Held-out file (idx: the images file); split from training data when unset") \
  X(std::optional<std::string>, eval_labels_path, std::nullopt, "", "idx", "Held-out labels file") \
  X(double, validation_split, 0.1, "", "", "Fraction held out for evaluation when there is no eval_path") \
  X(std::optional<int64_t>, block_size, std::nullopt, "", "tokens|text|synthetic", "Sequence length; defaults to model.block_size") \
  X(std::string, label_column, "label", "", "csv", "Name of the CSV label column (the other columns are features)") \
  X(int64_t, num_samples, 1024, "", "synthetic", "Samples in the synthetic dataset")
// clang-format on

#define TRAINC_DECLARE_FIELD(type, name, default_value, choices, applies_to, help) type name = default_value;

struct TrainingArguments {
  TRAINC_TRAINING_ARGUMENTS(TRAINC_DECLARE_FIELD)
  bool operator==(const TrainingArguments& other) const;
};

struct ModelConfig {
  TRAINC_MODEL_CONFIG(TRAINC_DECLARE_FIELD)
  bool operator==(const ModelConfig& other) const;
};

struct DataConfig {
  TRAINC_DATA_CONFIG(TRAINC_DECLARE_FIELD)
  bool operator==(const DataConfig& other) const;
};

struct RunConfig {
  TrainingArguments args;
  ModelConfig model;
  DataConfig data;
  // Keys given by the YAML file or the command line ("learning_rate", "model.n_layer"); used by
  // validation (a key the chosen model does not read) and never compared.
  std::set<std::string> explicitly_set;

  bool operator==(const RunConfig& other) const {
    return args == other.args && model == other.model && data == other.data;
  }
};

}  // namespace trainc
