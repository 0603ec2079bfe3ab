// Checkpoints: exact resume, interrupts, kills in the middle of a save, and checkpoints that do
// not fit or are damaged.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <thread>

#include "support/checkpoints.h"
#include "support/command.h"
#include "support/metrics.h"
#include "trainc/common/checksum.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A small GPT with dropout, so resuming must also restore the RNG state to match.
std::string resume_config(const ScratchDir& dir, int64_t max_steps, int64_t save_steps) {
  return dir.write("run.yaml",
                   "model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 16, vocab_size: 64, dropout: 0.1}\n"
                   "data: {kind: synthetic, num_samples: 40}\n"
                   "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\nlearning_rate: 3e-3\n"
                   "lr_scheduler_type: cosine\nwarmup_steps: 2\nlogging_steps: 1\n"
                   "max_steps: " + std::to_string(max_steps) + "\nsave_steps: " + std::to_string(save_steps) + "\n");
}

// Starts trainc in the background; returns its pid.
pid_t spawn_trainc(const std::string& arguments, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const std::string command = "exec " + std::string(TRAINC_BINARY) + " " + arguments + " >" + log_path + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("a run resumed at step k ends with weights bit-identical to an uninterrupted run", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = resume_config(dir, 16, 6);  // epochs of 5 steps: resuming mid-epoch
  const CommandResult full = run_trainc("--config " + config + " --output-dir " + dir.file("full"));
  INFO(full.out << full.err);
  REQUIRE(full.exit_code == 0);

  fs::create_directories(dir.file("resumed"));
  fs::copy(dir.file("full/checkpoint-6"), dir.file("resumed/checkpoint-6"), fs::copy_options::recursive);
  const CommandResult resumed = run_trainc("--config " + config + " --output-dir " + dir.file("resumed") +
                                           " --resume-from-checkpoint true");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resumed from"));
  CHECK(checkpoints_identical(dir.file("full/checkpoint-16"), dir.file("resumed/checkpoint-16")));
  // The control: starting over (no resume) from different weights is not identical.
  CHECK_FALSE(checkpoints_identical(dir.file("full/checkpoint-12"), dir.file("full/checkpoint-16")));
  // metrics.jsonl continues the history of the checkpoint instead of repeating it.
  CHECK(read_text(dir.file("resumed/metrics.jsonl")).find("\"step\":7") != std::string::npos);
}

TEST_CASE("SIGINT finishes the step, saves, exits 130, and the run resumes to the same weights", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = resume_config(dir, 400, 1000);
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("full") + " --max-steps 400").exit_code == 0);

  const pid_t pid = spawn_trainc("--config " + config + " --output-dir " + dir.file("stopped"), dir.file("log"));
  REQUIRE(wait_for([&] { return read_text(dir.file("log")).find("step 20/") != std::string::npos; }, 60));
  kill(pid, SIGINT);
  const int code = wait_exit_code(pid);
  INFO(read_text(dir.file("log")));
  REQUIRE(code == 130);
  CHECK_THAT(read_text(dir.file("log")), Contains("resume with --resume-from-checkpoint true"));
  const CommandResult resumed = run_trainc("--config " + config + " --output-dir " + dir.file("stopped") +
                                           " --resume-from-checkpoint true");
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(checkpoints_identical(dir.file("full/checkpoint-400"), dir.file("stopped/checkpoint-400")));
}

TEST_CASE("SIGTERM saves and exits 143 and a second SIGINT exits at once without saving", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = resume_config(dir, 100000, 100000);
  pid_t pid = spawn_trainc("--config " + config + " --output-dir " + dir.file("term"), dir.file("log"));
  REQUIRE(wait_for([&] { return read_text(dir.file("log")).find("step 5/") != std::string::npos; }, 60));
  kill(pid, SIGTERM);
  CHECK(wait_exit_code(pid) == 143);
  CHECK(std::any_of(fs::directory_iterator(dir.file("term")), fs::directory_iterator(), [](const fs::directory_entry& entry) {
    return entry.path().filename().string().rfind("checkpoint-", 0) == 0 && fs::exists(entry.path() / "trainc_checkpoint.json");
  }));
  CHECK_THAT(read_text(dir.file("log")), Contains("; resume with --resume-from-checkpoint true"));
  // Weights only: the message does not offer a resume that would be refused.
  pid = spawn_trainc("--config " + config + " --output-dir " + dir.file("weights") + " --save-only-model", dir.file("log_weights"));
  REQUIRE(wait_for([&] { return read_text(dir.file("log_weights")).find("step 5/") != std::string::npos; }, 60));
  kill(pid, SIGTERM);
  CHECK(wait_exit_code(pid) == 143);
  CHECK_THAT(read_text(dir.file("log_weights")), Contains("its checkpoint holds the weights only (save_only_model), so the run cannot resume from it"));
  CHECK_THAT(read_text(dir.file("log_weights")), !Contains("resume with"));

  // Steps long enough (a few hundred ms) that the second SIGINT lands while the first one waits.
  const std::string slow = dir.write("slow.yaml",
                                     "model: {name: gpt, n_layer: 4, n_head: 4, n_embd: 256, block_size: 128, vocab_size: 256}\n"
                                     "data: {kind: synthetic, num_samples: 64}\nper_device_train_batch_size: 16\n"
                                     "max_steps: 100000\nsave_steps: 100000\nlogging_steps: 1\n");
  pid = spawn_trainc("--config " + slow + " --output-dir " + dir.file("twice"), dir.file("log2"));
  REQUIRE(wait_for([&] { return read_text(dir.file("log2")).find("step 1/") != std::string::npos; }, 60));
  kill(pid, SIGINT);
  REQUIRE(wait_for([&] { return read_text(dir.file("log2")).find("finishing this step") != std::string::npos; }, 10));
  kill(pid, SIGINT);
  CHECK(wait_exit_code(pid) == 130);
  CHECK_THAT(read_text(dir.file("log2")), Contains("second interrupt: exiting now without saving"));
  CHECK_THAT(read_text(dir.file("log2")), !Contains("saved"));
}

TEST_CASE("a kill during saves never leaves a broken checkpoint-N", "[e2e][checkpoint]") {
  ScratchDir dir;
  // A save every step, on a model large enough that a save takes a while.
  const std::string config =
      dir.write("run.yaml",
                "model: {name: mlp, input_size: 64, hidden_sizes: [1024, 1024], num_classes: 4}\n"
                "data: {kind: synthetic, num_samples: 4096}\nmax_steps: 100000\nsave_steps: 1\nsave_total_limit: 3\n");
  for (int attempt = 0; attempt < 4; ++attempt) {
    const pid_t pid = spawn_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                       (attempt == 0 ? " --overwrite-output-dir" : " --resume-from-checkpoint true"),
                                   dir.file("log"));
    const int64_t wait_ms = 200 + 137 * attempt;
    REQUIRE(wait_for([&] { return read_text(dir.file("log")).find("saved") != std::string::npos; }, 60));
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    kill(pid, SIGKILL);
    wait_exit_code(pid);
    // Every checkpoint-N present is complete and loads; temporary directories never count.
    for (const auto& entry : fs::directory_iterator(dir.file("out"))) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("checkpoint-", 0) != 0) continue;
      INFO(name);
      CHECK(fs::exists(entry.path() / "trainc_checkpoint.json"));
      CHECK(fs::exists(entry.path() / "optimizer.pt"));
      CHECK(checkpoints_identical(entry.path().string(), entry.path().string()));
    }
  }
  const CommandResult resumed = run_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                           " --resume-from-checkpoint true --max-steps 1");
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("checkpoints that do not fit or are damaged get a clear error and stay untouched", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml",
                                       "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                                       "data: {kind: synthetic, num_samples: 64}\nmax_steps: 4\nsave_steps: 2\n"
                                       "eval_strategy: no\nper_device_train_batch_size: 8\n");
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("out")).exit_code == 0);
  const std::string checkpoint = dir.file("out/checkpoint-4");

  SECTION("a different model") {
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                            " --model.hidden-sizes 32 --resume-from-checkpoint " + checkpoint);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/model.pt: tensor 'layers.0.weight' has shape [16, 8], the model expects [32, 8]"));
  }
  SECTION("a truncated weights file") {
    const std::string weights = read_text(checkpoint + "/model.pt");
    std::ofstream(checkpoint + "/model.pt", std::ios::binary) << weights.substr(0, weights.size() / 2);
    CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint true");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/model.pt: damaged: its contents do not match the checksum saved with it"));
    CHECK(fs::exists(dir.file("out/checkpoint-2/model.pt")));  // nothing was overwritten
    auto info = nlohmann::json::parse(read_text(checkpoint + "/trainc_checkpoint.json"));
    info.erase("checksums");  // as an older trainc wrote them: the archive reader's own check
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
    result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint true");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/model.pt: cannot read (truncated or not written by trainc)"));
  }
  SECTION("a newer format version") {
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << R"({"format": "trainc-checkpoint", "format_version": 99})";
    const CommandResult result =
        run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + checkpoint);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains("checkpoint format version 99, this trainc reads version 1"));
  }
  SECTION("a larger model's checkpoint") {
    // Hidden sizes [16, 3] hold the tensors of [16] with the same shapes, and one more layer.
    REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("larger") + " --model.hidden-sizes 16,3").exit_code == 0);
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " +
                                            dir.file("larger/checkpoint-4"));
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(dir.file("larger/checkpoint-4") + "/model.pt: tensor 'layers.4.weight' is not in the model"));
  }
  SECTION("a flipped bit, or a file copied over another") {
    std::string weights = read_text(checkpoint + "/model.pt");
    weights[weights.size() / 2] ^= 0x10;  // inside a tensor's bytes: LibTorch reads it without a word
    std::ofstream(checkpoint + "/model.pt", std::ios::binary) << weights;
    CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + checkpoint);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/model.pt: damaged: its contents do not match the checksum saved with it"));
    const std::string earlier = dir.file("out/checkpoint-2");
    fs::copy_file(earlier + "/model.pt", earlier + "/rng_state.pt", fs::copy_options::overwrite_existing);
    result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + earlier);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(earlier + "/rng_state.pt: damaged"));
  }
  SECTION("another optimizer's state") {
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --optim sgd --resume-from-checkpoint true");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + ": saved with optim adamw_torch, whose state does not fit this run's optim sgd"));
  }
  SECTION("a negative step, in a checkpoint without checksums") {
    // Without checksums (as an older trainc wrote them), the files are read as they are.
    auto info = nlohmann::json::parse(read_text(checkpoint + "/trainc_checkpoint.json"));
    info.erase("checksums");
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
    std::string state = read_text(checkpoint + "/trainer_state.json");
    const std::size_t at = state.find("\"global_step\": 4");
    REQUIRE(at != std::string::npos);
    state.replace(at, 16, "\"global_step\": -3");
    std::ofstream(checkpoint + "/trainer_state.json") << state;
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + checkpoint);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/trainer_state.json: global_step is -3, expected a whole number >= 0"));
  }
  SECTION("another model's optimizer state, its checksum in the manifest") {
    // Only the moments' shapes tell: LibTorch loads them as they are, and the first step failed with ATen's words.
    REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("wide") + " --model.hidden-sizes 32").exit_code == 0);
    fs::copy_file(dir.file("wide/checkpoint-4/optimizer.pt"), checkpoint + "/optimizer.pt", fs::copy_options::overwrite_existing);
    auto info = nlohmann::json::parse(read_text(checkpoint + "/trainc_checkpoint.json"));
    info["checksums"]["optimizer.pt"] = nlohmann::json::parse(read_text(dir.file("wide/checkpoint-4/trainc_checkpoint.json")))["checksums"]["optimizer.pt"];
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 6 --resume-from-checkpoint " + checkpoint);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/optimizer.pt: optimizer state exp_avg of shape [32, 8] for a parameter of shape [16, 8]"));
  }
  SECTION("a manifest that lacks a file's checksum, and a damaged run config") {
    std::string weights = read_text(checkpoint + "/model.pt");
    weights[weights.size() / 2] ^= 0x10;
    std::ofstream(checkpoint + "/model.pt", std::ios::binary) << weights;
    const std::string manifest = read_text(checkpoint + "/trainc_checkpoint.json");
    for (const std::string& checksums : {R"({})", R"([1])", R"({"model.pt": 5})"}) {
      auto info = nlohmann::json::parse(manifest);
      info["checksums"] = nlohmann::json::parse(checksums);
      std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
      const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + checkpoint);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains(checkpoint + "/trainc_checkpoint.json: damaged: \"checksums\" holds no checksum of model.pt"));
    }
    const std::string earlier = dir.file("out/checkpoint-2");
    std::ofstream(earlier + "/run_config.yaml") << "max_steps: 3\n";
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + earlier);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(earlier + "/run_config.yaml: damaged"));
  }
  SECTION("fields of the wrong type, or too large, in the manifest and the trainer state") {
    auto info = nlohmann::json::parse(read_text(checkpoint + "/trainc_checkpoint.json"));
    const auto resume = [&] {
      return run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint " + checkpoint);
    };
    const std::vector<std::pair<std::string, std::string>> manifest_fields = {
        {"format_version", R"("1")"}, {"format_version", "99999999999999999999999"}, {"optim", "5"}, {"save_only_model", R"("no")"}};
    for (const auto& [key, value] : manifest_fields) {
      auto damaged = info;
      damaged[key] = nlohmann::json::parse(value);
      std::ofstream(checkpoint + "/trainc_checkpoint.json") << damaged.dump();
      const CommandResult result = resume();
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains(checkpoint + "/trainc_checkpoint.json: damaged: " + key + " is " + damaged[key].dump() + ", expected"));
    }
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << "[]";
    CHECK_THAT(resume().err, Contains(checkpoint + "/trainc_checkpoint.json: not a trainc checkpoint (expected a JSON object)"));
    info.erase("checksums");  // so that trainer_state.json may be edited
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
    const auto state = nlohmann::json::parse(read_text(checkpoint + "/trainer_state.json"));
    const std::vector<std::pair<std::string, std::string>> state_fields = {
        {"global_step", "1e30"}, {"global_step", R"("4")"}, {"log_history", "5"}, {"best_metric", R"("high")"},
        {"best_model_checkpoint", R"("")"}};
    for (const auto& [key, value] : state_fields) {
      auto damaged = state;
      damaged[key] = nlohmann::json::parse(value);
      std::ofstream(checkpoint + "/trainer_state.json") << damaged.dump();
      const CommandResult result = resume();
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains(checkpoint + "/trainer_state.json: " + key + " is "));
      CHECK_THAT(result.out, !Contains("resumed from"));
    }
    auto damaged = state;
    damaged["log_history"] = nlohmann::json::parse(R"([{"loss": 1.5, "epoch": 0.5}])");  // the run reads each record's step back
    std::ofstream(checkpoint + "/trainer_state.json") << damaged.dump();
    CHECK_THAT(resume().err, Contains(checkpoint + "/trainer_state.json: log_history[0]: no step"));
  }
  SECTION("a checkpoint named for another step than it holds") {
    // resume_from_checkpoint: true picks the newest by name: checkpoint-9 holding step 4 would resume step 4.
    fs::copy(checkpoint, dir.file("out/checkpoint-9"), fs::copy_options::recursive);
    for (const std::string& resume : {std::string("true"), dir.file("out/checkpoint-9/")}) {  // a trailing slash names it too
      const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 12 --resume-from-checkpoint " + resume);
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains(dir.file("out/checkpoint-9") + ": named for step 9, but its trainer_state.json holds global_step 4"));
    }
  }
  SECTION("a newer checkpoint cut short is passed over, with a warning") {
    fs::remove(checkpoint + "/trainc_checkpoint.json");
    const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint true");
    CHECK(result.exit_code == 0);
    CHECK_THAT(result.out + result.err, Contains("skipping " + checkpoint + ", an incomplete checkpoint"));
    CHECK_THAT(result.out, Contains("resumed from " + dir.file("out/checkpoint-2") + " at step 2"));
  }
  SECTION("no checkpoint to resume") {
    const CommandResult result =
        run_trainc("--config " + config + " --output-dir " + dir.file("empty") + " --resume-from-checkpoint true");
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains("holds no complete checkpoint"));
  }
}

TEST_CASE("an MLP's checkpoint loads with model.dropout changed, which numbers its layers apart", "[e2e][checkpoint]") {
  // Dropout changes no tensor, but an MLP with it has a dropout module after each activation: its
  // Linears are layers.0/3/6/9 where without it they are layers.0/2/4/6. Resumed with the setting
  // the other way round and a learning rate of 0, the resumed run's own evaluation (step 5) is of
  // the checkpoint's weights: the loss of step 4's. The middle layers all have one shape, so a
  // Linear read under another's name would load and evaluate differently.
  ScratchDir dir;
  const std::string config = dir.write("run.yaml",
                                       "model: {name: mlp, input_size: 8, hidden_sizes: [16, 16, 16], num_classes: 3}\n"
                                       "data: {kind: synthetic, num_samples: 64, validation_split: 0.25}\n"
                                       "max_steps: 4\nsave_steps: 4\neval_strategy: steps\neval_steps: 4\nper_device_train_batch_size: 8\n");
  const auto eval_losses = [](const std::string& output_dir) {  // by step
    std::map<int64_t, double> found;
    for (const nlohmann::json& record : read_metrics(output_dir)) {
      if (record.contains("eval_loss")) found[record["step"].get<int64_t>()] = record["eval_loss"].get<double>();
    }
    return found;
  };
  for (const auto& [saved_with, resumed_with] : {std::pair<std::string, std::string>{"0.1", "0"}, {"0", "0.1"}}) {
    INFO("saved with dropout " << saved_with << ", resumed with " << resumed_with);
    const std::string saved = dir.file("saved-" + saved_with), resumed = dir.file("resumed-" + saved_with);
    const CommandResult first = run_trainc("--config " + config + " --model.dropout " + saved_with + " --output-dir " + saved);
    INFO(first.err);
    REQUIRE(first.exit_code == 0);
    const std::map<int64_t, double> expected = eval_losses(saved);
    REQUIRE(expected.count(4) == 1);
    const CommandResult second = run_trainc("--config " + config + " --model.dropout " + resumed_with + " --output-dir " + resumed +
                                            " --resume-from-checkpoint " + saved + "/checkpoint-4 --max-steps 5 --eval-steps 1 --learning-rate 0");
    INFO(second.err);
    REQUIRE(second.exit_code == 0);
    const std::map<int64_t, double> got = eval_losses(resumed);
    REQUIRE(got.count(5) == 1);
    CHECK(got.at(5) == expected.at(4));
  }
  // A smaller MLP with dropout finds its three Linears' other names (layers.0/2/4) in the
  // checkpoint of four without: the error names the tensor it read and the model's own.
  const CommandResult smaller = run_trainc("--config " + config + " --model.dropout 0.1 --model.hidden-sizes 16,16 --output-dir " +
                                           dir.file("smaller") + " --resume-from-checkpoint " + dir.file("saved-0/checkpoint-4"));
  CHECK(smaller.exit_code == 2);
  CHECK_THAT(smaller.err, Contains("model.pt: tensor 'layers.4.weight' (read as the model's 'layers.6.weight': the checkpoint numbers "
                                   "its layers as the other model.dropout setting does) has shape [16, 16], the model expects [3, 16]"));
}

// fp16 runs only on a GPU (tests/cuda/fp16_training_test.cpp trains with it); here a checkpoint is
// given the scaler.json such a run saves, and a resumed run on the CPU must honour it: the steps
// it says were skipped hold the schedule back, and the state is saved forward.
TEST_CASE("a checkpoint's scaler.json holds the schedule back by the steps it skipped, and a damaged one is refused", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml",
                                       "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                                       "data: {kind: synthetic, num_samples: 64}\nmax_steps: 10\nsave_steps: 5\nlogging_steps: 1\n"
                                       "learning_rate: 0.01\nwarmup_steps: 2\nlr_scheduler_type: linear\n"
                                       "eval_strategy: no\nper_device_train_batch_size: 8\n");
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("full")).exit_code == 0);
  const auto rate_at = [](const std::vector<nlohmann::json>& records, int64_t step) {
    for (const auto& record : records) {
      if (record.contains("learning_rate") && record["step"] == step) return record["learning_rate"].get<double>();
    }
    FAIL("no learning_rate logged at step " << step);
    return 0.0;
  };
  const std::vector<nlohmann::json> full = read_metrics(dir.file("full"));
  fs::create_directories(dir.file("out"));
  fs::copy(dir.file("full/checkpoint-5"), dir.file("out/checkpoint-5"), fs::copy_options::recursive);
  const std::string checkpoint = dir.file("out/checkpoint-5");
  const auto write_scaler = [&](const std::string& text) {
    std::ofstream(checkpoint + "/scaler.json") << text;
    auto info = nlohmann::json::parse(read_text(checkpoint + "/trainc_checkpoint.json"));
    info["checksums"]["scaler.json"] = trainc::file_checksum(checkpoint + "/scaler.json");
    std::ofstream(checkpoint + "/trainc_checkpoint.json") << info.dump();
  };
  const auto resume = [&] { return run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint true"); };

  SECTION("two skipped steps: each later step takes the rate of the step two before it") {
    write_scaler(R"({"scale": 1024.0, "growth_tracker": 3, "skipped_steps": 2})");
    const CommandResult result = resume();
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    const std::vector<nlohmann::json> resumed = read_metrics(dir.file("out"));
    for (int64_t step = 6; step <= 10; ++step) CHECK(rate_at(resumed, step) == rate_at(full, step - 2));
    CHECK(rate_at(full, 8) != rate_at(full, 6));  // the control: a decaying rate
    // Saved forward as it was: this run does not scale its loss, and skipped nothing more.
    CHECK(nlohmann::json::parse(read_text(dir.file("out/checkpoint-10/scaler.json"))) ==
          nlohmann::json::parse(R"({"scale": 1024.0, "growth_tracker": 3, "skipped_steps": 2})"));
    CHECK_FALSE(fs::exists(dir.file("full/checkpoint-10/scaler.json")));  // a run that never skipped has none
  }
  SECTION("values no scaler holds") {
    const std::vector<std::pair<std::string, std::string>> damaged = {
        {R"({"scale": -1.0, "growth_tracker": 0, "skipped_steps": 0})", "scaler.json: scale is -1.0, expected a positive number in float32's range"},
        {R"({"scale": 1e39, "growth_tracker": 0, "skipped_steps": 0})", "scaler.json: scale is 1e+39, expected a positive number in float32's range (1.2e-38 to 3.4e+38)"},
        {R"({"scale": 2.0, "growth_tracker": 2000, "skipped_steps": 0})", "scaler.json: growth_tracker is 2000, expected a whole number below 2000"},
        {R"({"scale": 2.0, "growth_tracker": 0, "skipped_steps": 6})", "scaler.json: skipped_steps is 6, more than the checkpoint's global_step 5"},
        {R"({"scale": 2.0, "skipped_steps": 0})", "scaler.json: no growth_tracker"},
        {R"([2.0])", "scaler.json: not a loss scaler's state (expected a JSON object)"}};
    for (const auto& [text, message] : damaged) {
      write_scaler(text);
      const CommandResult result = resume();
      CHECK(result.exit_code == 2);
      CHECK_THAT(result.err, Contains(checkpoint + "/" + message));
    }
  }
  SECTION("a manifest that names a scaler.json that is gone") {
    write_scaler(R"({"scale": 2.0, "growth_tracker": 0, "skipped_steps": 0})");
    fs::remove(checkpoint + "/scaler.json");
    const CommandResult result = resume();
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Contains(checkpoint + "/scaler.json: missing; not a complete trainc checkpoint"));
  }
}

TEST_CASE("an overwriting run deletes the earlier run's checkpoints only once it has one of its own", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = resume_config(dir, 4, 2);
  REQUIRE(run_trainc("--config " + config + " --output-dir " + dir.file("out")).exit_code == 0);
  // A directory named like a checkpoint of a step past int64 is the user's: left alone, never a crash.
  fs::create_directory(dir.file("out/checkpoint-99999999999999999999999"));
  // Killed before its first save: the earlier run's checkpoints stay, and can still be resumed.
  const pid_t killed = spawn_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                        " --overwrite-output-dir --max-steps 100000 --save-steps 50000 --logging-steps 1",
                                    dir.file("killed.log"));
  REQUIRE(wait_for([&] { return read_text(dir.file("killed.log")).find("step 3/") != std::string::npos; }, 60));
  kill(killed, SIGKILL);
  CHECK(wait_exit_code(killed) == 128 + SIGKILL);
  CHECK(fs::exists(dir.file("out/checkpoint-2/trainc_checkpoint.json")));
  CHECK(fs::exists(dir.file("out/checkpoint-4/trainc_checkpoint.json")));
  // A run that saves replaces them at its first save; its own checkpoint of step 2 stays.
  const CommandResult saving = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --overwrite-output-dir --max-steps 3");
  INFO(saving.out << saving.err);
  REQUIRE(saving.exit_code == 0);
  CHECK_THAT(read_text(dir.file("out/checkpoint-2/run_config.yaml")), Contains("max_steps: 3"));  // the new run's
  CHECK(fs::exists(dir.file("out/checkpoint-3/trainc_checkpoint.json")));
  CHECK_FALSE(fs::exists(dir.file("out/checkpoint-4")));
  CHECK(fs::is_directory(dir.file("out/checkpoint-99999999999999999999999")));
  // A run that saves nothing replaces them when it ends.
  const CommandResult unsaved =
      run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --overwrite-output-dir --max-steps 1 --save-strategy no");
  REQUIRE(unsaved.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.file("out/checkpoint-2")));
  CHECK_FALSE(fs::exists(dir.file("out/checkpoint-3")));
  const CommandResult resume = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --resume-from-checkpoint true");
  CHECK(resume.exit_code == 2);
  CHECK_THAT(resume.err, Contains("holds no complete checkpoint-<step>"));
}

TEST_CASE("save_total_limit keeps the newest checkpoints", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml", "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                                                   "data: {kind: synthetic, num_samples: 64}\neval_strategy: no\n");
  const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                          " --max-steps 8 --save-steps 2 --save-total-limit 2 --per-device-train-batch-size 8");
  REQUIRE(result.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.file("out/checkpoint-4")));
  CHECK(fs::exists(dir.file("out/checkpoint-6")));
  CHECK(fs::exists(dir.file("out/checkpoint-8")));
}

TEST_CASE("load_best_model_at_end tracks the best checkpoint", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = dir.write("run.yaml", "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                                                   "data: {kind: synthetic, num_samples: 256}\n");
  const CommandResult result = run_trainc("--config " + config + " --output-dir " + dir.file("out") +
                                          " --max-steps 12 --save-steps 4"
                                          " --eval-strategy steps --eval-steps 4 --load-best-model-at-end"
                                          " --metric-for-best-model accuracy --save-total-limit 1 --learning-rate 1e-3");
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("loaded the best model (accuracy"));
  const auto state = nlohmann::json::parse(read_text(dir.file("out/checkpoint-12/trainer_state.json")));
  REQUIRE(state["best_model_checkpoint"].is_string());
  CHECK(fs::exists(state["best_model_checkpoint"].get<std::string>()));
}

TEST_CASE("the best checkpoint survives rotation when a resumed run starts in another directory", "[e2e][checkpoint]") {
  // trainer_state.json names the best checkpoint by the path the first run used ("out/checkpoint-4");
  // the resumed run spells output_dir differently and must still recognize it.
  ScratchDir dir;
  dir.write("run.yaml", "model: {name: mlp, input_size: 8, hidden_sizes: [16], num_classes: 3}\n"
                        "data: {kind: synthetic, num_samples: 256}\nsave_steps: 4\neval_strategy: steps\neval_steps: 4\n"
                        "metric_for_best_model: loss\ngreater_is_better: true\nsave_total_limit: 1\nlearning_rate: 1e-2\n");
  // The worst loss counts as best here, so the best checkpoint is most likely the first, not the newest.
  const std::string trainc = std::string(TRAINC_BINARY);
  const std::string name = fs::path(dir.path()).filename().string();
  REQUIRE(run_command("cd " + dir.path() + " && " + trainc + " --config run.yaml --output-dir out --max-steps 8").exit_code == 0);
  const CommandResult resumed = run_command("cd " + dir.path() + "/.. && " + trainc + " --config " + name + "/run.yaml --output-dir " +
                                            name + "/out --max-steps 16 --resume-from-checkpoint true");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const auto state = nlohmann::json::parse(read_text(dir.file("out/checkpoint-16/trainer_state.json")));
  REQUIRE(state["best_model_checkpoint"].is_string());
  const std::string best = fs::path(state["best_model_checkpoint"].get<std::string>()).filename().string();
  CHECK(fs::exists(dir.file("out/" + best + "/trainc_checkpoint.json")));

  // Resumed into another output_dir, the best checkpoint is still the one beside the resumed one.
  const CommandResult elsewhere = run_trainc("--config " + dir.file("run.yaml") + " --output-dir " + dir.file("other") +
                                             " --max-steps 20 --load-best-model-at-end --resume-from-checkpoint " + dir.file("out/checkpoint-16"));
  INFO(elsewhere.out << elsewhere.err);
  CHECK(elsewhere.exit_code == 0);
  CHECK_THAT(elsewhere.out, Contains("loaded the best model"));
}

TEST_CASE("a second run in an output_dir that a run is using is refused before it changes anything", "[e2e][checkpoint]") {
  ScratchDir dir;
  const std::string config = resume_config(dir, 100000, 5);
  const pid_t first = spawn_trainc("--config " + config + " --output-dir " + dir.file("out"), dir.file("first.log"));
  REQUIRE(wait_for([&] { return read_text(dir.file("first.log")).find("saved ") != std::string::npos; }, 60));
  for (const std::string& how : {" --overwrite-output-dir", " --resume-from-checkpoint true"}) {
    const CommandResult second = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 2" + how);
    CHECK(second.exit_code == 2);
    CHECK_THAT(second.err, Contains("output_dir: " + dir.file("out") + " is in use by another trainc run (pid " + std::to_string(first) + ")"));
  }
  CHECK(fs::exists(dir.file("out/metrics.jsonl")));  // the first run's, not replaced
  kill(first, SIGTERM);
  CHECK(wait_exit_code(first) == 143);
  // The lock ends with its process: the next run may resume there.
  const CommandResult next = run_trainc("--config " + config + " --output-dir " + dir.file("out") + " --max-steps 2 --overwrite-output-dir");
  CHECK(next.exit_code == 0);
}
