// defines: read_text_file, write_text_file, TraincRun, run_trainc_in, logged_losses_in,
//          largest_relative_difference, largest_weight_difference
//
// The real binary run from the CUDA test binaries, and what it wrote read back, through C stdio,
// the shell and LibTorch's archives only (those binaries avoid std::filesystem and the e2e helpers:
// tests/CMakeLists.txt says why); elsewhere support/command.h does the same.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "support/posix_scratch_dir.h"

namespace trainc::test {

// A file's bytes; empty when it cannot be read.
inline std::string read_text_file(const std::string& path) {
  std::string text;
  if (FILE* file = std::fopen(path.c_str(), "rb")) {
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
    std::fclose(file);
  }
  return text;
}

// Writes `text` as the whole file.
inline void write_text_file(const std::string& path, const std::string& text) {
  FILE* file = std::fopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  std::fputs(text.c_str(), file);
  std::fclose(file);
}

struct TraincRun {
  int exit_code;
  std::string out;  // stdout and stderr
};

// TRAINC_BINARY with `arguments` and --output-dir <scratch>/<name>; its output in <scratch>/<name>.log.
// `environment`: assignments put before the command ("NAME=value ").
inline TraincRun run_trainc_in(const PosixScratchDir& scratch, const std::string& name, const std::string& arguments,
                               const std::string& environment = "") {
  const std::string log = scratch.file(name + ".log");
  const int status = std::system((environment + std::string(TRAINC_BINARY) + " " + arguments + " --output-dir " + scratch.file(name) +
                                  " >" + log + " 2>&1 </dev/null")
                                     .c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_text_file(log)};
}

// The losses a run's metrics.jsonl logged, in order.
inline std::vector<double> logged_losses_in(const std::string& metrics_path) {
  std::vector<double> losses;
  std::istringstream lines(read_text_file(metrics_path));
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event.contains("loss")) losses.push_back(event["loss"].get<double>());
  }
  return losses;
}

// The largest |got - expected| / |expected| over two series of the same length.
inline double largest_relative_difference(const std::vector<double>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) largest = std::max(largest, std::abs(got[i] - expected[i]) / std::abs(expected[i]));
  return largest;
}

// The largest difference between two checkpoints' model tensors.
inline double largest_weight_difference(const std::string& model_a, const std::string& model_b) {
  torch::serialize::InputArchive a, b;
  a.load_from(model_a);
  b.load_from(model_b);
  double largest = 0.0;
  const std::vector<std::string> keys = a.keys();
  REQUIRE(!keys.empty());
  for (const std::string& key : keys) {
    torch::Tensor x, y;
    REQUIRE((a.try_read(key, x) || a.try_read(key, x, /*is_buffer=*/true)));
    REQUIRE((b.try_read(key, y) || b.try_read(key, y, /*is_buffer=*/true)));
    largest = std::max(largest, (x.to(torch::kDouble) - y.to(torch::kDouble)).abs().max().item<double>());
  }
  return largest;
}

}  // namespace trainc::test
