// The real binary: --help, --print-config, overrides, and the errors a user meets first.
#include <catch2/catch.hpp>

#include "support/command.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("trainc --help lists every field with its default", "[e2e][cli]") {
  const CommandResult result = run_trainc("--help");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("--learning-rate"));
  CHECK_THAT(result.out, Contains("5e-05"));
  CHECK_THAT(result.out, Contains("--torch-compile-mode"));
  CHECK_THAT(result.out, Contains("--model.n-layer"));
  CHECK_THAT(result.out, Contains("--data.kind"));
  CHECK_THAT(result.out, Contains("--print-config"));
}

TEST_CASE("print-config prints the resolved config with overrides applied", "[e2e][cli]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml", "learning_rate: 1e-3\nmodel: {name: mlp, input_size: 4, hidden_sizes: [8]}\n");
  const CommandResult result =
      run_trainc("--config " + config + " --print-config --learning-rate 3e-4 --torch_compile_mode max-autotune --bf16");
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("learning_rate: 3e-04"));
  CHECK_THAT(result.out, Contains("torch_compile: true"));
  CHECK_THAT(result.out, Contains("torch_compile_mode: max-autotune"));
  CHECK_THAT(result.out, Contains("bf16: true"));
  CHECK_THAT(result.out, Contains("hidden_sizes: [8]"));

  // The printed config loads back to the same config.
  const std::string printed = dir.write("printed.yaml", result.out);
  const CommandResult again = run_trainc("--config " + printed + " --print-config");
  REQUIRE(again.exit_code == 0);
  CHECK(again.out == result.out);
}

TEST_CASE("a boolean flag takes an explicit value", "[e2e][cli]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml", "bf16: true\n");
  const CommandResult result = run_trainc("--config " + config + " --print-config --bf16 false --use-cpu");
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("bf16: false"));
  CHECK_THAT(result.out, Contains("use_cpu: true"));
}

TEST_CASE("a flag given an empty value, or none at the end of the line, is refused", "[e2e][cli]") {
  // An empty value is not the bare flag: --overwrite-output-dir=$UNSET must not turn it on.
  for (const std::string& flags : {"--bf16 ''", "--overwrite-output-dir=", "--overwrite_output_dir ''"}) {
    const CommandResult result = run_trainc("--print-config " + flags);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(": got an empty value, expected true or false (or the bare flag for true)"));
  }
  CommandResult result = run_trainc("--print-config --max-steps=");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--max-steps: got an empty value, expected a value (int)"));
  result = run_trainc("--print-config --model.hidden-sizes");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--model.hidden-sizes: got no value, expected a value (list of int); write [] for an empty list"));
  result = run_trainc("--print-config --model.hidden-sizes []");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("hidden_sizes: []"));
  result = run_trainc("--print-config --bf16");  // the bare flag, last on the line
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("bf16: true"));
}

TEST_CASE("a flag given twice takes its last value, --config too, and a repeated --nproc-per-node is no error", "[e2e][cli]") {
  ScratchDir dir;
  const std::string first = dir.write("first.yaml", "seed: 1\n");
  const std::string second = dir.write("second.yaml", "seed: 2\n");
  const CommandResult result = run_trainc("--print-config --config " + first + " --config " + second + " --nproc-per-node 2 --nproc-per-node 1");
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("seed: 2"));
}

TEST_CASE("an unknown key exits 2 with a suggestion", "[e2e][cli]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml", "learning_rate: 1e-3\nnum_train_epoch: 2\n");
  const CommandResult result = run_trainc("--config " + config + " --print-config");
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, StartsWith("trainc: error: " + config + ":2:1: unknown key 'num_train_epoch'; did you mean 'num_train_epochs'?"));
  CHECK_THAT(result.err, !Contains("terminate"));

  const CommandResult flag = run_trainc("--print-config --num-train-epoch 2");
  CHECK(flag.exit_code == 2);
  CHECK_THAT(flag.err, Contains("unknown flag --num-train-epoch; did you mean --num-train-epochs?"));
}

TEST_CASE("malformed YAML exits 2 with file:line:column", "[e2e][cli]") {
  ScratchDir dir;
  const std::string config = dir.write("bad.yaml", "learning_rate: 1e-3\nmodel:\n  name: [mlp\n");
  const CommandResult result = run_trainc("--config " + config);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(config + ":"));
  CHECK_THAT(result.err, Contains("YAML syntax error"));
}

TEST_CASE("bad values and missing files exit 2 with one line on stderr", "[e2e][cli]") {
  CommandResult result = run_trainc("--print-config --learning-rate fast");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--learning-rate: got \"fast\", expected a finite number"));
  result = run_trainc("--print-config --lr-scheduler-type exponential");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("expected one of: linear, cosine"));
  result = run_trainc("--config /nonexistent/run.yaml");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("/nonexistent/run.yaml: cannot read the config file"));
  result = run_trainc("--print-config stray");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("unexpected argument 'stray'"));
}

TEST_CASE("a flag that takes a value is not given the next flag as its value", "[e2e][cli]") {
  CommandResult result = run_trainc("--print-config --output-dir --overwrite-output-dir");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--output-dir: got the flag --overwrite-output-dir, expected a value"));
  result = run_trainc("--print-config --metric_for_best_model --bf16");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--metric-for-best-model: got the flag --bf16, expected a value"));
  result = run_trainc("--print-config --output-dir=--odd-name");  // spelled out with '=': meant
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("output_dir: --odd-name"));
  result = run_trainc("--print-config --learning-rate -1e-3");  // a negative number is a value
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("learning_rate: got -0.001"));
  result = run_trainc("--print-config --bf16 --seed 3");  // a flag without a value is left alone
  CHECK(result.exit_code == 0);
}

TEST_CASE("an environment switch with a value it does not take is a usage error", "[e2e][cli]") {
  const CommandResult result = run_command("TRAINC_PROFILE_KERNELS=yes " + std::string(TRAINC_BINARY) + " --print-config");
  CHECK(result.exit_code == 0);  // --print-config runs nothing
  ScratchDir dir;
  const CommandResult run = run_command("TRAINC_PROFILE_KERNELS=yes " + std::string(TRAINC_BINARY) + " --max-steps 1 --output-dir " + dir.file("out"));
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Contains("TRAINC_PROFILE_KERNELS=yes: expected 1 (on) or 0 (off)"));
}

TEST_CASE("the config and dump paths must be usable", "[e2e][cli]") {
  ScratchDir dir;
  CommandResult result = run_trainc("--print-config --config ''");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--config: got an empty path"));
  result = run_trainc("--print-config --config " + dir.path());
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(dir.path() + ": is a directory"));
  const std::string binary = dir.write("binary.yaml", std::string("seed: 1\nlearning_rate: 1e-3\0\n", 29));
  result = run_trainc("--print-config --config " + binary);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains(binary + ":2: holds a NUL byte; expected a YAML text file"));
  const std::string file = dir.write("not_a_dir", "x");
  result = run_trainc("--max-steps 1 --torch-compile --output-dir " + dir.file("out") + " --dump-dir " + file);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--dump-dir: " + file + " exists and is not a directory"));
  result = run_trainc("--max-steps 1 --output-dir " + dir.file("out") + " --dump-dir " + dir.file("dump"));
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--dump-dir: writes the compiled steps' graphs, but torch_compile is false"));
  result = run_trainc("--print-config --dump-dir ''");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("--dump-dir: got an empty path"));
}

TEST_CASE("docs/config.md is the reference generated from the field tables", "[e2e][cli][docs]") {
  const CommandResult result = run_trainc("--print-config-reference");
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("| `learning_rate` | float | `5e-05` |"));
  CHECK_THAT(result.out, Contains("| `model.n_layer` | int | `12` |"));
  const std::string committed = read_text(std::string(TRAINC_SOURCE_DIR) + "/docs/config.md");
  INFO("regenerate with: build/trainc --print-config-reference > docs/config.md");
  CHECK(committed == result.out);
}

TEST_CASE("every config in configs/ is valid", "[e2e][cli]") {
  for (const char* name : {"quickstart", "text_lm", "gpt2_124m_synthetic", "annotated"}) {
    INFO(name);
    const CommandResult result = run_trainc("--config " + std::string(TRAINC_SOURCE_DIR) + "/configs/" + name + ".yaml --print-config");
    CHECK(result.exit_code == 0);
    CHECK(result.err.empty());
  }
}
