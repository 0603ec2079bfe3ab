// Data-parallel training over gloo, through the real binary on localhost: two processes train as
// one process with twice the batch (also with accumulation, and with a compiled step), a run
// resumes across two processes, and a killed rank is reported by the survivor with a non-zero
// exit, the last checkpoint intact.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/checkpoints.h"
#include "support/command.h"
#include "trainc/distributed/launch.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// An mlp on 64 learnable synthetic samples (no held-out split), no dropout: ranks differ only in
// the samples they read.
std::string mlp_config(const ScratchDir& dir, double dropout = 0.0) {
  return dir.write("run.yaml",
                   "model: {name: mlp, input_size: 12, hidden_sizes: [16], num_classes: 3, dropout: " + std::to_string(dropout) + "}\n"
                   "data: {kind: synthetic, num_samples: 64, validation_split: 0.0}\n"
                   "learning_rate: 1e-2\nlogging_steps: 1\nmax_steps: 8\nsave_steps: 4\nddp_timeout: 60\n");
}

std::vector<double> logged_losses(const std::string& output_dir) {
  std::vector<double> losses;
  std::istringstream lines(read_text(output_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event.contains("loss")) losses.push_back(event["loss"].get<double>());
  }
  return losses;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t found = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
  return found;
}

// One worker started the way torchrun starts it; returns its pid.
pid_t spawn_rank(int rank, int port, const std::string& arguments, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string command = "WORLD_SIZE=2 RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
                                " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " exec " + TRAINC_BINARY + " " +
                                arguments + " >" + log_path + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Ranks 1 and 0 of a two-process run, started as torchrun starts them, each logging to rankN.log.
struct TwoRanks {
  pid_t rank0 = 0, rank1 = 0;
};
TwoRanks spawn_two_ranks(const ScratchDir& dir, const std::string& arguments) {
  const int port = trainc::free_local_port();
  TwoRanks ranks;
  ranks.rank1 = spawn_rank(1, port, arguments, dir.file("rank1.log"));
  ranks.rank0 = spawn_rank(0, port, arguments, dir.file("rank0.log"));
  return ranks;
}

// Whether `pid` exits within `seconds`; its wait status in `status`.
bool exits_within(pid_t pid, int& status, double seconds) {
  return wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, seconds);
}

}  // namespace

TEST_CASE("two gloo processes train as one process with twice the batch", "[e2e][distributed]") {
  ScratchDir dir;
  const std::string base = "--config " + mlp_config(dir) + " ";
  const CommandResult two = run_trainc(base + "--nproc-per-node 2 --per-device-train-batch-size 8 --output-dir " + dir.file("two"));
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  CHECK_THAT(two.out, Contains("batch      8 x 1 accumulation x 2 processes = 16 samples/step"));
  CHECK_THAT(two.out, Contains("processes  2 data-parallel (gloo, rendezvous 127.0.0.1:"));
  CHECK(count(two.out, "step 8/8") == 1);  // rank 0 alone reports
  const CommandResult one = run_trainc(base + "--per-device-train-batch-size 16 --output-dir " + dir.file("one"));
  REQUIRE(one.exit_code == 0);
  // Accumulation: each rank's two micro-batches of 4 make the same 16 samples a step.
  const CommandResult accumulated = run_trainc(base + "--nproc-per-node 2 --per-device-train-batch-size 4 "
                                               "--gradient-accumulation-steps 2 --output-dir " + dir.file("accumulated"));
  REQUIRE(accumulated.exit_code == 0);
  // A compiled step: the gradients its backward program leaves in .grad are averaged the same way.
  const CommandResult compiled = run_trainc(base + "--nproc-per-node 2 --per-device-train-batch-size 8 --torch-compile-backend "
                                            "aot_eager --output-dir " + dir.file("compiled"));
  INFO(compiled.out << compiled.err);
  REQUIRE(compiled.exit_code == 0);

  const std::vector<double> expected = logged_losses(dir.file("one"));
  REQUIRE(expected.size() == 8);
  for (const std::string& run : {"two", "accumulated", "compiled"}) {
    INFO(run);
    const std::vector<double> losses = logged_losses(dir.file(run));
    REQUIRE(losses.size() == expected.size());
    for (std::size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == Approx(expected[i]).epsilon(1e-5));
    // float32: the mean over ranks of per-rank means adds in another order than one mean of 16.
    CHECK(checkpoint_max_difference(dir.file(run) + "/checkpoint-8", dir.file("one") + "/checkpoint-8") < 1e-5);
  }
}

TEST_CASE("a two-process run resumes from its checkpoint and continues exactly", "[e2e][distributed]") {
  ScratchDir dir;
  // With dropout: each rank must get its own generator state back.
  const std::string base = "--config " + mlp_config(dir, 0.3) + " --nproc-per-node 2 --per-device-train-batch-size 8 ";
  REQUIRE(run_trainc(base + "--output-dir " + dir.file("whole")).exit_code == 0);
  fs::create_directories(dir.file("resumed"));
  fs::copy(dir.file("whole") + "/checkpoint-4", dir.file("resumed") + "/checkpoint-4", fs::copy_options::recursive);
  const CommandResult resumed = run_trainc(base + "--output-dir " + dir.file("resumed") + " --resume-from-checkpoint true");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resumed from " + dir.file("resumed") + "/checkpoint-4 at step 4"));
  CHECK(checkpoints_identical(dir.file("whole") + "/checkpoint-8", dir.file("resumed") + "/checkpoint-8"));
}

TEST_CASE("a killed rank is reported by the other, which exits non-zero and keeps the last checkpoint", "[e2e][distributed]") {
  ScratchDir dir;
  const TwoRanks ranks = spawn_two_ranks(dir, "--config " + mlp_config(dir) + " --per-device-train-batch-size 8 --max-steps 1000000 "
                                              "--save-steps 20 --output-dir " + dir.file("out"));
  REQUIRE(wait_for([&] { return fs::exists(dir.file("out") + "/checkpoint-40/trainer_state.json"); }, 60));
  kill(ranks.rank1, SIGKILL);
  waitpid(ranks.rank1, nullptr, 0);  // reaped, as a launcher reaps its workers: gone, not a zombie
  int status = 0;
  REQUIRE(exits_within(ranks.rank0, status, 60));  // well within ddp_timeout
  const std::string log = read_text(dir.file("rank0.log"));
  INFO(log);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(log, Contains("rank 0: ") && Contains("rank 1 died"));
  // The newest complete checkpoint is whole: it loads and resumes, here for one more step.
  int64_t newest = 0;
  for (const auto& entry : fs::directory_iterator(dir.file("out"))) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint-", 0) == 0) newest = std::max<int64_t>(newest, std::stoll(name.substr(11)));
  }
  const CommandResult resumed = run_trainc("--config " + mlp_config(dir) + " --per-device-train-batch-size 8 --output-dir " +
                                           dir.file("out") + " --resume-from-checkpoint true --max-steps " + std::to_string(newest + 1));
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("a data-parallel run with a backend that does not fit the device stops at start with exit 2", "[e2e][distributed]") {
  ScratchDir dir;
  const CommandResult result = run_trainc("--config " + mlp_config(dir) + " --nproc-per-node 2 --ddp-backend nccl --output-dir " +
                                          dir.file("out"));
  INFO(result.out << result.err);
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Contains("ddp_backend: nccl with this run on cpu: nccl trains on GPUs, gloo on the CPU"));
  CHECK(!fs::exists(dir.file("out")));  // checked before the output directory is touched
}

TEST_CASE("a signal to one rank stops every rank at the same step, with a checkpoint and the signal's exit code", "[e2e][distributed]") {
  ScratchDir dir;
  const TwoRanks ranks = spawn_two_ranks(dir, "--config " + mlp_config(dir) + " --per-device-train-batch-size 8 --max-steps 1000000 "
                                              "--save-steps 1000000 --output-dir " + dir.file("out"));
  REQUIRE(wait_for([&] { return count(read_text(dir.file("out") + "/metrics.jsonl"), "\"loss\"") >= 10; }, 60));
  kill(ranks.rank1, SIGINT);
  int status0 = 0, status1 = 0;
  REQUIRE(exits_within(ranks.rank0, status0, 60));
  REQUIRE(exits_within(ranks.rank1, status1, 60));
  const std::string log0 = read_text(dir.file("rank0.log"));
  INFO(log0 << read_text(dir.file("rank1.log")));
  CHECK(WIFEXITED(status0));
  CHECK(WEXITSTATUS(status0) == 130);
  CHECK(WIFEXITED(status1));
  CHECK(WEXITSTATUS(status1) == 130);
  // Rank 1 logs warnings only. That both exit cleanly shows they stopped at the same step: the
  // save after the stop ends with a collective, which ranks at different steps would not complete.
  const auto at = log0.find("stopped by signal 2 (to another rank) at step ");
  REQUIRE(at != std::string::npos);
  const int64_t step = std::stoll(log0.substr(at + 46));
  CHECK(fs::exists(dir.file("out") + "/checkpoint-" + std::to_string(step) + "/trainer_state.json"));
}
