#include "trainc/config/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "trainc/common/error.h"
#include "trainc/config/fields.h"
#include "trainc/config/value_codec.h"
#include "trainc/train/lr_schedule.h"

namespace trainc {
namespace {

void require(bool ok, const std::string& key, const std::string& value, const std::string& expected) {
  if (!ok) throw UserError(key + ": got " + value + ", expected " + expected);
}

// Sizes and counts: tensor shapes and per-step sample counts multiply them, so a value beyond
// 32 bits would overflow those products rather than describe a real run.
constexpr int64_t kMaxCount = 2147483647;

void require_positive(int64_t value, const std::string& key) {
  require(value >= 1, key, std::to_string(value), "an integer >= 1");
  require(value <= kMaxCount, key, std::to_string(value), "an integer <= 2147483647");
}

// Step counts given as numbers (warmup_steps, the intervals): far beyond any run's length, a value
// would no longer convert to an integer step.
constexpr double kMaxSteps = 1e15;

// Each worker is a thread holding up to two batches ahead; far more threads than any machine has
// cores only costs memory, and at some point the system refuses to start them.
constexpr int64_t kMaxWorkers = 1024;

void require_step_count(double value, const std::string& key) {
  require(value <= kMaxSteps, key, format_double(value), "a step count <= 1e15");
}

// logging_steps, eval_steps and save_steps: a count >= 1 (whole), or a ratio in (0, 1).
void check_step_interval(double value, const std::string& key) {
  require(value > 0, key, format_double(value), "a step count >= 1 or a ratio in (0, 1)");
  require_step_count(value, key);
  require(value < 1 || std::floor(value) == value, key, format_double(value),
          "a whole number when bigger than 1 (values below 1 are ratios of the total steps)");
}

void check_training_arguments(TrainingArguments& a, std::vector<std::string>& warnings) {
  if (a.output_dir.empty()) throw UserError("output_dir: got an empty path, expected a directory");
  require_positive(a.per_device_train_batch_size, "per_device_train_batch_size");
  require_positive(a.per_device_eval_batch_size, "per_device_eval_batch_size");
  require_positive(a.gradient_accumulation_steps, "gradient_accumulation_steps");
  require(a.max_steps == -1 || a.max_steps >= 1, "max_steps", std::to_string(a.max_steps), "-1 (use num_train_epochs) or >= 1");
  require(a.max_steps <= static_cast<int64_t>(kMaxSteps), "max_steps", std::to_string(a.max_steps), "a step count <= 1e15");
  require(a.max_steps >= 1 || a.num_train_epochs > 0, "num_train_epochs", format_double(a.num_train_epochs),
          "a number > 0 (or set max_steps)");
  require(a.learning_rate >= 0, "learning_rate", format_double(a.learning_rate), "a number >= 0");
  require(a.weight_decay >= 0, "weight_decay", format_double(a.weight_decay), "a number >= 0");
  require(a.adam_beta1 >= 0 && a.adam_beta1 < 1, "adam_beta1", format_double(a.adam_beta1), "a number in [0, 1)");
  require(a.adam_beta2 >= 0 && a.adam_beta2 < 1, "adam_beta2", format_double(a.adam_beta2), "a number in [0, 1)");
  require(a.adam_epsilon > 0, "adam_epsilon", format_double(a.adam_epsilon), "a number > 0");
  require(a.max_grad_norm >= 0, "max_grad_norm", format_double(a.max_grad_norm), "a number >= 0 (0 disables clipping)");
  require(a.label_smoothing_factor >= 0 && a.label_smoothing_factor < 1, "label_smoothing_factor",
          format_double(a.label_smoothing_factor), "a number in [0, 1)");
  require(a.dataloader_num_workers >= 0 && a.dataloader_num_workers <= kMaxWorkers, "dataloader_num_workers",
          std::to_string(a.dataloader_num_workers), "an integer in [0, " + std::to_string(kMaxWorkers) + "]");
  require(a.ddp_timeout >= 1, "ddp_timeout", std::to_string(a.ddp_timeout), "seconds >= 1");
  if (a.save_total_limit) require_positive(*a.save_total_limit, "save_total_limit");

  // Warmup: warmup_steps is a count (>= 1, whole) or a ratio in [0, 1); warmup_ratio is deprecated.
  require(a.warmup_steps >= 0, "warmup_steps", format_double(a.warmup_steps), "a step count or a ratio in [0, 1)");
  require_step_count(a.warmup_steps, "warmup_steps");
  require(a.warmup_steps < 1 || std::floor(a.warmup_steps) == a.warmup_steps, "warmup_steps",
          format_double(a.warmup_steps), "a whole number when >= 1 (values below 1 are ratios of the total steps)");
  require(a.warmup_ratio >= 0 && a.warmup_ratio <= 1, "warmup_ratio", format_double(a.warmup_ratio), "a ratio in [0, 1]");
  if (a.warmup_ratio > 0) {
    // The same ratio; 1, which warmup_steps would read as one step, as the largest ratio below it.
    warnings.push_back("warmup_ratio is deprecated; write warmup_steps: " + format_double(a.warmup_ratio < 1 ? a.warmup_ratio : std::nextafter(1.0, 0.0)) +
                       " (a value below 1 is a ratio)");
    if (a.warmup_steps > 0) warnings.push_back("both warmup_ratio and warmup_steps are set; warmup_steps wins");
  }
  check_lr_scheduler_kwargs(a.lr_scheduler_type, a.lr_scheduler_kwargs);
  if (a.lr_scheduler_kwargs.count("min_lr")) {
    const double min_lr = ValueCodec<double>::parse(YAML::Node(a.lr_scheduler_kwargs.at("min_lr")), "lr_scheduler_kwargs.min_lr");
    require(min_lr <= a.learning_rate, "lr_scheduler_kwargs.min_lr", format_double(min_lr),
            "at most learning_rate (" + format_double(a.learning_rate) + ")");
  }

  if (a.bf16 && a.fp16) throw UserError("bf16 and fp16: both are true; at most one mixed precision mode can be on");

  // A backend, a mode or fullgraph means the user wants compilation.
  if ((a.torch_compile_backend || a.torch_compile_mode || a.torch_compile_fullgraph) && !a.torch_compile) a.torch_compile = true;

  if (a.logging_strategy == "steps") check_step_interval(a.logging_steps, "logging_steps");
  if (a.eval_strategy == "steps") {
    if (!a.eval_steps) {
      if (a.logging_steps <= 0) {
        throw UserError("eval_steps: unset and logging_steps is " + format_double(a.logging_steps) +
                        "; eval_strategy steps needs eval_steps (or a non-zero logging_steps to fall back on)");
      }
      a.eval_steps = a.logging_steps;
      warnings.push_back("eval_steps unset: evaluating every logging_steps (" + format_double(a.logging_steps) + ") steps");
    }
    check_step_interval(*a.eval_steps, "eval_steps");
  } else if (a.eval_steps) {
    check_step_interval(*a.eval_steps, "eval_steps");
  }
  if (a.save_strategy == "steps") check_step_interval(a.save_steps, "save_steps");

  if (a.save_strategy == "best" && !a.metric_for_best_model) {
    throw UserError("metric_for_best_model: unset, but save_strategy best needs it (e.g. loss or accuracy)");
  }
  if (a.save_strategy == "best" && a.eval_strategy == "no") {
    throw UserError("save_strategy: got best, which saves after an evaluation that improves metric_for_best_model, but "
                    "eval_strategy is no; set eval_strategy to steps or epoch");
  }
  if (a.load_best_model_at_end) {
    if (a.save_strategy != "best" && a.eval_strategy != a.save_strategy) {
      throw UserError("load_best_model_at_end: needs eval_strategy and save_strategy to match; got eval_strategy " +
                      a.eval_strategy + " and save_strategy " + a.save_strategy);
    }
    if (a.eval_strategy == "no") {
      throw UserError("load_best_model_at_end: needs evaluation; set eval_strategy to steps or epoch");
    }
    if (a.save_strategy == "steps" && a.eval_strategy == "steps") {
      const double ratio = a.save_steps / *a.eval_steps;
      if (std::fabs(ratio - std::round(ratio)) > 1e-9 || std::round(ratio) < 1) {
        throw UserError("save_steps: got " + format_double(a.save_steps) + ", expected a round multiple of eval_steps (" +
                        format_double(*a.eval_steps) + ") because load_best_model_at_end is true");
      }
    }
    if (!a.metric_for_best_model) a.metric_for_best_model = "loss";
  }
  if (a.metric_for_best_model) {
    const std::string& metric = *a.metric_for_best_model;
    if (!a.greater_is_better) a.greater_is_better = metric.size() < 4 || metric.substr(metric.size() - 4) != "loss";
  }
  if (a.resume_from_checkpoint) {
    bool flag = false;
    // YAML's words for a boolean, in any case (True, yes, on; false, no, off); "./yes" names a directory.
    std::string word = *a.resume_from_checkpoint;
    std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
    if (word == "true" || word == "yes" || word == "on") {
      a.resume_from_checkpoint = "true";
    } else if (parse_bool_text(word, &flag) && !flag) {
      a.resume_from_checkpoint.reset();
    }
  }
  if (std::count(a.report_to.begin(), a.report_to.end(), "none") && a.report_to.size() > 1) {
    throw UserError("report_to: 'none' cannot be combined with other integrations");
  }
}

// A directory where a file is meant would otherwise fail later as a malformed file.
void require_not_directory(const std::optional<std::string>& path, const std::string& key) {
  std::error_code error;
  if (path && std::filesystem::is_directory(*path, error)) throw UserError(key + ": " + *path + " is a directory; expected a file");
}

void check_model(const ModelConfig& m) {
  if (m.name == "torchscript" && !m.path) {
    throw UserError("model.path: required for model.name torchscript (a .pt file saved by torch.jit.save)");
  }
  require_not_directory(m.path, "model.path");
  require(m.dropout >= 0 && m.dropout < 1, "model.dropout", format_double(m.dropout), "a probability in [0, 1)");
  if (m.name == "mlp") {
    require_positive(m.input_size, "model.input_size");
    for (std::size_t i = 0; i < m.hidden_sizes.size(); ++i) require_positive(m.hidden_sizes[i], "model.hidden_sizes[" + std::to_string(i) + "]");
  }
  if (m.name == "mlp" || m.name == "cnn") require(m.num_classes >= 2, "model.num_classes", std::to_string(m.num_classes), "an integer >= 2");
  if (m.name != "gpt") require_positive(m.num_classes, "model.num_classes");
  if (m.name == "cnn") {
    require_positive(m.in_channels, "model.in_channels");
    require(!m.channels.empty() && m.channels.size() <= 2, "model.channels", std::to_string(m.channels.size()) + " blocks",
            "1 or 2 blocks (each halves the 28x28 image)");
    for (std::size_t i = 0; i < m.channels.size(); ++i) require_positive(m.channels[i], "model.channels[" + std::to_string(i) + "]");
  }
  if (m.name == "gpt") {
    require_positive(m.vocab_size, "model.vocab_size");
    require_positive(m.n_layer, "model.n_layer");
    require_positive(m.n_head, "model.n_head");
    require_positive(m.block_size, "model.block_size");
    require(m.n_embd >= 1 && m.n_embd % m.n_head == 0, "model.n_embd", std::to_string(m.n_embd),
            "a positive multiple of model.n_head (" + std::to_string(m.n_head) + ")");
    require_positive(m.n_embd, "model.n_embd");
  }
}

void check_data(const DataConfig& d) {
  const bool file_based = d.kind != "synthetic";
  if (file_based && !d.train_path) throw UserError("data.train_path: required for data.kind " + d.kind);
  require_not_directory(d.train_path, "data.train_path");
  require_not_directory(d.train_labels_path, "data.train_labels_path");
  require_not_directory(d.eval_path, "data.eval_path");
  require_not_directory(d.eval_labels_path, "data.eval_labels_path");
  if (d.kind == "idx") {
    if (!d.train_labels_path) throw UserError("data.train_labels_path: required for data.kind idx");
    if (d.eval_path.has_value() != d.eval_labels_path.has_value()) {
      throw UserError("data.eval_labels_path: data.eval_path and data.eval_labels_path go together for data.kind idx");
    }
  }
  require(d.validation_split >= 0 && d.validation_split < 1, "data.validation_split", format_double(d.validation_split),
          "a fraction in [0, 1)");
  if (d.block_size) require_positive(*d.block_size, "data.block_size");
  require_positive(d.num_samples, "data.num_samples");
}

// A key set where the config does not read it is most likely a mistake; one set to null is unset
// (config.md), which no config can misread.
void check_applicable_keys(const RunConfig& config) {
  for (const std::string& key : config.explicitly_set) {
    const FieldInfo* field = find_field(key);
    if (field == nullptr || field->emit(config).IsNull()) continue;
    const std::string reason = why_not_read(*field, config);
    if (!reason.empty()) throw UserError(key + ": " + reason);
  }
}

}  // namespace

std::vector<std::string> resolve_and_validate(RunConfig& config) {
  std::vector<std::string> warnings;
  check_training_arguments(config.args, warnings);
  check_model(config.model);
  check_data(config.data);
  check_applicable_keys(config);
  return warnings;
}

}  // namespace trainc
