// `torch_compile` end to end through the real binary: aot_eager tracks eager's loss curve, graph
// breaks are reported (and stop the run under torch_compile_fullgraph), backends that cannot run
// are refused before anything is written, `trainc explain` and --dump-dir show the plan, and
// metrics.jsonl records the compile time apart from step time.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "support/command.h"
#include "support/data_files.h"
#include "support/metrics.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A small gpt on synthetic tokens with dropout: every compile stage is exercised.
std::string gpt_config(const ScratchDir& dir) {
  return dir.write("gpt.yaml",
                   "model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 16, vocab_size: 64, dropout: 0.1}\n"
                   "data: {kind: synthetic, num_samples: 40}\nper_device_train_batch_size: 8\neval_strategy: no\n"
                   "save_strategy: no\nmax_steps: 8\nlogging_steps: 1\nlearning_rate: 3e-3\n");
}

// A TorchScript classifier written by Python, named by what its forward holds: "plain"; "cumsum",
// an op the planner has no entry for; "branch", a branch on the data's values; "reshaped", a
// reshape by the batch's size, traced; "detached", logits no parameter reaches ("detached-cumsum",
// with a graph break); "no_grad", a term computed under torch.no_grad(); "grad_enabled", a branch
// on torch.is_grad_enabled(); "autograd_inside", a gradient taken inside forward
// (torch.autograd.grad); "grad_on", torch.set_grad_enabled(True).
std::string torchscript_config(const ScratchDir& dir, const std::string& kind) {
  const std::string path = dir.file(kind + ".pt");
  const std::string body = kind == "branch" ? "        y = self.proj(torch.tanh(x))\n"
                                              "        if bool(x[0, 0] > 0):\n"
                                              "            return y\n"
                                              "        return -y\n"
                          : kind == "reshaped" ? "        return self.proj(torch.tanh(x).view(x.size(0), -1))\n"
                          : kind == "detached" ? "        return self.proj(torch.tanh(x)).detach()\n"
                          : kind == "no_grad"  ? "        with torch.no_grad():\n"
                                                 "            y = self.proj(torch.tanh(x))\n"
                                                 "        return self.proj(x) + y\n"
                          : kind == "autograd_inside" ? "        x = x.detach().requires_grad_(True)\n"
                                                        "        e = (self.proj(x) ** 2).sum()\n"
                                                        "        g = torch.autograd.grad([e], [x], create_graph=True)[0]\n"
                                                        "        assert g is not None\n"
                                                        "        return self.proj(x + g)\n"
                          : kind == "grad_on" ? "        torch.set_grad_enabled(True)\n"
                                                "        return self.proj(torch.tanh(x))\n"
                          : kind == "grad_enabled" ? "        if torch.is_grad_enabled():\n"
                                                     "            return self.proj(x)\n"
                                                     "        return -self.proj(x)\n"
                          : kind == "detached-cumsum" ? "        return self.proj(torch.tanh(x)).cumsum(1).detach()\n"
                                               : "        return self.proj(torch.tanh(x))" + std::string(kind == "cumsum" ? ".cumsum(1)" : "") + "\n";
  // "reshaped" is traced, as torch.jit.trace keeps a size read: prim::NumToTensor, then aten::Int.
  const std::string save = kind == "reshaped" ? "torch.jit.trace(Net(), torch.randn(8, 5))" : "torch.jit.script(Net())";
  const std::string script = dir.write("make.py",
                                       "import torch\n"
                                       "class Net(torch.nn.Module):\n"
                                       "    def __init__(self):\n"
                                       "        super().__init__()\n"
                                       "        self.proj = torch.nn.Linear(5, 3)\n"
                                       "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n" + body +
                                       "torch.jit.save(" + save + ", '" + path + "')\n");
  const CommandResult made = run_command(std::string(TRAINC_SYSTEM_PYTHON) + " " + script);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  write_csv(dir.file("train.csv"), 32, 5);
  return dir.write(kind + ".yaml", "model: {name: torchscript, path: " + path + ", num_classes: 3}\n"
                              "data: {kind: csv, train_path: " + dir.file("train.csv") + "}\n"
                              "per_device_train_batch_size: 8\neval_strategy: no\nsave_strategy: no\nmax_steps: 3\n");
}

// `config` trained eagerly and under aot_eager, logging every step, into <dir>/eager-<name> and
// <dir>/aot-<name>; both must succeed. The compiled run's output.
CommandResult train_eager_then_compiled(const ScratchDir& dir, const std::string& config, const std::string& name) {
  const CommandResult eager = run_trainc("--config " + config + " --output-dir " + dir.file("eager-" + name) + " --logging-steps 1");
  REQUIRE(eager.exit_code == 0);
  const CommandResult compiled = run_trainc("--config " + config + " --output-dir " + dir.file("aot-" + name) +
                                            " --logging-steps 1 --torch-compile-backend aot_eager");
  INFO(compiled.out << compiled.err);
  REQUIRE(compiled.exit_code == 0);
  return compiled;
}

}  // namespace

TEST_CASE("aot_eager trains gpt with the loss curve of eager, and records compile time", "[e2e][compile]") {
  ScratchDir dir;
  const std::string config = gpt_config(dir);
  const CommandResult eager = run_trainc("--config " + config + " --output-dir " + dir.file("eager"));
  REQUIRE(eager.exit_code == 0);
  const CommandResult compiled = run_trainc("--config " + config + " --output-dir " + dir.file("aot") + " --torch-compile-backend aot_eager");
  INFO(compiled.out << compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK_THAT(compiled.out, Contains("backend aot_eager, mode default (configured)"));
  CHECK_THAT(compiled.out, Contains("compile: compiled in"));
  const std::vector<double> expected = losses(read_metrics(dir.file("eager")));
  const auto events = read_metrics(dir.file("aot"));
  const std::vector<double> got = losses(events);
  REQUIRE(got.size() == expected.size());
  REQUIRE(got.size() == 8);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-4));
  std::vector<std::string> reasons;
  for (const auto& event : events) {
    if (event.contains("compile_reason")) {
      reasons.push_back(event["compile_reason"]);
      CHECK(event["compile_outcome"] == "compiled");
      CHECK(event["compile_seconds"].get<double>() > 0);
    }
    if (event.contains("train_runtime")) CHECK(event.contains("compile_seconds"));
  }
  REQUIRE_FALSE(reasons.empty());
  CHECK(reasons[0] == "first step");
}

TEST_CASE("a TorchScript model compiles and trains under aot_eager like eager", "[e2e][compile]") {
  ScratchDir dir;
  for (const std::string kind : {"plain", "reshaped"}) {
    INFO(kind);
    const CommandResult compiled = train_eager_then_compiled(dir, torchscript_config(dir, kind), kind);
    INFO(compiled.out << compiled.err);
    CHECK_THAT(compiled.out, Contains("compile: compiled in"));
    CHECK_THAT(compiled.out + compiled.err, !Contains("graph break"));
    const std::vector<double> expected = losses(read_metrics(dir.file("eager-" + kind)));
    const std::vector<double> got = losses(read_metrics(dir.file("aot-" + kind)));
    REQUIRE(got.size() == 3);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-5));
  }
}

TEST_CASE("the last partial batch compiles again and says why", "[e2e][compile]") {
  ScratchDir dir;
  const CommandResult result = run_trainc("--config " + gpt_config(dir) + " --output-dir " + dir.file("out") +
                                          " --torch-compile-backend aot_eager --dataloader-drop-last false");
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("compile: compiled in"));
  CHECK_THAT(result.out, Contains("(new input signature; compiled before: [inputs Long[8, 16] cpu, targets Long[8, 16] cpu]; inputs Long["));
  // With the partial batch dropped, every batch has one signature: one compile.
  const CommandResult dropped = run_trainc("--config " + gpt_config(dir) + " --output-dir " + dir.file("dropped") +
                                           " --torch-compile-backend aot_eager --dataloader-drop-last true");
  REQUIRE(dropped.exit_code == 0);
  CHECK_THAT(dropped.out, !Contains("new input signature"));
}

TEST_CASE("a graph break names the op and module and runs eagerly, and fullgraph stops with exit 2", "[e2e][compile]") {
  ScratchDir dir;
  const std::string config = torchscript_config(dir, "cumsum");
  CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --torch-compile-backend aot_eager");
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out + result.err, Contains("graph break, this step runs eagerly: aten::cumsum (no IR entry) in module proj"));
  CHECK_THAT(result.out, Contains("done: 3 steps"));
  result = run_trainc("--config " + config + " --output-dir " + dir.file("full") + " --torch-compile-backend aot_eager --torch-compile-fullgraph");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("torch_compile_fullgraph: true, but the step has graph breaks"));
  CHECK_THAT(result.err, Contains("aten::cumsum (no IR entry)"));
  result = run_trainc("explain --config " + config + " --torch-compile-backend aot_eager");
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("graph breaks 1 (this step would run eagerly)"));
}

TEST_CASE("a TorchScript branch on the data's values is a graph break, not the first batch's branch kept", "[e2e][compile]") {
  // A trace records the branch the first batch takes; later batches would take it too, silently.
  ScratchDir dir;
  const std::string config = torchscript_config(dir, "branch");
  const CommandResult compiled = train_eager_then_compiled(dir, config, "branch");
  INFO(compiled.out << compiled.err);
  CHECK_THAT(compiled.out + compiled.err,
             Contains("graph break, this step runs eagerly: aten::Bool (reads a tensor's value on the host at " + dir.file("make.py") + ":"));
  CHECK(losses(read_metrics(dir.file("aot-branch"))) == losses(read_metrics(dir.file("eager-branch"))));
  const CommandResult full =
      run_trainc("--config " + config + " --output-dir " + dir.file("full") + " --torch-compile-backend aot_eager --torch-compile-fullgraph");
  CHECK(full.exit_code == 2);
  CHECK_THAT(full.err, Contains("aten::Bool (reads a tensor's value on the host"));
}

TEST_CASE("a TorchScript torch.no_grad() block, a read of the grad mode or a gradient inside forward is a graph break", "[e2e][compile]") {
  // A trace, taken without autograd, keeps a no_grad block's ops but not the switch (its backward
  // gave that term a gradient eager does not), reads the grad mode as off (the other branch), and
  // has no graph for torch.autograd.grad to differentiate.
  ScratchDir dir;
  for (const std::string kind : {"no_grad", "grad_enabled", "autograd_inside"}) {
    INFO(kind);
    const CommandResult compiled = train_eager_then_compiled(dir, torchscript_config(dir, kind), kind);
    INFO(compiled.out << compiled.err);
    const std::string op = kind == "no_grad" ? "with torch.no_grad" : kind == "grad_enabled" ? "aten::is_grad_enabled" : "aten::requires_grad_";
    CHECK_THAT(compiled.out + compiled.err,
               Contains("graph break, this step runs eagerly: " + op +
                        " (switches, reads or runs autograd at " + dir.file("make.py") + ":"));
    const std::vector<double> expected = losses(read_metrics(dir.file("eager-" + kind)));
    REQUIRE(expected.size() == 3);
    CHECK(losses(read_metrics(dir.file("aot-" + kind))) == expected);
  }
}

TEST_CASE("a TorchScript forward that turns autograd on compiles: a training step has it on already", "[e2e][compile]") {
  ScratchDir dir;
  const CommandResult compiled = train_eager_then_compiled(dir, torchscript_config(dir, "grad_on"), "grad_on");
  INFO(compiled.out << compiled.err);
  CHECK_THAT(compiled.out + compiled.err, !Contains("graph break"));
  CHECK_THAT(compiled.out, Contains("compile: compiled in"));
  const std::vector<double> expected = losses(read_metrics(dir.file("eager-grad_on")));
  const std::vector<double> got = losses(read_metrics(dir.file("aot-grad_on")));
  REQUIRE(expected.size() == 3);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-6));
}

TEST_CASE("logits that no trained parameter reaches are refused, eager and compiled alike", "[e2e][compile]") {
  // Eager failed with LibTorch's "element 0 of tensors does not require grad"; compiled, the step
  // had no gradient to compute and trained nothing, silently.
  // "detached-cumsum" has a graph break too: its step runs eagerly under compile.
  ScratchDir dir;
  for (const std::string kind : {"detached", "detached-cumsum"}) {
    const std::string config = torchscript_config(dir, kind);
    for (const std::string backend : {"", " --torch-compile-backend aot_eager"}) {
      INFO(kind << backend);
      const CommandResult result =
          run_trainc("--config " + config + " --output-dir " + dir.file(kind + std::to_string(backend.size())) + backend);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains("model: the loss of torchscript " + dir.file(kind + ".pt") +
                                      " depends on none of the parameters being trained"));
    }
    // explain refuses it too, after the plan where the step has a break and would run eagerly.
    const CommandResult explained = run_trainc("explain --config " + config + " --torch-compile-backend aot_eager");
    INFO(kind << "\n" << explained.out << explained.err);
    CHECK(explained.exit_code == 2);
    CHECK_THAT(explained.err, Contains("depends on none of the parameters being trained"));
    if (kind == "detached-cumsum") CHECK_THAT(explained.out, Contains("graph breaks 1 (this step would run eagerly)"));
  }
}

TEST_CASE("backends that cannot run are refused before anything is written", "[e2e][compile]") {
  ScratchDir dir;
  const std::string base = "--config " + gpt_config(dir) + " --output-dir " + dir.file("out") + " ";
  CommandResult result = run_trainc(base + "--torch-compile-backend cudagraphs");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("needs a CUDA device; this run is on cpu"));
  CHECK_THAT(result.err, Contains("torch_compile_backend: aot_eager"));
  result = run_trainc(base + "--torch-compile-backend ipex");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("Intel Extension for PyTorch"));
  result = run_trainc(base + "--torch-compile-backend hpu_backend");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("SynapseAI"));
  result = run_trainc(base + "--torch-compile-backend neuron");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("Neuron SDK"));
  result = run_trainc(base + "--torch-compile-backend tvm");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("aot_eager") && Contains("cudagraphs"));
  result = run_trainc(base + "--torch-compile-backend aot_eager --torch-compile-mode max-autotune");
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("needs the inductor backend"));
  CHECK_FALSE(fs::exists(dir.file("out")));
  result = run_trainc(base + "--torch-compile-backend aot_eager --torch-compile-mode reduce-overhead --max-steps 1");
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out + result.err, Contains("on cpu the step runs in mode default"));
  // On the CPU there is one implementation of each library call and one launch of each kernel:
  // max-autotune runs without graphs and has nothing to measure.
  result = run_trainc(base + "--torch-compile-backend inductor --torch-compile-mode max-autotune --max-steps 1 --overwrite-output-dir");
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out + result.err, Contains("on cpu the step runs in mode max-autotune-no-cudagraphs"));
  CHECK_THAT(result.out + result.err, !Contains("autotuned"));
}

TEST_CASE("trainc explain prints the plan and --dump-dir writes every stage", "[e2e][compile]") {
  ScratchDir dir;
  const CommandResult result =
      run_trainc("explain --config " + gpt_config(dir) + " --torch-compile-backend aot_eager --dump-dir " + dir.file("dump"));
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  for (const char* line : {"captured ", "aten::embedding 2", "graph breaks none", "backend      aot_eager, mode default",
                           "forward      ", "extern: ", "matmul ", "backward     ", "saved        "}) {
    CHECK_THAT(result.out, Contains(line));
  }
  for (const char* stage : {"traced", "ir", "joint", "forward", "backward"}) {
    INFO(stage);
    CHECK_FALSE(read_text(dir.file("dump") + "/compile-1-" + stage + ".txt").empty());
  }
  CHECK_THAT(read_text(dir.file("dump") + "/compile-1-traced.txt"), Contains("aten::embedding"));
  CHECK_THAT(read_text(dir.file("dump") + "/compile-1-backward.txt"), Contains("embedding_grad"));
  CHECK_FALSE(fs::exists(dir.file("out")));
  // With no usable backend, explain still shows the plan, then says why and exits 2.
  const CommandResult unavailable = run_trainc("explain --config " + gpt_config(dir) + " --torch-compile-backend cudagraphs");
  CHECK(unavailable.exit_code == 2);
  CHECK_THAT(unavailable.out, Contains("backend      unavailable: torch_compile_backend: cudagraphs"));
  CHECK_THAT(unavailable.out, Contains("graph breaks none"));
  CHECK_THAT(unavailable.err, Contains("trainc: error: torch_compile_backend: cudagraphs"));
  // A dump directory under a file, or of blanks, is refused before anything is planned.
  const std::string file = dir.write("a_file", "x");
  CommandResult dump = run_trainc("explain --config " + gpt_config(dir) + " --dump-dir " + file + "/dumps");
  CHECK(dump.exit_code == 2);
  CHECK_THAT(dump.err, Contains("--dump-dir: " + file + "/dumps lies under " + file + ", which is not a directory"));
  dump = run_trainc("explain --config " + gpt_config(dir) + " --dump-dir ' '");
  CHECK(dump.exit_code == 2);
  CHECK_THAT(dump.err, Contains("--dump-dir: got only blanks, expected a directory"));
}
