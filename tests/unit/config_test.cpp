// Config: defaults match Hugging Face, precedence, every error class, and the round trip.
#include <catch2/catch.hpp>

#include "support/command.h"
#include "trainc/common/error.h"
#include "trainc/config/emit.h"
#include "trainc/config/fields.h"
#include "trainc/config/load.h"
#include "trainc/config/resolve.h"
#include "trainc/config/validate.h"

using namespace trainc;
using Catch::Matchers::Contains;

namespace {

RunConfig from_yaml(const std::string& text, const std::vector<CommandLineOverride>& overrides = {}) {
  test::ScratchDir dir;
  std::vector<std::string> warnings;
  return build_run_config(dir.write("run.yaml", text), overrides, &warnings);
}

std::string error_of(const std::string& text, const std::vector<CommandLineOverride>& overrides = {}) {
  try {
    from_yaml(text, overrides);
  } catch (const UserError& error) {
    CHECK(error.exit_code() == kExitUsage);
    return error.what();
  }
  FAIL("expected a UserError for:\n" << text);
  return "";
}

}  // namespace

TEST_CASE("defaults are Hugging Face's TrainingArguments defaults", "[config]") {
  const TrainingArguments a;
  CHECK(a.output_dir == "trainer_output");
  CHECK(a.per_device_train_batch_size == 8);
  CHECK(a.per_device_eval_batch_size == 8);
  CHECK(a.gradient_accumulation_steps == 1);
  CHECK(a.num_train_epochs == 3.0);
  CHECK(a.max_steps == -1);
  CHECK(a.learning_rate == 5e-5);
  CHECK(a.weight_decay == 0.0);
  CHECK(a.adam_beta1 == 0.9);
  CHECK(a.adam_beta2 == 0.999);
  CHECK(a.adam_epsilon == 1e-8);
  CHECK(a.max_grad_norm == 1.0);
  CHECK(a.optim == "adamw_torch");
  CHECK(a.lr_scheduler_type == "linear");
  CHECK(a.warmup_steps == 0.0);
  CHECK(a.seed == 42);
  CHECK_FALSE(a.data_seed.has_value());
  CHECK_FALSE(a.tf32.has_value());
  CHECK(a.logging_strategy == "steps");
  CHECK(a.logging_steps == 500.0);
  CHECK(a.eval_strategy == "no");
  CHECK(a.save_strategy == "steps");
  CHECK(a.save_steps == 500.0);
  CHECK(a.report_to == StringList{"none"});
  CHECK_FALSE(a.torch_compile);
  CHECK(a.ddp_timeout == 1800);
  CHECK(a.log_level == "passive");
}

TEST_CASE("every field has a unique key, a help line and a parseable default", "[config]") {
  std::set<std::string> keys;
  for (const FieldInfo& field : config_fields()) {
    INFO(field.key());
    CHECK(keys.insert(field.key()).second);
    CHECK_FALSE(field.help.empty());
    RunConfig config;
    CHECK_NOTHROW(field.parse(config, field.default_value, field.key()));
    CHECK(config == RunConfig{});
  }
}

TEST_CASE("YAML sets TrainingArguments and model/data sections", "[config]") {
  const RunConfig config = from_yaml(R"(
learning_rate: 3e-4
bf16: true
report_to: none
lr_scheduler_type: cosine
lr_scheduler_kwargs: {num_cycles: 2}
model:
  name: gpt
  n_layer: 2
  n_head: 2
  n_embd: 64
data:
  kind: synthetic
  num_samples: 64
)");
  CHECK(config.args.learning_rate == 3e-4);
  CHECK(config.args.bf16);
  CHECK(config.args.lr_scheduler_kwargs.at("num_cycles") == "2");
  CHECK(config.model.name == "gpt");
  CHECK(config.model.n_layer == 2);
  CHECK(config.data.num_samples == 64);
}

TEST_CASE("precedence: defaults < YAML < command line", "[config]") {
  const std::string yaml = "learning_rate: 1e-3\nseed: 7\n";
  RunConfig config = from_yaml(yaml);
  CHECK(config.args.learning_rate == 1e-3);
  CHECK(config.args.weight_decay == 0.0);  // default kept
  config = from_yaml(yaml, {{"--learning-rate", "2e-3"}, {"--model.hidden-sizes", "64,32"}});
  CHECK(config.args.learning_rate == 2e-3);
  CHECK(config.args.seed == 7);
  CHECK(config.model.hidden_sizes == IntList{64, 32});
  config = from_yaml(yaml, {{"--learning_rate", "4e-3"}, {"--model.hidden_sizes", "[16]"}});
  CHECK(config.args.learning_rate == 4e-3);
  CHECK(config.model.hidden_sizes == IntList{16});
}

TEST_CASE("a boolean flag alone means true and an explicit value is honoured", "[config]") {
  CHECK(from_yaml("", {{"--bf16", std::nullopt}}).args.bf16);
  CHECK(from_yaml("bf16: true", {{"--bf16", "false"}}).args.bf16 == false);
  CHECK(from_yaml("", {{"--tf32", "no"}}).args.tf32 == std::optional<bool>(false));
  CHECK_THAT(error_of("", {{"--learning-rate", std::nullopt}}), Contains("--learning-rate: expected a value"));
}

TEST_CASE("Hugging Face's resolution rules", "[config]") {
  SECTION("a compile backend or mode implies torch_compile") {
    CHECK(from_yaml("torch_compile_mode: max-autotune").args.torch_compile);
    CHECK(from_yaml("", {{"--torch-compile-backend", "aot_eager"}}).args.torch_compile);
    CHECK_FALSE(from_yaml("").args.torch_compile);
  }
  SECTION("eval_steps falls back to logging_steps") {
    CHECK(from_yaml("eval_strategy: steps\nlogging_steps: 25").args.eval_steps == std::optional<double>(25.0));
  }
  SECTION("metric_for_best_model defaults to loss, and greater_is_better from its name") {
    const RunConfig config = from_yaml("eval_strategy: steps\nsave_strategy: steps\nload_best_model_at_end: true\n"
                                       "logging_steps: 10\nsave_steps: 20\n");
    CHECK(config.args.metric_for_best_model == std::optional<std::string>("loss"));
    CHECK(config.args.greater_is_better == std::optional<bool>(false));
    CHECK(from_yaml("metric_for_best_model: accuracy").args.greater_is_better == std::optional<bool>(true));
  }
  SECTION("resume_from_checkpoint: false means no resume") {
    CHECK_FALSE(from_yaml("resume_from_checkpoint: false").args.resume_from_checkpoint.has_value());
    CHECK(from_yaml("resume_from_checkpoint: true").args.resume_from_checkpoint == std::optional<std::string>("true"));
    // Every spelling the boolean keys take, not a directory named "True".
    for (const char* yes : {"True", "yes", "ON"}) {
      CHECK(from_yaml(std::string("resume_from_checkpoint: ") + yes).args.resume_from_checkpoint == std::optional<std::string>("true"));
    }
    CHECK(from_yaml("resume_from_checkpoint: ./yes").args.resume_from_checkpoint == std::optional<std::string>("./yes"));
  }
  SECTION("ratios below 1 are kept for the trainer") {
    CHECK(from_yaml("warmup_steps: 0.1\nsave_steps: 0.25").args.save_steps == 0.25);
  }
}

TEST_CASE("validation errors name the key, the value and what was expected", "[config]") {
  CHECK_THAT(error_of("bf16: true\nfp16: true"), Contains("at most one"));
  CHECK_THAT(error_of("logging_steps: 12.5"), Contains("logging_steps: got 12.5, expected a whole number"));
  CHECK_THAT(error_of("per_device_train_batch_size: 0"), Contains("per_device_train_batch_size: got 0, expected an integer >= 1"));
  CHECK_THAT(error_of("eval_strategy: steps\nsave_strategy: epoch\nload_best_model_at_end: true"),
             Contains("load_best_model_at_end: needs eval_strategy and save_strategy to match"));
  CHECK_THAT(error_of("eval_strategy: steps\neval_steps: 30\nsave_steps: 50\nload_best_model_at_end: true"),
             Contains("save_steps: got 50.0, expected a round multiple of eval_steps"));
  CHECK_THAT(error_of("save_strategy: best"), Contains("metric_for_best_model"));
  CHECK_THAT(error_of("warmup_steps: 2.5"), Contains("warmup_steps: got 2.5"));
  CHECK_THAT(error_of("lr_scheduler_type: cosine\nlr_scheduler_kwargs: {power: 2}"),
             Contains("lr_scheduler_kwargs.power: not read by lr_scheduler_type cosine"));
  CHECK_THAT(error_of("model:\n  name: gpt\n  n_embd: 100\n  n_head: 12"), Contains("model.n_embd: got 100"));
  CHECK_THAT(error_of("model:\n  name: mlp\n  n_layer: 4"), Contains("model.n_layer: not read by model.name mlp"));
  CHECK_THAT(error_of("data:\n  kind: csv"), Contains("data.train_path: required for data.kind csv"));
  CHECK_THAT(error_of("model:\n  name: torchscript"), Contains("model.path: required"));
}

TEST_CASE("sizes and step counts too large for a run are refused", "[config]") {
  // Beyond these, products of sizes or the double-to-step conversions would overflow.
  CHECK_THAT(error_of("gradient_accumulation_steps: 9223372036854775807"),
             Contains("gradient_accumulation_steps: got 9223372036854775807, expected an integer <= 2147483647"));
  CHECK_THAT(error_of("per_device_eval_batch_size: 2147483648"), Contains("expected an integer <= 2147483647"));
  CHECK_THAT(error_of("model:\n  hidden_sizes: [4294967297]"), Contains("model.hidden_sizes[0]: got 4294967297"));
  CHECK_THAT(error_of("model:\n  name: gpt\n  n_head: 1\n  n_embd: 4294967296"), Contains("model.n_embd: got 4294967296"));
  CHECK_THAT(error_of("warmup_steps: 1e300"), Contains("warmup_steps: got 1e+300, expected a step count <= 1e15"));
  CHECK_THAT(error_of("save_steps: 1e20"), Contains("save_steps: got 1e+20"));
  CHECK_THAT(error_of("dataloader_num_workers: 100000"), Contains("dataloader_num_workers: got 100000, expected an integer in [0, 1024]"));
  CHECK(from_yaml("per_device_train_batch_size: 2147483647\ndataloader_num_workers: 1024").args.dataloader_num_workers == 1024);
}

TEST_CASE("keys that another key's value leaves unread are refused", "[config]") {
  CHECK_THAT(error_of("data:\n  kind: synthetic\n  block_size: 4"), Contains("data.block_size: not read by data.kind synthetic for model.name mlp"));
  // Set to null, such a key is unset: nothing for the config to misread.
  CHECK_FALSE(from_yaml("data:\n  kind: synthetic\n  block_size: null\n  train_labels_path: ~").data.block_size.has_value());
  CHECK_FALSE(from_yaml("data: {kind: synthetic}", {{"--data.train-labels-path", std::string("null")}}).data.train_labels_path.has_value());
  CHECK_THAT(error_of("data:\n  kind: synthetic\n  train_labels_path: labels.gz"), Contains("data.train_labels_path: not read by data.kind synthetic"));
  CHECK(from_yaml("model: {name: gpt, n_layer: 1, n_head: 1, n_embd: 8, block_size: 8}\ndata: {kind: synthetic, block_size: 4}")
            .data.block_size == std::optional<int64_t>(4));
  test::ScratchDir dir;
  const std::string train = dir.write("train.csv", "a,label\n1,0\n");
  const std::string held_out = dir.write("eval.csv", "a,label\n1,0\n");
  CHECK_THAT(error_of("data: {kind: csv, train_path: " + train + ", eval_path: " + held_out + ", validation_split: 0.2}"),
             Contains("data.validation_split: not read when data.eval_path is set"));
  CHECK_THAT(error_of("data: {kind: csv, train_path: " + dir.path() + "}"), Contains("data.train_path: " + dir.path() + " is a directory"));
  CHECK_THAT(error_of("model: {name: torchscript, path: " + dir.path() + "}"), Contains("model.path: " + dir.path() + " is a directory"));
  CHECK_THAT(error_of("output_dir: ''"), Contains("output_dir: got an empty path"));
  CHECK_THAT(error_of("", {{"--lr-scheduler-kwargs", "5"}}), Contains("--lr-scheduler-kwargs: got \"5\", expected a mapping"));
  CHECK(from_yaml("torch_compile_fullgraph: true").args.torch_compile);  // like a backend or a mode, it asks for compiling
}

TEST_CASE("save_strategy best needs evaluations", "[config]") {
  CHECK_THAT(error_of("save_strategy: best\nmetric_for_best_model: loss"), Contains("save_strategy: got best") && Contains("eval_strategy is no"));
  CHECK(from_yaml("save_strategy: best\nmetric_for_best_model: loss\neval_strategy: epoch").args.save_strategy == "best");
}

TEST_CASE("min_lr above the peak learning rate is refused before the run", "[config]") {
  CHECK_THAT(error_of("learning_rate: 1e-3\nlr_scheduler_type: cosine_with_min_lr\nlr_scheduler_kwargs: {min_lr: 0.1}"),
             Contains("lr_scheduler_kwargs.min_lr: got 0.1, expected at most learning_rate (0.001)"));
  CHECK(from_yaml("learning_rate: 1e-3\nlr_scheduler_type: cosine_with_min_lr\nlr_scheduler_kwargs: {min_lr: 1e-3}").args.learning_rate == 1e-3);
}

TEST_CASE("a config file holds one mapping with each key once", "[config]") {
  CHECK_THAT(error_of("learning_rate: 0.1\nseed: 1\nlearning_rate: 0.2"), Contains(":3:1: learning_rate: set twice (first at ") && Contains(":1:1)"));
  CHECK_THAT(error_of("model:\n  name: mlp\nmodel:\n  input_size: 3"), Contains(":3:1: model: set twice"));
  CHECK_THAT(error_of("model:\n  input_size: 3\n  input_size: 4"), Contains(":3:3: model.input_size: set twice"));
  // A dotted key at the top level is the same key as under its section, in either order.
  CHECK_THAT(error_of("model:\n  hidden_sizes: [16]\nmodel.hidden_sizes: [4]"), Contains(":3:1: model.hidden_sizes: set twice (first at ") && Contains(":2:3)"));
  CHECK_THAT(error_of("model.hidden_sizes: [4]\nmodel:\n  hidden_sizes: [16]"), Contains(":3:3: model.hidden_sizes: set twice (first at ") && Contains(":1:1)"));
  CHECK_THAT(error_of("lr_scheduler_kwargs: {num_cycles: 1, num_cycles: 2}"), Contains("lr_scheduler_kwargs.num_cycles: set twice"));
  CHECK_THAT(error_of("seed: 1\n---\nbogus: 2\n"), Contains("holds 2 YAML documents"));
  CHECK(from_yaml("---\nseed: 7\n").args.seed == 7);  // one document, with its start marker
  CHECK_THAT(error_of("~: 2"), Contains(":1:1: expected a key name, got null"));
  CHECK_THAT(error_of("lr_scheduler_kwargs: {[a]: 1}"), Contains("lr_scheduler_kwargs: got a list, expected key names"));
  test::ScratchDir dir;
  try {
    build_run_config(dir.path(), {}, nullptr);
    FAIL("no error for a directory");
  } catch (const UserError& error) {
    CHECK_THAT(error.what(), Contains(": is a directory; expected a YAML config file"));
  }
}

TEST_CASE("numbers a double or an int64 cannot hold are refused, not rounded", "[config]") {
  CHECK_THAT(error_of("seed: 99999999999999999999999"), Contains("seed: got \"99999999999999999999999\", expected an integer in [-9223372036854775808"));
  CHECK_THAT(error_of("learning_rate: 1e-400"), Contains("learning_rate: got \"1e-400\", expected 0, or a number that does not round to 0"));
  CHECK(from_yaml("learning_rate: 0.0").args.learning_rate == 0.0);
  CHECK(from_yaml("learning_rate: 1e-300").args.learning_rate == 1e-300);
  CHECK(from_yaml("learning_rate: 1e-310").args.learning_rate == 1e-310);  // subnormal, not 0
}

TEST_CASE("type errors name the file position, the key, the value and the expected type", "[config]") {
  CHECK_THAT(error_of("learning_rate: fast"), Contains(":1:16: learning_rate: got \"fast\", expected a finite number"));
  CHECK_THAT(error_of("max_steps: 1.5"), Contains("max_steps: got \"1.5\", expected an integer"));
  CHECK_THAT(error_of("bf16: maybe"), Contains("bf16: got \"maybe\", expected true or false"));
  CHECK_THAT(error_of("model:\n  hidden_sizes: [64, x]"), Contains("model.hidden_sizes[1]: got \"x\", expected an integer"));
  CHECK_THAT(error_of("output_dir: [a, b]"), Contains("output_dir: got a list, expected a string"));
  CHECK_THAT(error_of("", {{"--max-steps", "ten"}}), Contains("--max-steps: got \"ten\", expected an integer"));
}

TEST_CASE("enumerations list their valid values", "[config]") {
  CHECK_THAT(error_of("optim: adam"), Contains("optim: got \"adam\", expected one of: adamw_torch, adamw_torch_fused, sgd"));
  CHECK_THAT(error_of("", {{"--torch-compile-mode", "fastest"}}),
             Contains("--torch-compile-mode: got \"fastest\", expected one of: default, reduce-overhead"));
  CHECK_THAT(error_of("report_to: [wandb]"), Contains("report_to: got \"wandb\", expected one of: none, all"));
}

TEST_CASE("unknown keys are named with their position and the closest valid key", "[config]") {
  CHECK_THAT(error_of("lerning_rate: 1e-3"), Contains(":1:1: unknown key 'lerning_rate'; did you mean 'learning_rate'?"));
  CHECK_THAT(error_of("seed: 1\nmodel:\n  n_layers: 2"), Contains(":3:3: unknown key 'model.n_layers'; did you mean 'model.n_layer'?"));
  CHECK_THAT(error_of("", {{"--lerning-rate", "1"}}), Contains("unknown flag --lerning-rate; did you mean --learning-rate?"));
  CHECK_THAT(error_of("", {{"--model.nlayer", "1"}}), Contains("did you mean --model.n-layer?"));
  CHECK_THAT(error_of("zzzzzzzzzzzz: 1"), !Contains("did you mean"));
  CHECK_THAT(error_of("", {{"--foo", "1"}}), !Contains("did you mean"));  // three edits from bf16: no kin of it
}

TEST_CASE("YAML syntax errors and missing files", "[config]") {
  CHECK_THAT(error_of("learning_rate: [1, 2\nseed: 3\n"), Contains("YAML syntax error"));
  CHECK_THAT(error_of("a: b: c"), Contains("run.yaml:1:5: YAML syntax error"));
  try {
    build_run_config(std::string("/nonexistent/run.yaml"), {}, nullptr);
    FAIL("no error for a missing file");
  } catch (const UserError& error) {
    CHECK_THAT(error.what(), Contains("/nonexistent/run.yaml: cannot read the config file"));
  }
}

TEST_CASE("the resolved config round-trips through YAML", "[config]") {
  const char* configs[] = {
      "",
      "learning_rate: 0.1\nwarmup_steps: 0.05\nlr_scheduler_kwargs: {min_lr_rate: 0.1}\nlr_scheduler_type: cosine_with_min_lr\n"
      "eval_strategy: steps\nsave_total_limit: 3\ndata_seed: 9\ntf32: false\noutput_dir: 'runs/a b'\n"
      "torch_compile_mode: reduce-overhead\nmodel: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, vocab_size: 300}\n"
      "data: {kind: text, train_path: /tmp/x.txt, block_size: 64}\n",
      "model: {name: cnn, channels: [8]}\ndata: {kind: idx, train_path: a, train_labels_path: b}\nbf16: true\n",
  };
  for (const char* text : configs) {
    INFO(text);
    const RunConfig original = from_yaml(text);
    const std::string emitted = to_yaml_text(original);
    INFO(emitted);
    const RunConfig reloaded = from_yaml(emitted);
    CHECK(reloaded == original);
    CHECK(to_yaml_text(reloaded) == emitted);
  }
}

TEST_CASE("the built-in quickstart config is valid", "[config]") {
  std::vector<std::string> warnings;
  const RunConfig config = build_run_config(std::nullopt, {}, &warnings);
  CHECK(config.model.name == "mlp");
  CHECK(config.data.kind == "idx");
  CHECK(warnings.empty());
}

TEST_CASE("the warmup_ratio warning suggests the same ratio as warmup_steps", "[config]") {
  test::ScratchDir dir;
  const auto warning_for = [&](const std::string& ratio) {
    std::vector<std::string> warnings;
    build_run_config(dir.write("run.yaml", "warmup_ratio: " + ratio + "\n"), {}, &warnings);
    REQUIRE_FALSE(warnings.empty());
    return warnings.front();
  };
  CHECK_THAT(warning_for("0.9999"), Contains("write warmup_steps: 0.9999 "));
  CHECK_THAT(warning_for("0.5555"), Contains("write warmup_steps: 0.5555 "));
  // 1 as warmup_steps would be one step: the largest ratio below 1 instead.
  CHECK_THAT(warning_for("1.0"), Contains("write warmup_steps: 0.9999999999999999 "));
}
