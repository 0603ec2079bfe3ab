// The real binary trains every model on every data kind at small sizes, and writes the metrics,
// checkpoints and resolved config a user expects.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "support/command.h"
#include "support/data_files.h"
#include "support/metrics.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kFastRun =
    "max_steps: 6\nlogging_steps: 2\nsave_steps: 3\nper_device_train_batch_size: 4\nper_device_eval_batch_size: 8\n"
    "eval_strategy: steps\neval_steps: 3\nlearning_rate: 1e-3\n";

// A small synthetic classification run; tests add the flags they are about.
std::string synthetic_config(const ScratchDir& dir) {
  return dir.write("synthetic.yaml",
                   "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                   "data: {kind: synthetic, num_samples: 256}\nper_device_train_batch_size: 8\neval_strategy: no\n");
}

// Trains with `yaml` in a fresh output_dir and checks the common outputs.
void check_trains(const ScratchDir& dir, const std::string& yaml, const std::string& eval_metric) {
  const std::string out = dir.file("out");
  const std::string config = dir.write("run.yaml", kFastRun + "output_dir: " + out + "\n" + yaml);
  const CommandResult result = run_trainc("--config " + config);
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("step 6/6"));
  CHECK(fs::exists(out + "/checkpoint-3/model.pt"));
  CHECK(fs::exists(out + "/checkpoint-6/optimizer.pt"));
  CHECK(fs::exists(out + "/checkpoint-6/trainer_state.json"));
  CHECK(fs::exists(out + "/run_config.yaml"));
  const auto events = read_metrics(out);
  REQUIRE_FALSE(events.empty());
  bool saw_step = false, saw_eval = false, saw_summary = false;
  for (const auto& event : events) {
    if (event.contains("loss")) {
      saw_step = true;
      for (const char* key : {"step", "epoch", "learning_rate", "grad_norm", "samples_per_second", "step_time_ms"}) {
        CHECK(event.contains(key));
      }
      CHECK(std::isfinite(event["loss"].get<double>()));
    }
    if (event.contains("eval_loss")) saw_eval = event.contains(eval_metric);
    if (event.contains("train_runtime")) {
      saw_summary = event.contains("train_samples_per_second") && event.contains("train_steps_per_second") &&
                    event.contains("train_loss");
    }
  }
  CHECK(saw_step);
  CHECK(saw_eval);
  CHECK(saw_summary);
  const nlohmann::json state = nlohmann::json::parse(read_text(out + "/checkpoint-6/trainer_state.json"));
  CHECK(state["global_step"] == 6);
  CHECK(state["log_history"].size() >= 4);
}

}  // namespace

TEST_CASE("mlp trains on csv data", "[e2e][train]") {
  ScratchDir dir;
  write_csv(dir.file("train.csv"), 64, 5);
  check_trains(dir, "model: {name: mlp, input_size: 5, hidden_sizes: [16], num_classes: 2}\n"
               "data: {kind: csv, train_path: " + dir.file("train.csv") + ", validation_split: 0.25}\n", "eval_accuracy");
}

TEST_CASE("mlp and cnn train on IDX files, gzip'd and raw", "[e2e][train]") {
  ScratchDir dir;
  write_idx_images(dir.file("images.gz"), 40, true);
  write_idx_labels(dir.file("labels.gz"), 40, true);
  write_idx_images(dir.file("eval-images"), 16, false);
  write_idx_labels(dir.file("eval-labels"), 16, false);
  const std::string data = "data: {kind: idx, train_path: " + dir.file("images.gz") + ", train_labels_path: " +
                           dir.file("labels.gz") + ", eval_path: " + dir.file("eval-images") + ", eval_labels_path: " +
                           dir.file("eval-labels") + "}\n";
  SECTION("mlp") { check_trains(dir, "model: {name: mlp, hidden_sizes: [32]}\n" + data, "eval_accuracy"); }
  SECTION("cnn") { check_trains(dir, "model: {name: cnn, channels: [4, 8]}\n" + data, "eval_accuracy"); }
}

TEST_CASE("gpt trains on token files, text and synthetic tokens", "[e2e][train]") {
  ScratchDir dir;
  const std::string model = "model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 16, vocab_size: 300}\n";
  SECTION("nanoGPT uint16 tokens") {
    write_tokens(dir.file("train.bin"), 2000, 300, false);
    check_trains(dir, model + "data: {kind: tokens, train_path: " + dir.file("train.bin") + "}\n", "eval_perplexity");
  }
  SECTION("llm.c tokens with a header") {
    write_tokens(dir.file("train.bin"), 2000, 300, true);
    write_tokens(dir.file("val.bin"), 500, 300, true);
    check_trains(dir, model + "data: {kind: tokens, train_path: " + dir.file("train.bin") + ", eval_path: " + dir.file("val.bin") + "}\n",
                 "eval_perplexity");
  }
  SECTION("text, byte-level") {
    check_trains(dir, model + "data: {kind: text, train_path: /usr/share/common-licenses/GPL-3, block_size: 16}\n", "eval_perplexity");
  }
  SECTION("synthetic tokens, gradient checkpointing and bf16 autocast") {
    check_trains(dir, model + "data: {kind: synthetic, num_samples: 64}\ngradient_checkpointing: true\nbf16: true\n",
                 "eval_perplexity");
  }
}

TEST_CASE("a TorchScript module written by Python trains and checkpoints", "[e2e][train]") {
  ScratchDir dir;
  const std::string model_path = dir.file("model.pt");
  const std::string script = dir.write("make_model.py",
                                       "import torch\n"
                                       "class Net(torch.nn.Module):\n"
                                       "    def __init__(self):\n"
                                       "        super().__init__()\n"
                                       "        self.hidden = torch.nn.Linear(5, 16)\n"
                                       "        self.out = torch.nn.Linear(16, 2)\n"
                                       "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
                                       "        return self.out(torch.relu(self.hidden(x)))\n"
                                       "torch.jit.save(torch.jit.script(Net()), '" + model_path + "')\n");
  const CommandResult made = run_command(std::string(TRAINC_SYSTEM_PYTHON) + " " + script);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  write_csv(dir.file("train.csv"), 64, 5);
  check_trains(dir, "model: {name: torchscript, path: " + model_path + ", num_classes: 2}\n"
               "data: {kind: csv, train_path: " + dir.file("train.csv") + ", validation_split: 0.25}\n", "eval_accuracy");
}

TEST_CASE("a TorchScript module that returns other logits, trains nothing or raises gets a one-line error", "[e2e][train]") {
  ScratchDir dir;
  write_csv(dir.file("train.csv"), 32, 5);
  const auto train_with = [&](const std::string& name, const std::string& init, const std::string& body) {
    const std::string path = dir.file(name + ".pt");
    const std::string script = dir.write(name + ".py", "import torch\n"
                                                       "class Net(torch.nn.Module):\n"
                                                       "    def __init__(self):\n"
                                                       "        super().__init__()\n" + init +
                                                       "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n" + body +
                                                       "torch.jit.save(torch.jit.script(Net()), '" + path + "')\n");
    const CommandResult made = run_command(std::string(TRAINC_SYSTEM_PYTHON) + " " + script);
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
    const std::string config = dir.write(name + ".yaml", "model: {name: torchscript, path: " + path + ", num_classes: 2}\n"
                                                         "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\n"
                                                         "max_steps: 2\neval_strategy: no\n");
    return run_trainc("--config " + config + " --output-dir " + dir.file("out-" + name));
  };
  const std::string linear = "        self.proj = torch.nn.Linear(5, 2)\n";
  CommandResult result = train_with("transposed", linear, "        return self.proj(x).t()\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("transposed.pt: forward(inputs [8, 5]) returned Float logits of shape [2, 8], "
                                  "expected floating-point logits of shape [8, 2] (model.num_classes)"));
  result = train_with("integers", linear, "        return self.proj(x).long()\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("returned Long logits of shape [8, 2]"));
  result = train_with("nothing", "        self.scale = 2.0\n", "        return torch.zeros(x.size(0), 2) * self.scale\n");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("has no parameters to train"));
  result = train_with("raises", linear, "        if x.size(1) == 5:\n            raise RuntimeError('no five-feature inputs here')\n        return self.proj(x)\n");
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Contains("raises.pt: forward(inputs [8, 5]) failed: "));
  CHECK_THAT(result.err, Contains("no five-feature inputs here"));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
}

TEST_CASE("a TorchScript language model narrower than the data's tokens is refused at its first forward", "[e2e][train]") {
  // Before, the loss failed with ATen's "Target 119 is out of bounds" (exit 1; on a GPU, a
  // device-side assertion that ends the process).
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "hello world ";  // bytes up to 'w', 119
  dir.write("text.txt", text);
  const auto train_with_vocab = [&](int vocab) {
    const std::string path = dir.file("lm" + std::to_string(vocab) + ".pt");
    const std::string script = dir.write("lm.py", "import torch\n"
                                                  "class LM(torch.nn.Module):\n"
                                                  "    def __init__(self):\n"
                                                  "        super().__init__()\n"
                                                  "        self.embed = torch.nn.Embedding(256, 8)\n"
                                                  "        self.head = torch.nn.Linear(8, " + std::to_string(vocab) + ")\n"
                                                  "    def forward(self, tokens: torch.Tensor) -> torch.Tensor:\n"
                                                  "        return self.head(self.embed(tokens))\n"
                                                  "torch.jit.save(torch.jit.script(LM()), '" + path + "')\n");
    const CommandResult made = run_command(std::string(TRAINC_SYSTEM_PYTHON) + " " + script);
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
    const std::string config = dir.write("lm.yaml", "model: {name: torchscript, path: " + path + "}\n"
                                                    "data: {kind: text, train_path: " + dir.file("text.txt") + ", block_size: 16}\n"
                                                    "max_steps: 2\neval_strategy: no\nsave_strategy: no\nper_device_train_batch_size: 4\n");
    return run_trainc("--config " + config + " --output-dir " + dir.file("out" + std::to_string(vocab)));
  };
  CommandResult result = train_with_vocab(100);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("lm100.pt: forward(inputs [4, 16]) returned Float logits of shape [4, 16, 100], expected "
                                  "floating-point logits of shape [4, 16, vocab] with vocab at least 120 (the data's largest token is 119)"));
  result = train_with_vocab(120);  // just wide enough
  INFO(result.err);
  CHECK(result.exit_code == 0);

  // Token files: the largest token only in the held-out file, past model.vocab_size's default
  // (50257, a gpt key), which a TorchScript model does not have.
  std::string train_tokens, eval_tokens;
  for (int i = 0; i < 200; ++i) {
    const auto token = static_cast<uint16_t>(i % 50);
    train_tokens += std::string{static_cast<char>(token & 0xFF), static_cast<char>(token >> 8)};
    const uint16_t held_out = i == 77 ? 60000 : token;
    eval_tokens += std::string{static_cast<char>(held_out & 0xFF), static_cast<char>(held_out >> 8)};
  }
  const std::string config = dir.write("tokens.yaml", "model: {name: torchscript, path: " + dir.file("lm120.pt") + "}\n"
                                                      "data: {kind: tokens, train_path: " + dir.write("train.bin", train_tokens) +
                                                      ", eval_path: " + dir.write("val.bin", eval_tokens) + ", block_size: 16}\n"
                                                      "max_steps: 2\nsave_strategy: no\nper_device_train_batch_size: 4\n");
  result = run_trainc("--config " + config + " --output-dir " + dir.file("tokens"));
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("lm120.pt: forward(inputs [4, 16]) returned Float logits of shape [4, 16, 120], expected "
                                  "floating-point logits of shape [4, 16, vocab] with vocab at least 60001 (the data's largest token is 60000)"));
}

TEST_CASE("the quickstart reaches 85% test accuracy on Fashion-MNIST and prints it", "[e2e][train][quickstart]") {
  ScratchDir dir;
  const CommandResult result = run_trainc("--output-dir " + dir.file("out"));
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("final eval"));
  double best_accuracy = 0.0;
  for (const auto& event : read_metrics(dir.file("out"))) {
    if (event.contains("eval_accuracy")) best_accuracy = event["eval_accuracy"].get<double>();
  }
  CHECK(best_accuracy >= 0.85);
}

TEST_CASE("the same seed gives the same weights, with or without prefetching workers", "[e2e][train]") {
  ScratchDir dir;
  write_csv(dir.file("train.csv"), 64, 5);
  const std::string yaml = "model: {name: mlp, input_size: 5, hidden_sizes: [16], num_classes: 2, dropout: 0.2}\n"
                           "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\nmax_steps: 6\nsave_steps: 3\n"
                           "per_device_train_batch_size: 4\nlearning_rate: 1e-3\neval_strategy: no\n";
  const std::string config = dir.write("run.yaml", yaml);
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("a")).exit_code == 0);
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("b") + " --dataloader-num-workers 2").exit_code == 0);
  CHECK(read_text(dir.file("a/checkpoint-6/model.pt")) == read_text(dir.file("b/checkpoint-6/model.pt")));
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("c") + " --seed 7").exit_code == 0);
  CHECK(read_text(dir.file("a/checkpoint-6/model.pt")) != read_text(dir.file("c/checkpoint-6/model.pt")));
}

TEST_CASE("a non-empty output_dir is refused unless overwriting or resuming", "[e2e][train]") {
  ScratchDir dir;
  dir.write("out/notes.txt", "keep me");
  const std::string config = synthetic_config(dir);
  const CommandResult refused = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 1");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Contains("output_dir: " + dir.file("out") + " is not empty"));
  const CommandResult allowed =
      run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 2 --overwrite-output-dir");
  INFO(allowed.err);
  CHECK(allowed.exit_code == 0);
  CHECK(read_text(dir.file("out/notes.txt")) == "keep me");
}

TEST_CASE("max_steps inside an epoch ends it for the epoch strategies of logging and evaluation and saving", "[e2e][train]") {
  ScratchDir dir;
  const std::string out = dir.file("out");
  // 256 samples less the held-out tenth, in batches of 8: 29 steps an epoch (the header says so),
  // so 40 steps stop 11 steps into the second.
  const CommandResult result = run_trainc("--config " + synthetic_config(dir) + " --output-dir " + out +
                                          " --max-steps 40 --logging-strategy epoch --eval-strategy epoch --save-strategy epoch");
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  REQUIRE_THAT(result.out, Contains("steps      40 (29 per epoch)"));
  CHECK(fs::exists(out + "/checkpoint-29/model.pt"));
  CHECK(fs::exists(out + "/checkpoint-40/model.pt"));
  std::vector<int64_t> logged, evaluated;
  for (const auto& event : read_metrics(out)) {
    if (event.contains("loss")) logged.push_back(event["step"].get<int64_t>());
    if (event.contains("eval_loss")) evaluated.push_back(event["step"].get<int64_t>());
  }
  CHECK(logged == std::vector<int64_t>{29, 40});
  CHECK(evaluated == std::vector<int64_t>{29, 40});
}

TEST_CASE("an output_dir that cannot be created stops the run at start and names it", "[e2e][train]") {
  ScratchDir dir;
  dir.write("file.txt", "a file, not a directory");
  const std::string out = dir.file("file.txt/out");
  const CommandResult result = run_trainc("--config " + synthetic_config(dir) + " --output-dir " + out + " --max-steps 1");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("output_dir: cannot create " + out));
  CHECK_THAT(result.err, !Contains("step 1"));
}

TEST_CASE("a non-finite loss stops the run naming the step", "[e2e][train]") {
  ScratchDir dir;
  const CommandResult result =
      run_trainc("--config " + synthetic_config(dir) + " --output-dir " + dir.file("out") +
                 " --optim sgd --learning-rate 1e30 --max-grad-norm 0 --max-steps 50 --logging-steps 1");
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Contains("non-finite loss"));
  CHECK_THAT(result.err, Contains("at step"));
  // The last good checkpoint is this run's own: one it saved before the loss went bad, never one
  // of the run it overwrites.
  const std::string diverging = " --optim sgd --learning-rate 1e30 --max-grad-norm 0 --max-steps 50 --logging-steps 1";
  REQUIRE(run_trainc("--config " + synthetic_config(dir) + " --output-dir " + dir.file("earlier") + " --max-steps 2").exit_code == 0);
  CommandResult overwriting =
      run_trainc("--config " + synthetic_config(dir) + " --output-dir " + dir.file("earlier") + " --overwrite-output-dir" + diverging);
  CHECK(overwriting.exit_code == 1);
  CHECK_THAT(overwriting.err, Contains("Last good checkpoint: none"));
  CHECK(std::filesystem::exists(dir.file("earlier/checkpoint-2")));  // kept: the new run saved nothing
  const CommandResult saving = run_trainc("--config " + synthetic_config(dir) + " --output-dir " + dir.file("saving") + " --save-steps 1" + diverging);
  CHECK(saving.exit_code == 1);
  CHECK_THAT(saving.err, Contains("Last good checkpoint: " + dir.file("saving") + "/checkpoint-1 "));
}

TEST_CASE("unsupported settings fail before training with a clear message", "[e2e][train]") {
  ScratchDir dir;
  const std::string base = "--config " + synthetic_config(dir) + " --output-dir " + dir.file("out") + " --max-steps 1 ";
  CommandResult result = run_trainc(base + "--fp16");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("fp16: float16 autocast needs a CUDA GPU"));
  result = run_trainc(base + "--tf32 true");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("tf32: true needs an Ampere or newer NVIDIA GPU"));
  result = run_trainc(base + "--data.kind csv --data.train-path /nonexistent.csv --data.num-samples 1");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("data.num_samples: not read by data.kind csv"));
  result = run_trainc(base + "--model.name gpt --model.n-layer 1 --model.n-embd 16 --model.n-head 2 --model.block-size 8"
                             " --model.vocab-size 10");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(": not read by model.name gpt; it applies to mlp"));
  // A metric evaluation never reports, known before anything is trained or replaced.
  result = run_trainc(base + "--data.validation-split 0.25 --eval-strategy steps --eval-steps 1 --metric-for-best-model acuracy");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("metric_for_best_model: got \"acuracy\", but evaluation of a classifier reports no eval_acuracy; "
                                  "expected one of eval_loss, eval_accuracy, eval_runtime, eval_samples_per_second"));
  // Sizes each valid alone whose product is past what any machine holds (a table of 2^64 bytes).
  const std::string huge = dir.write("huge.yaml", "model: {name: gpt, vocab_size: 2147483647, n_embd: 2147483647, n_head: 1, n_layer: 1, block_size: 8}\n"
                                                  "data: {kind: synthetic, num_samples: 16}\neval_strategy: no\n");
  result = run_trainc("--config " + huge + " --output-dir " + dir.file("out") + " --max-steps 1");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("model: the gpt model the config describes is too large for host memory ("));
  result = run_command("WORLD_SIZE=1 RANK=3 " + std::string(TRAINC_BINARY) + " " + base);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("RANK=3: expected 0, the only rank when WORLD_SIZE=1"));
  CHECK_FALSE(std::filesystem::exists(dir.file("out")));  // nothing written by runs that never started
}

TEST_CASE("a terminal gets a progress bar with ETA, a pipe gets plain lines", "[e2e][train]") {
  ScratchDir dir;
  const std::string command = std::string(TRAINC_BINARY) + " --config " + synthetic_config(dir) + " --output-dir " +
                              dir.file("out") + " --max-steps 30 --logging-steps 10 --overwrite-output-dir";
  // script(1) runs the command on a pseudo-terminal.
  const CommandResult terminal = run_command("script -qec '" + command + "' /dev/null");
  REQUIRE(terminal.exit_code == 0);
  CHECK_THAT(terminal.out, Contains("ETA"));
  CHECK_THAT(terminal.out, Contains("\r"));
  const CommandResult piped = run_command(command);
  REQUIRE(piped.exit_code == 0);
  CHECK_THAT(piped.out, !Contains("ETA"));
  CHECK_THAT(piped.out, !Contains("\r"));
  CHECK_THAT(piped.out, Contains("step 30/30"));
  const CommandResult disabled = run_command("script -qec '" + command + " --disable-tqdm' /dev/null");
  CHECK_THAT(disabled.out, !Contains("ETA"));
}

TEST_CASE("TRAINC_PROFILE_TRACE saves a trace of the steps asked for, or says why it cannot", "[e2e][train]") {
  ScratchDir dir;
  const std::string run = "--config " + synthetic_config(dir) + " --max-steps 4 --output-dir ";

  const CommandResult malformed = run_command("TRAINC_PROFILE_TRACE=" + dir.file("t.json") + " TRAINC_PROFILE_TRACE_STEPS=2- " +
                                              TRAINC_BINARY + " " + run + dir.file("a"));
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(malformed.err, Contains("TRAINC_PROFILE_TRACE_STEPS=2-: expected <first step>:<number of steps>"));

  const CommandResult traced = run_command("TRAINC_PROFILE_TRACE=" + dir.file("t.json") + " TRAINC_PROFILE_TRACE_STEPS=2:2 " +
                                           TRAINC_BINARY + " " + run + dir.file("b"));
  if (traced.exit_code == 0) {
    // The trace holds the ATen calls of the window's steps.
    const nlohmann::json trace = nlohmann::json::parse(read_text(dir.file("t.json")));
    int aten_calls = 0;
    for (const auto& event : trace["traceEvents"]) aten_calls += event.value("name", "").find("aten::") == 0 ? 1 : 0;
    CHECK(aten_calls > 0);
  } else {
    // A LibTorch built without Kineto cannot save traces: the run stops at start, saying so.
    CHECK(traced.exit_code == 2);
    CHECK_THAT(traced.err, Contains("TRAINC_PROFILE_TRACE=" + dir.file("t.json") + ": cannot save a profiler trace"));
    CHECK_THAT(traced.err, Contains("Kineto"));
    CHECK_FALSE(fs::exists(dir.file("b") + "/checkpoint-2"));
  }
}
