// On two CUDA GPUs, through the real binary: two NCCL processes train a small GPT as one process
// with twice the batch, eagerly and with whole-step CUDA graphs (where the all-reduce runs between
// the gradients' graph and the update's). float32 with TF32 off and SGD, so that the only
// differences are the order of additions (a mean of two means against one mean, and GEMMs over
// other batch sizes): the weights agree within 1e-5 after 8 steps. And a rank killed mid-run: the
// survivor, whose collectives never complete, names it and exits 1 after ddp_timeout (10 s here,
// before the launcher's own deadline of 30 s after a failure), the launcher exits non-zero naming
// it too, and the newest checkpoint resumes. Needs two GPUs; on one, it says so and checks nothing.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/posix_scratch_dir.h"
#include "support/posix_trainc_runs.h"

using Catch::Matchers::Contains;

namespace {

using trainc::test::largest_weight_difference;
using trainc::test::logged_losses_in;
using trainc::test::read_text_file;
using trainc::test::TraincRun;

struct Scratch : trainc::test::PosixScratchDir {
  Scratch() : PosixScratchDir("trainc-cuda-test") {}
};

TraincRun run_trainc(const Scratch& scratch, const std::string& name, const std::string& arguments) {
  return trainc::test::run_trainc_in(scratch, name, arguments);
}

bool exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

// The pid of the launcher's child started as `rank` (from its environment), or 0.
pid_t child_with_rank(pid_t launcher, int rank) {
  DIR* proc = opendir("/proc");
  pid_t found = 0;
  while (dirent* entry = proc ? readdir(proc) : nullptr) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
    const auto after_name = stat.rfind(") ");
    if (after_name == std::string::npos || std::atoi(stat.c_str() + after_name + 4) != launcher) continue;  // field 4: ppid
    std::string environment = "\n" + read_text_file("/proc/" + std::to_string(pid) + "/environ");
    for (char& c : environment) c = c == '\0' ? '\n' : c;
    if (environment.find("\nRANK=" + std::to_string(rank) + "\n") != std::string::npos) found = pid;
  }
  if (proc) closedir(proc);
  return found;
}

const char* const kConfig =
    "model: {name: gpt, vocab_size: 97, n_layer: 2, n_head: 2, n_embd: 64, block_size: 32, dropout: 0.0}\n"
    "data: {kind: synthetic, num_samples: 256, validation_split: 0.0}\n"
    "optim: sgd\nlearning_rate: 0.1\ntf32: false\nlogging_steps: 1\nmax_steps: 8\nsave_steps: 8\nddp_timeout: 120\n";

// Whether this host has the two GPUs these tests need; says so when not.
bool two_gpus() {
  if (torch::cuda::device_count() >= 2) return true;
  // (a count as a number: LibTorch 2.x gives it as an 8-bit device index, which a stream prints as a character)
  WARN("this host has " << static_cast<int>(torch::cuda::device_count()) << " GPU: the two-process NCCL test needs two and was not run");
  return false;
}

void write_config(const Scratch& scratch) {
  FILE* config = std::fopen(scratch.file("run.yaml").c_str(), "wb");
  REQUIRE(config != nullptr);
  std::fputs(kConfig, config);
  std::fclose(config);
}

}  // namespace

TEST_CASE("two NCCL processes train as one process with twice the batch, eagerly and as CUDA graphs", "[cuda][distributed]") {
  if (!two_gpus()) return;
  Scratch scratch;
  write_config(scratch);
  const std::string base = "--config " + scratch.file("run.yaml") + " ";
  const TraincRun one = run_trainc(scratch, "one", base + "--per-device-train-batch-size 16");
  INFO(one.out);
  REQUIRE(one.exit_code == 0);
  const std::vector<double> expected = logged_losses_in(scratch.file("one/metrics.jsonl"));
  REQUIRE(expected.size() == 8);
  for (const std::string backend : {"eager", "cudagraphs"}) {
    INFO(backend);
    const std::string flags = backend == "eager" ? "" : "--torch-compile-backend cudagraphs ";
    const TraincRun two = run_trainc(scratch, backend, base + flags + "--nproc-per-node 2 --per-device-train-batch-size 8");
    INFO(two.out);
    REQUIRE(two.exit_code == 0);
    CHECK_THAT(two.out, Contains("batch      8 x 1 accumulation x 2 processes = 16 samples/step"));
    CHECK_THAT(two.out, Contains("processes  2 data-parallel (nccl, rendezvous 127.0.0.1:"));
    const std::vector<double> losses = logged_losses_in(scratch.file(backend + "/metrics.jsonl"));
    REQUIRE(losses.size() == expected.size());
    double loss_difference = 0.0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
      loss_difference = std::max(loss_difference, std::abs(losses[i] - expected[i]) / std::abs(expected[i]));
    }
    const double difference = largest_weight_difference(scratch.file(backend + "/checkpoint-8/model.pt"), scratch.file("one/checkpoint-8/model.pt"));
    // On stdout, unwrapped, for the GPU script's summary (ctest --verbose).
    std::cout << "two NCCL processes (" << backend << ") vs one with twice the batch: largest relative loss difference "
              << loss_difference << ", largest weight difference " << difference << " (tolerance 1e-5)" << std::endl;
    CHECK(loss_difference < 1e-5);
    CHECK(difference < 1e-5);
  }
}

TEST_CASE("a killed NCCL rank is named by the launcher, which exits non-zero, and the last checkpoint resumes", "[cuda][distributed]") {
  if (!two_gpus()) return;
  Scratch scratch;
  write_config(scratch);
  const std::string arguments = " --config " + scratch.file("run.yaml") + " --per-device-train-batch-size 8 --max-steps 1000000 "
                                "--save-steps 20 --logging-steps 100 --ddp-timeout 10 --output-dir " + scratch.file("out");
  const pid_t launcher = fork();
  if (launcher == 0) {
    const std::string command = "exec " + std::string(TRAINC_BINARY) + " --nproc-per-node 2" + arguments + " >" +
                                scratch.file("launcher.log") + " 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto wait_for = [](const auto& condition, int seconds) {
    for (int tick = 0; tick < seconds * 20; ++tick, std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
      if (condition()) return true;
    }
    return false;
  };
  REQUIRE(wait_for([&] { return exists(scratch.file("out/checkpoint-40/trainer_state.json")); }, 120));
  const pid_t rank1 = child_with_rank(launcher, 1);
  REQUIRE(rank1 > 0);
  const auto killed_at = std::chrono::steady_clock::now();
  kill(rank1, SIGKILL);
  int status = 0;
  const bool ended = wait_for([&] { return waitpid(launcher, &status, WNOHANG) == launcher; }, 90);
  if (!ended) kill(launcher, SIGKILL);
  REQUIRE(ended);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const std::string log = read_text_file(scratch.file("launcher.log"));
  INFO(log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
  std::cout << "a killed NCCL rank: the launcher exited " << seconds << " s after the kill (ddp_timeout 10 s)" << std::endl;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK_THAT(log, Contains("error: rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"));
  CHECK_THAT(log, Contains("rank 0: ") && Contains("rank 1 died"));  // the survivor's own message
  CHECK_THAT(log, Contains("error: rank 0 (pid ") && Contains(") exited with code 1"));
  CHECK(seconds < 28);  // the survivor ended itself, before the launcher's deadline
  // The newest complete checkpoint is whole: one process resumes from it for one more step.
  int64_t newest = 0;
  if (DIR* out = opendir(scratch.file("out").c_str())) {
    while (dirent* entry = readdir(out)) {
      const std::string name = entry->d_name;
      if (name.rfind("checkpoint-", 0) == 0) newest = std::max<int64_t>(newest, std::stoll(name.substr(11)));
    }
    closedir(out);
  }
  REQUIRE(newest >= 40);
  const TraincRun resumed = run_trainc(scratch, "out", "--config " + scratch.file("run.yaml") + " --per-device-train-batch-size 8 "
                                 "--resume-from-checkpoint true --max-steps " + std::to_string(newest + 1));
  INFO(resumed.out);
  CHECK(resumed.exit_code == 0);
}
