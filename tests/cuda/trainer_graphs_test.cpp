// On a CUDA GPU, through the real binary: a small GPT trained with whole-step CUDA graphs over
// eager autograd (backend cudagraphs), whose steps start on the device (train/device_step_start:
// the learning rate from a table of the warmup-then-cosine schedule, the step counts advanced by
// the graph's first node, the loss tracked inside the graph), against the same run eager, against
// the same graphs with the learning rate written before each replay (switch device_step_start
// off), and resumed from its middle checkpoint. float32 with TF32 off: the graphs replay eager's
// kernels, so the logged losses agree within 1e-5, and the resumed run ends with the weights of the
// run it resumed within 1e-6. A learning rate read from the wrong entry of the
// table, or a step count advanced twice or not at all, moves them by far more. A run of more steps
// than the table holds at once takes the same rates. And a run whose loss becomes NaN names the
// same step under graphs as eagerly.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "support/posix_scratch_dir.h"
#include "support/posix_trainc_runs.h"
#include "support/scripted_classifier.h"

using Catch::Matchers::Contains;
using namespace trainc::test;

namespace {

struct Scratch : PosixScratchDir {
  Scratch() : PosixScratchDir("trainc-cuda-trainer") {}
};

const char* const kConfig =
    "model: {name: gpt, vocab_size: 97, n_layer: 2, n_head: 2, n_embd: 64, block_size: 32, dropout: 0.0}\n"
    "data: {kind: synthetic, num_samples: 512, validation_split: 0.0}\n"
    "learning_rate: 0.003\nwarmup_steps: 4\nlr_scheduler_type: cosine\nweight_decay: 0.1\ntf32: false\n"
    "per_device_train_batch_size: 8\nlogging_steps: 1\nmax_steps: 24\nsave_steps: 12\n";

void write_config(const Scratch& scratch, const char* text = kConfig) { write_text_file(scratch.file("run.yaml"), text); }

// The runs both tests below compare, each required to succeed, in `scratch`: under `graphs`, each
// step started on the device ("started"), the same with the rate written before each replay
// ("written"), and "started" resumed from its checkpoint at `resume_step` ("resumed"). Returns
// the output of "started".
std::string run_started_written_resumed(const Scratch& scratch, const std::string& graphs, int resume_step) {
  const TraincRun started = run_trainc_in(scratch, "started", graphs);
  INFO(started.out);
  REQUIRE(started.exit_code == 0);
  const TraincRun written = run_trainc_in(scratch, "written", graphs, "TRAINC_DISABLE_OPTIMIZATIONS=device_step_start ");
  INFO(written.out);
  REQUIRE(written.exit_code == 0);
  const std::string checkpoint = scratch.file("started/checkpoint-" + std::to_string(resume_step));
  const TraincRun resumed = run_trainc_in(scratch, "resumed", graphs + " --resume-from-checkpoint " + checkpoint);
  INFO(resumed.out);
  REQUIRE(resumed.exit_code == 0);
  return started.out;
}

}  // namespace

TEST_CASE("graphs whose steps start on the device train as eager does and resume in the middle", "[cuda][train]") {
  Scratch scratch;
  write_config(scratch);
  const std::string base = "--config " + scratch.file("run.yaml");
  const std::string graphs = base + " --torch-compile-backend cudagraphs";
  const TraincRun eager = run_trainc_in(scratch, "eager", base);
  INFO(eager.out);
  REQUIRE(eager.exit_code == 0);
  const std::string started_out = run_started_written_resumed(scratch, graphs, 12);
  CHECK_THAT(started_out, Contains("cuda graph: captured"));

  const std::vector<double> expected = logged_losses_in(scratch.file("eager/metrics.jsonl"));
  REQUIRE(expected.size() == 24);
  const double against_eager = largest_relative_difference(logged_losses_in(scratch.file("started/metrics.jsonl")), expected);
  const double against_written = largest_relative_difference(logged_losses_in(scratch.file("started/metrics.jsonl")),
                                                             logged_losses_in(scratch.file("written/metrics.jsonl")));
  // The resumed run's metrics.jsonl starts with the checkpoint's 12 records.
  const double resumed_against_eager = largest_relative_difference(logged_losses_in(scratch.file("resumed/metrics.jsonl")), expected);
  // Against the uninterrupted graphs (eager's AdamW is ATen's foreach one, a few float32 roundings a
  // step away from the graphs' kernel).
  const double weights = largest_weight_difference(scratch.file("resumed/checkpoint-24/model.pt"), scratch.file("started/checkpoint-24/model.pt"));
  // On stdout, unwrapped, for the GPU script's summary (ctest --verbose).
  std::cout << "steps started on the device: largest relative loss difference against eager " << against_eager
            << ", against the rate written before each replay " << against_written << ", resumed at step 12 against eager "
            << resumed_against_eager << " (tolerance 1e-5), its weights against the uninterrupted run's " << weights << " (tolerance 1e-6)"
            << std::endl;
  CHECK(against_eager < 1e-5);
  CHECK(against_written < 1e-5);
  CHECK(resumed_against_eager < 1e-5);
  CHECK(weights < 1e-6);
}

TEST_CASE("a NaN loss under graphs whose steps start on the device names the step eager names", "[cuda][train]") {
  Scratch scratch;
  write_config(scratch);
  // Updates of about 1e30 from the first step on: the next step's logits overflow.
  const std::string base = "--config " + scratch.file("run.yaml") + " --learning-rate 1e30 --warmup-steps 0";
  const TraincRun eager = run_trainc_in(scratch, "eager", base);
  const TraincRun started = run_trainc_in(scratch, "started", base + " --torch-compile-backend cudagraphs");
  INFO(eager.out);
  INFO(started.out);
  CHECK(eager.exit_code == 1);
  CHECK(started.exit_code == 1);
  const auto named_step = [](const std::string& out) {
    const auto at = out.find("non-finite loss at step ");
    return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 24);
  };
  CHECK(named_step(eager.out) >= 2);  // a step the graph's replay made, not its warm-up
  CHECK(named_step(started.out) == named_step(eager.out));
}

TEST_CASE("graphs whose steps start on the device take the schedule's rates past the table's window", "[cuda][train]") {
  // 4,200 steps of a tiny GPT: past the 4,096 steps the device's table of rates holds at once, so
  // the trainer refills it twice between replays (train/device_step_start), at steps 2,048 and
  // 4,096, and twice again in the run resumed at step 2,000. A rate read from a slot not yet
  // refilled (at step 4,096, warm-up's 0) would part these runs from the one whose rate is written
  // before each replay; they replay the same kernels, so they agree within rounding (0 on an H200).
  Scratch scratch;
  write_config(scratch,
               "model: {name: gpt, vocab_size: 97, n_layer: 1, n_head: 2, n_embd: 32, block_size: 16, dropout: 0.0}\n"
               "data: {kind: synthetic, num_samples: 512, validation_split: 0.0}\n"
               "learning_rate: 0.003\nwarmup_steps: 100\nlr_scheduler_type: linear\ntf32: false\n"
               "per_device_train_batch_size: 8\nlogging_steps: 50\nmax_steps: 4200\nsave_steps: 2000\n");
  const std::string graphs = "--config " + scratch.file("run.yaml") + " --torch-compile-backend cudagraphs";
  run_started_written_resumed(scratch, graphs, 2000);  // resumed, the table starts from the checkpoint's step

  const std::vector<double> expected = logged_losses_in(scratch.file("written/metrics.jsonl"));
  REQUIRE(expected.size() == 84);
  const double losses = largest_relative_difference(logged_losses_in(scratch.file("started/metrics.jsonl")), expected);
  const double weights =
      largest_weight_difference(scratch.file("started/checkpoint-4200/model.pt"), scratch.file("written/checkpoint-4200/model.pt"));
  const double resumed_weights =
      largest_weight_difference(scratch.file("resumed/checkpoint-4200/model.pt"), scratch.file("started/checkpoint-4200/model.pt"));
  // On stdout, unwrapped, for the GPU script's summary (ctest --verbose).
  std::cout << "4,200 steps started on the device against the rate written before each replay: largest relative loss difference "
            << losses << ", weights " << weights << ", resumed at step 2,000 " << resumed_weights << " (tolerance 1e-6)" << std::endl;
  CHECK(losses < 1e-6);
  CHECK(weights < 1e-6);
  CHECK(resumed_weights < 1e-6);
}

// Trains 12 steps of `module` on 64 rows whose first feature takes both signs; writes the config.
void write_classifier_config(const Scratch& scratch, const std::string& module) {
  const std::string rows = write_classifier_rows(scratch);
  write_config(scratch, ("model: {name: torchscript, path: " + module + ", num_classes: 3}\n"
                         "data: {kind: csv, train_path: " + rows + "}\n"
                         "per_device_train_batch_size: 8\neval_strategy: 'no'\nsave_strategy: 'no'\nmax_steps: 12\n"
                         "logging_steps: 1\nlearning_rate: 0.01\ntf32: false\n")
                            .c_str());
}

TEST_CASE("a TorchScript forward that reads a value on the host trains without CUDA graphs, as eager does", "[cuda][train]") {
  // A scripted branch on the data's values (aten::Bool) waits for the GPU inside the step, which a
  // capture cannot record: backend cudagraphs and mode reduce-overhead run the step without graphs,
  // with a warning naming the read, and train as eager does; with torch_compile_fullgraph they are
  // refused before anything is written, and explain shows the plan before it refuses.
  Scratch scratch;
  write_classifier_config(scratch, scripted_classifier(scratch, "branch", "        if bool(x[0, 0] > 0):\n"
                                                                          "            return y\n"
                                                                          "        return -y\n"));
  const std::string base = "--config " + scratch.file("run.yaml");
  const TraincRun eager = run_trainc_in(scratch, "eager", base);
  INFO(eager.out);
  REQUIRE(eager.exit_code == 0);
  const std::vector<double> expected = logged_losses_in(scratch.file("eager/metrics.jsonl"));
  REQUIRE(expected.size() == 12);
  for (const std::string graphs : {"--torch-compile-backend cudagraphs", "--torch-compile-mode reduce-overhead"}) {
    INFO(graphs);
    const TraincRun run = run_trainc_in(scratch, "graphs", base + " " + graphs + " --overwrite-output-dir");
    INFO(run.out);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("the forward of model.path " + scratch.file("branch.pt") +
                                 " reads a tensor's value on the host (aten::Bool at " + scratch.file("branch.py") + ":"));
    CHECK_THAT(run.out, Contains("the step runs without CUDA graphs"));
    CHECK_THAT(run.out, Contains(", without CUDA graphs"));
    CHECK_THAT(run.out, !Contains("cuda graph: captured"));
    CHECK(largest_relative_difference(logged_losses_in(scratch.file("graphs/metrics.jsonl")), expected) < 1e-6);
    const TraincRun full = run_trainc_in(scratch, "full", base + " " + graphs + " --torch-compile-fullgraph");
    INFO(full.out);
    CHECK(full.exit_code == 2);
    CHECK_THAT(full.out, Contains("torch_compile_fullgraph: true with torch_compile_") && Contains("(aten::Bool at "));
    CHECK(std::system(("test -e " + scratch.file("full")).c_str()) != 0);  // the output directory was never made
    const TraincRun explained = run_trainc_in(scratch, "explained", "explain " + base + " " + graphs + " --torch-compile-fullgraph");
    INFO(explained.out);
    CHECK(explained.exit_code == 2);
    CHECK_THAT(explained.out, Contains("aten::Bool (reads a tensor's value on the host") &&
                                  Contains("backend      refused: torch_compile_fullgraph: true with torch_compile_") &&
                                  Contains("trainc: error: torch_compile_fullgraph: true with torch_compile_"));
  }
}

TEST_CASE("a TorchScript forward that counts a result or copies to the host declines the graphs it would break", "[cuda][train]") {
  // nonzero waits for the GPU to count its result: no capture holds it, under either setting. A
  // copy to the host waits too, but only an eager step makes it: backend cudagraphs, or a step the
  // planner breaks on (a switch of autograd). A compiled program keeps the values on the GPU, so
  // reduce-overhead captures the step.
  Scratch scratch;
  const std::string sized = scripted_classifier(scratch, "sized", "        return y + 0.0 * torch.nonzero(x > 0).sum()\n");
  const std::string copied = scripted_classifier(scratch, "copied", "        return y + 0.0 * x.cpu().sum().to(y.device)\n");
  const std::string switched = scripted_classifier(scratch, "switched", "        with torch.no_grad():\n"
                                                                        "            s = x.cpu().sum().to(y.device)\n"
                                                                        "        return y + 0.0 * s\n");
  const std::string sized_words = "makes a tensor sized by its input's values (aten::nonzero at ";
  const std::string copy_words = "copies a tensor to the host (aten::cpu at ";
  struct Case {
    std::string graphs, declined;  // declined: the warning's words, or "" where the graphs are captured
  };
  const std::vector<std::pair<std::string, std::vector<Case>>> modules = {
      {sized, {{"--torch-compile-backend cudagraphs", sized_words}, {"--torch-compile-mode reduce-overhead", sized_words}}},
      {copied, {{"--torch-compile-backend cudagraphs", copy_words}, {"--torch-compile-mode reduce-overhead", ""}}},
      {switched, {{"--torch-compile-mode reduce-overhead", copy_words}}}};
  for (const auto& [module, cases] : modules) {
    INFO(module);
    write_classifier_config(scratch, module);
    const std::string base = "--config " + scratch.file("run.yaml");
    REQUIRE(run_trainc_in(scratch, "eager", base + " --overwrite-output-dir").exit_code == 0);
    const std::vector<double> expected = logged_losses_in(scratch.file("eager/metrics.jsonl"));
    REQUIRE(expected.size() == 12);
    for (const Case& c : cases) {
      INFO(c.graphs);
      const TraincRun run = run_trainc_in(scratch, "graphs", base + " " + c.graphs + " --overwrite-output-dir");
      INFO(run.out);
      REQUIRE(run.exit_code == 0);
      if (c.declined.empty()) {
        CHECK_THAT(run.out, Contains("cuda graph: captured") && !Contains("without CUDA graphs"));
      } else {
        CHECK_THAT(run.out, Contains("the forward of model.path " + module + " " + c.declined + module.substr(0, module.size() - 3) + ".py:"));
        CHECK_THAT(run.out, Contains(", without CUDA graphs") && !Contains("cuda graph: captured"));
      }
      CHECK(largest_relative_difference(logged_losses_in(scratch.file("graphs/metrics.jsonl")), expected) < 1e-5);
    }
  }
}

TEST_CASE("a TorchScript forward whose capture fails stops the run, naming the cause", "[cuda][train]") {
  // A boolean mask's index (x[x > 0]) counts the mask's true values on the host, but nothing in a
  // scripted graph tells a boolean index from an integer one: the capture fails, and the run stops
  // at the capture with CUDA's error in one line, not ATen's backtrace.
  Scratch scratch;
  write_classifier_config(scratch, scripted_classifier(scratch, "masked", "        return y + 0.0 * x[x > 0].sum()\n"));
  const std::string base = "--config " + scratch.file("run.yaml");
  REQUIRE(run_trainc_in(scratch, "eager", base).exit_code == 0);
  const TraincRun run = run_trainc_in(scratch, "graphs", base + " --torch-compile-backend cudagraphs");
  INFO(run.out);
  CHECK(run.exit_code == 1);
  CHECK_THAT(run.out, Contains("trainc: error: CUDA graph: the step could not be captured (1 micro-batch: inputs Float[8, 5] cuda:0") &&
                          Contains("masked.pt: forward(inputs [8, 5]) failed: ") &&
                          Contains("; to train this model, set torch_compile_backend: eager"));
  CHECK_THAT(run.out, !Contains("frame #"));
}
