// On a CUDA GPU, through the real binary: fp16 autocast with dynamic loss scaling (train/loss_scaler),
// which only a GPU runs. A small GPT trained with fp16 against the same run in float32 (TF32 off)
// and against fp16 compiled by the default backend and in whole-step CUDA graphs (backend
// cudagraphs, mode reduce-overhead); its scaler state saved in each checkpoint and restored on
// resume; and, from a checkpoint whose scale is set far too high, the steps whose gradients
// overflow skipped, the scale halved at each, and the schedule held on them, as
// torch.cuda.amp.GradScaler inside Hugging Face's Trainer does, with and without CUDA graphs. And a
// scripted model whose gradients are NaN at every scale: the run stops once the scale leaves
// float32's normal range, before a checkpoint keeps it, with and without CUDA graphs.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "support/posix_scratch_dir.h"
#include "support/posix_trainc_runs.h"
#include "support/scripted_classifier.h"
#include "trainc/common/checksum.h"

using Catch::Matchers::Contains;
using namespace trainc::test;

namespace {

struct Scratch : PosixScratchDir {
  Scratch() : PosixScratchDir("trainc-cuda-fp16") {}
};

// Tokens of 97 kinds in batches of 8 x 32: each logit's loss gradient is at most 1/256 (the mean
// over 256 tokens), so at 2^28 the logits' scaled gradients alone reach about 2^20, far past fp16's
// largest value (65504). At 2^16 nothing overflowed in these runs (the first test requires it),
// and the overflow test requires a step at 2^17 or more to be finite again within 11 steps.
const char* const kConfig =
    "model: {name: gpt, vocab_size: 97, n_layer: 2, n_head: 2, n_embd: 64, block_size: 32, dropout: 0.0}\n"
    "data: {kind: synthetic, num_samples: 512, validation_split: 0.0}\n"
    "learning_rate: 0.003\nwarmup_steps: 4\nlr_scheduler_type: cosine\nweight_decay: 0.1\ntf32: false\n"
    "per_device_train_batch_size: 8\nlogging_steps: 1\nmax_steps: 24\nsave_steps: 12\n";

// The records of a run's metrics.jsonl that log a training step, by step (index 0: step 1).
std::vector<nlohmann::json> step_records(const std::string& metrics_path) {
  std::vector<nlohmann::json> records;
  std::istringstream lines(read_text_file(metrics_path));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("learning_rate")) records.push_back(record);
  }
  return records;
}

// The gradient norms a run logged at each step (unscaled, so they compare with float32's).
std::vector<double> logged_grad_norms(const std::string& metrics_path) {
  std::vector<double> norms;
  for (const nlohmann::json& record : step_records(metrics_path)) norms.push_back(record["grad_norm"].get<double>());
  return norms;
}

nlohmann::json scaler_state(const std::string& checkpoint) { return nlohmann::json::parse(read_text_file(checkpoint + "/scaler.json")); }

TraincRun required_run(const Scratch& scratch, const std::string& name, const std::string& arguments) {
  TraincRun run = run_trainc_in(scratch, name, arguments);
  INFO(run.out);
  REQUIRE(run.exit_code == 0);
  return run;
}

}  // namespace

TEST_CASE("fp16 trains as float32 does, compiled as eager, and resumes with its loss scale", "[cuda][train][fp16]") {
  Scratch scratch;
  write_text_file(scratch.file("run.yaml"), kConfig);
  const std::string base = "--config " + scratch.file("run.yaml");
  required_run(scratch, "fp32", base);
  const TraincRun fp16 = required_run(scratch, "fp16", base + " --fp16");
  CHECK_THAT(fp16.out, Contains("loss_scale 65536"));
  CHECK_THAT(fp16.out, !Contains("steps skipped"));
  required_run(scratch, "compiled", base + " --fp16 --torch-compile");
  required_run(scratch, "resumed", base + " --fp16 --resume-from-checkpoint " + scratch.file("fp16/checkpoint-12"));
  // In CUDA graphs: eager's kernels replayed, and the compiled run's programs replayed.
  for (const char* graphs : {"cudagraphs", "reduce-overhead"}) {
    const std::string flag = std::string(graphs) == "cudagraphs" ? " --torch-compile-backend cudagraphs" : " --torch-compile-mode reduce-overhead";
    const TraincRun run = required_run(scratch, graphs, base + " --fp16" + flag);
    CHECK_THAT(run.out, Contains("whole step as a CUDA graph") && Contains("cuda graph: captured"));
    CHECK(scaler_state(scratch.file(std::string(graphs) + "/checkpoint-12")) == scaler_state(scratch.file("fp16/checkpoint-12")));
  }

  const std::vector<double> fp16_losses = logged_losses_in(scratch.file("fp16/metrics.jsonl"));
  REQUIRE(fp16_losses.size() == 24);
  const double against_fp32 = largest_relative_difference(fp16_losses, logged_losses_in(scratch.file("fp32/metrics.jsonl")));
  const double compiled = largest_relative_difference(logged_losses_in(scratch.file("compiled/metrics.jsonl")), fp16_losses);
  // The norms tell what the losses cannot: AdamW's update hardly changes with the gradients' scale,
  // so gradients left scaled by 2^16 (or divided twice) would train almost alike but log norms 2^16
  // times off.
  const std::vector<double> fp16_norms = logged_grad_norms(scratch.file("fp16/metrics.jsonl"));
  const double norms_against_fp32 = largest_relative_difference(fp16_norms, logged_grad_norms(scratch.file("fp32/metrics.jsonl")));
  const double compiled_norms = largest_relative_difference(logged_grad_norms(scratch.file("compiled/metrics.jsonl")), fp16_norms);
  const double resumed = largest_weight_difference(scratch.file("resumed/checkpoint-24/model.pt"), scratch.file("fp16/checkpoint-24/model.pt"));
  const std::vector<double> compiled_losses = logged_losses_in(scratch.file("compiled/metrics.jsonl"));
  const double cudagraphs = largest_relative_difference(logged_losses_in(scratch.file("cudagraphs/metrics.jsonl")), fp16_losses);
  const double reduce_overhead = largest_relative_difference(logged_losses_in(scratch.file("reduce-overhead/metrics.jsonl")), compiled_losses);
  const double cudagraphs_norms = largest_relative_difference(logged_grad_norms(scratch.file("cudagraphs/metrics.jsonl")), fp16_norms);
  const double reduce_overhead_norms = largest_relative_difference(logged_grad_norms(scratch.file("reduce-overhead/metrics.jsonl")),
                                                                   logged_grad_norms(scratch.file("compiled/metrics.jsonl")));
  // On stdout, unwrapped, for the GPU script's summary (ctest --verbose).
  std::cout << "fp16: largest relative difference against float32: losses " << against_fp32 << ", gradient norms " << norms_against_fp32
            << "; compiled against eager: losses " << compiled << ", gradient norms " << compiled_norms
            << " (tolerances 1e-4 and 1e-2); resumed at step 12, its weights against the uninterrupted run's " << resumed
            << " (tolerance 1e-6)" << std::endl;
  // A graph replays the kernels of the run it is checked against, with the scale read from the
  // device; the captured update is trainc's AdamW kernel, where the others run ATen's. A scale
  // applied twice, or not at all, would be 2^16 off.
  std::cout << "fp16 in CUDA graphs: cudagraphs against eager: losses " << cudagraphs << ", gradient norms " << cudagraphs_norms
            << "; reduce-overhead against compiled: losses " << reduce_overhead << ", gradient norms " << reduce_overhead_norms
            << " (tolerances 1e-4, 1e-4, 1e-4 and 1e-2)" << std::endl;
  CHECK(cudagraphs < 1e-4);
  CHECK(cudagraphs_norms < 1e-4);
  CHECK(reduce_overhead < 1e-4);
  CHECK(reduce_overhead_norms < 1e-2);
  CHECK(against_fp32 < 1e-4);
  CHECK(compiled < 1e-4);
  CHECK(norms_against_fp32 < 1e-2);
  CHECK(compiled_norms < 1e-2);
  CHECK(resumed < 1e-6);
  // No step overflowed: the scale stands, and each checkpoint counts the finite steps since it last
  // changed. The resumed run counts on from the checkpoint's 12, not from 0.
  CHECK(scaler_state(scratch.file("fp16/checkpoint-12")) == nlohmann::json::parse(R"({"scale": 65536.0, "growth_tracker": 12, "skipped_steps": 0})"));
  CHECK(scaler_state(scratch.file("resumed/checkpoint-24")) == nlohmann::json::parse(R"({"scale": 65536.0, "growth_tracker": 24, "skipped_steps": 0})"));
}

TEST_CASE("fp16 skips the steps whose gradients overflow, halving the scale, and the schedule holds on them", "[cuda][train][fp16]") {
  Scratch scratch;
  write_text_file(scratch.file("run.yaml"), kConfig);
  const std::string base = "--config " + scratch.file("run.yaml") + " --fp16";
  const TraincRun fp16 = required_run(scratch, "fp16", base);
  REQUIRE_THAT(fp16.out, !Contains("steps skipped"));  // the reference rates are the schedule's own
  // Its checkpoint at step 12 with the scale set to 2^28, the manifest's checksum made to match.
  const std::string checkpoint = scratch.file("edited/checkpoint-12");
  REQUIRE(std::system(("mkdir -p " + scratch.file("edited") + " && cp -r " + scratch.file("fp16/checkpoint-12") + " " + checkpoint).c_str()) == 0);
  const double first_scale = 268435456.0;  // 2^28
  write_text_file(checkpoint + "/scaler.json", nlohmann::json({{"scale", first_scale}, {"growth_tracker", 0}, {"skipped_steps", 0}}).dump());
  auto manifest = nlohmann::json::parse(read_text_file(checkpoint + "/trainc_checkpoint.json"));
  manifest["checksums"]["scaler.json"] = trainc::file_checksum(checkpoint + "/scaler.json");
  write_text_file(checkpoint + "/trainc_checkpoint.json", manifest.dump());
  const TraincRun overflow = required_run(scratch, "overflow", base + " --resume-from-checkpoint " + checkpoint);
  // The same in CUDA graphs: the skipped steps' warm-ups are warmed up again, later ones replayed.
  const TraincRun overflow_graphs =
      required_run(scratch, "overflow-graphs", base + " --torch-compile-backend cudagraphs --resume-from-checkpoint " + checkpoint);
  CHECK_THAT(overflow_graphs.out, Contains("cuda graph: captured"));

  const nlohmann::json saved = scaler_state(scratch.file("overflow/checkpoint-24"));
  const int64_t skipped = saved["skipped_steps"].get<int64_t>();
  std::cout << "fp16 from a loss scale of 2^28: " << skipped << " of 12 steps skipped, the scale now " << saved["scale"] << std::endl;
  CHECK(skipped >= 1);
  CHECK(skipped < 12);
  CHECK(saved["scale"].get<double>() == std::ldexp(first_scale, -static_cast<int>(skipped)));  // halved at each, never grown
  CHECK_THAT(overflow.out, Contains("fp16: " + std::to_string(skipped) + " of 24 steps skipped for overflowed gradients"));

  // Each step's logged scale tells how many steps had been skipped by then; the step's logged rate
  // must be the uninterrupted run's that many steps earlier.
  const std::vector<nlohmann::json> reference = step_records(scratch.file("fp16/metrics.jsonl"));
  const std::vector<nlohmann::json> records = step_records(scratch.file("overflow/metrics.jsonl"));
  REQUIRE(reference.size() == 24);
  REQUIRE(records.size() == 24);  // the checkpoint's 12, then this run's
  CHECK(records[12]["grad_norm"].is_null());  // step 13 overflowed: its norm was not finite
  int64_t skipped_by_now = 0;
  int64_t last_skipped_step = 12;
  for (int64_t step = 13; step <= 24; ++step) {
    const nlohmann::json& record = records[static_cast<std::size_t>(step - 1)];
    INFO("step " << step << ": " << record.dump());
    const double scale = record["loss_scale"].get<double>();
    const int64_t before = skipped_by_now;
    skipped_by_now = std::llround(std::log2(first_scale / scale));
    REQUIRE(std::ldexp(first_scale, -static_cast<int>(skipped_by_now)) == scale);
    REQUIRE((skipped_by_now == before || skipped_by_now == before + 1));  // at most one halving a step, never a growth
    if (skipped_by_now > before) last_skipped_step = step;
    CHECK(record["learning_rate"].get<double>() == reference[static_cast<std::size_t>(step - skipped_by_now - 1)]["learning_rate"].get<double>());
  }
  CHECK(skipped_by_now == skipped);
  CHECK(saved["growth_tracker"].get<int64_t>() == 24 - last_skipped_step);  // finite steps since the last halving
  // In graphs: the same steps skipped, the same scales and rates logged, and eager's losses.
  CHECK(scaler_state(scratch.file("overflow-graphs/checkpoint-24")) == saved);
  CHECK_THAT(overflow_graphs.out, Contains("fp16: " + std::to_string(skipped) + " of 24 steps skipped for overflowed gradients"));
  const std::vector<nlohmann::json> graph_records = step_records(scratch.file("overflow-graphs/metrics.jsonl"));
  REQUIRE(graph_records.size() == 24);
  for (std::size_t i = 12; i < 24; ++i) {
    INFO("step " << i + 1 << ": " << graph_records[i].dump() << " against " << records[i].dump());
    CHECK(graph_records[i]["loss_scale"] == records[i]["loss_scale"]);
    CHECK(graph_records[i]["learning_rate"] == records[i]["learning_rate"]);
    CHECK(graph_records[i]["grad_norm"].is_null() == records[i]["grad_norm"].is_null());
    CHECK(std::abs(graph_records[i]["loss"].get<double>() - records[i]["loss"].get<double>()) <= 1e-4 * std::abs(records[i]["loss"].get<double>()));
  }
  // The control: the schedule moves between those steps, so a rate taken from the wrong step differs.
  CHECK(reference[12]["learning_rate"] != reference[12 - skipped]["learning_rate"]);
}

TEST_CASE("fp16 stops a run whose gradients no loss scale makes finite, before a checkpoint keeps that scale", "[cuda][train][fp16]") {
  // sqrt(y * 0) adds 0 to the logits, but its backward is inf times 0: every step's gradients are
  // NaN while its loss stays finite. Each step then halves the scale, from 2^16 to 2^-126 at step
  // 142; step 143 takes it below float32's normal range, where the run must stop. A save is due
  // at step 143 too (every 11 steps): it must not happen, and the last good checkpoint is 132's.
  Scratch scratch;
  const std::string module = scripted_classifier(scratch, "nan_backward", "        return y + torch.sqrt(y * 0.0)\n");
  const std::string rows = write_classifier_rows(scratch);
  write_text_file(scratch.file("run.yaml"), "model: {name: torchscript, path: " + module + ", num_classes: 3}\n"
                                            "data: {kind: csv, train_path: " + rows + "}\n"
                                            "per_device_train_batch_size: 8\neval_strategy: 'no'\nmax_steps: 200\n"
                                            "save_steps: 11\nlogging_steps: 10\nlearning_rate: 0.01\ntf32: false\nfp16: true\n");
  const std::string base = "--config " + scratch.file("run.yaml");
  const std::string stop = "fp16: gradients not finite at step 143 and the loss scale halved to 5.88e-39, below float32's normal range";

  const TraincRun stopped = run_trainc_in(scratch, "stopped", base);
  INFO(stopped.out);
  CHECK(stopped.exit_code == 1);
  CHECK_THAT(stopped.out, Contains(stop) && Contains("(143 steps skipped in all)"));
  CHECK_THAT(stopped.out, Contains("Last good checkpoint: " + scratch.file("stopped/checkpoint-132")));
  CHECK_THAT(stopped.out, !Contains("non-finite loss"));
  CHECK(std::system(("test -e " + scratch.file("stopped/checkpoint-143")).c_str()) != 0);
  const nlohmann::json saved = scaler_state(scratch.file("stopped/checkpoint-132"));
  CHECK(saved["scale"].get<double>() == std::ldexp(1.0, 16 - 132));
  CHECK(saved["skipped_steps"].get<int64_t>() == 132);

  // In CUDA graphs, where every step's skipped update leaves its signature warming up again.
  const TraincRun graphs = run_trainc_in(scratch, "graphs", base + " --torch-compile-backend cudagraphs");
  INFO(graphs.out);
  CHECK(graphs.exit_code == 1);
  CHECK_THAT(graphs.out, Contains("whole step as a CUDA graph"));
  CHECK_THAT(graphs.out, Contains(stop) && Contains("(143 steps skipped in all)"));
  CHECK_THAT(graphs.out, Contains("Last good checkpoint: " + scratch.file("graphs/checkpoint-132")));

  // Resumed, the scale goes on from the checkpoint's: the run stops at the same step.
  const TraincRun resumed = run_trainc_in(scratch, "resumed", base + " --resume-from-checkpoint " + scratch.file("stopped/checkpoint-132"));
  INFO(resumed.out);
  CHECK(resumed.exit_code == 1);
  CHECK_THAT(resumed.out, Contains(stop) && Contains("(143 steps skipped in all)"));  // the checkpoint's 132 kept
  CHECK_THAT(resumed.out, Contains("Last good checkpoint: " + scratch.file("stopped/checkpoint-132")));
  CHECK(std::system(("test -e " + scratch.file("resumed/checkpoint-143")).c_str()) != 0);
}
