// max-autotune's decision and its record on disk, with measurements given by the test: the
// fastest candidate wins, a candidate that throws is left out, a key is measured once per run, and
// a later run reads the choice instead of measuring (tuning_cache.h). Real measurements on a GPU
// are in tests/cuda/step_graphs_test.cpp and the kernel tests.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <stdexcept>

#include "support/command.h"
#include "trainc/compile/autotune/autotuner.h"

using namespace trainc;
using trainc::test::ScratchDir;
using Catch::Matchers::Contains;

namespace {

// Candidates whose run sets `last`; the fake measure runs the candidate once and reports the time
// `times` gives its name, counting measurements.
struct FakeDevice {
  std::map<std::string, double> times;
  std::string last;
  int measurements = 0;

  Autotuner::Measure measure() {
    return [this](const std::function<void()>& work) {
      ++measurements;
      work();
      return times.at(last);
    };
  }
  std::vector<TuningCandidate> candidates(const std::vector<std::string>& names) {
    std::vector<TuningCandidate> result;
    for (const std::string& name : names) {
      result.push_back({name, [this, name] {
                          if (name == "broken") throw std::runtime_error("this kernel does not take head size 72\nmore detail");
                          last = name;
                        }});
    }
    return result;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("the autotuner keeps the fastest candidate and leaves out those that throw", "[autotune]") {
  FakeDevice device;
  device.times = {{"flash", 2e-3}, {"efficient", 3e-3}, {"cudnn", 1e-3}};
  Autotuner tuner(TuningCache(""), device.measure());
  CHECK(tuner.choose("attention a", device.candidates({"flash", "broken", "efficient", "cudnn"})) == std::optional<std::string>("cudnn"));
  device.times["flash"] = 0.5e-3;  // the same key is not measured again in this run
  CHECK(tuner.choose("attention a", device.candidates({"flash", "efficient", "cudnn"})) == std::optional<std::string>("cudnn"));
  CHECK(tuner.choose("attention b", device.candidates({"flash", "efficient", "cudnn"})) == std::optional<std::string>("flash"));
  CHECK_FALSE(tuner.choose("attention c", device.candidates({"broken"})).has_value());
  const TuningStats stats = tuner.take_stats();
  CHECK(stats.measured == 3);
  CHECK(stats.from_cache == 0);
  CHECK(tuner.take_stats().measured == 0);
}

TEST_CASE("measured choices are recorded and read back by a later run", "[autotune]") {
  ScratchDir dir;
  FakeDevice device;
  device.times = {{"cublas", 2e-3}, {"cublaslt", 1e-3}};
  const std::string key = "NVIDIA H200 (sm_90) | matmul | bf16[16384,768]/[768,1] bf16[768,3072]/[3072,1]";
  {
    Autotuner tuner(TuningCache(dir.path()), device.measure());
    CHECK(tuner.choose(key, device.candidates({"cublas", "cublaslt"})) == std::optional<std::string>("cublaslt"));
    const std::string record = read_all(TuningCache(dir.path()).path_of(key));
    CHECK_THAT(record, Contains("trainc autotune 1\nkey: " + key + "\nchoice: cublaslt\nmeasured: cublas 2.000 ms, cublaslt 1.000 ms"));
  }
  const int measured_before = device.measurements;
  device.times = {{"cublas", 1e-3}, {"cublaslt", 2e-3}};
  Autotuner later(TuningCache(dir.path()), device.measure());
  CHECK(later.choose(key, device.candidates({"cublas", "cublaslt"})) == std::optional<std::string>("cublaslt"));
  CHECK(device.measurements == measured_before);
  CHECK(later.take_stats().from_cache == 1);

  SECTION("a record whose choice is no longer a candidate is measured again") {
    Autotuner fresh(TuningCache(dir.path()), device.measure());
    CHECK(fresh.choose(key, device.candidates({"cublas", "flash"})).has_value());
    CHECK(fresh.take_stats().measured == 1);
  }
  SECTION("a damaged record is measured again and replaced") {
    std::ofstream(TuningCache(dir.path()).path_of(key)) << "trainc autotune 1\nkey: " << key << "\nchoi";
    Autotuner fresh(TuningCache(dir.path()), device.measure());
    CHECK(fresh.choose(key, device.candidates({"cublas", "cublaslt"})) == std::optional<std::string>("cublas"));
    CHECK(fresh.take_stats().measured == 1);
    CHECK_THAT(read_all(TuningCache(dir.path()).path_of(key)), Contains("choice: cublas\n"));
  }
  SECTION("a record under another key (a hash collision) is not taken") {
    const std::string other = "NVIDIA A100 (sm_80) | matmul | bf16[16384,768]/[768,1] bf16[768,3072]/[3072,1]";
    std::ofstream(TuningCache(dir.path()).path_of(other)) << "trainc autotune 1\nkey: " << key << "\nchoice: cublaslt\nmeasured: -\n";
    CHECK_FALSE(TuningCache(dir.path()).find(other).has_value());
  }
}

TEST_CASE("a failing candidate's reason is recorded on one line", "[autotune]") {
  ScratchDir dir;
  FakeDevice device;
  device.times = {{"flash", 1e-3}};
  Autotuner tuner(TuningCache(dir.path()), device.measure());
  CHECK(tuner.choose("k", device.candidates({"broken", "flash"})) == std::optional<std::string>("flash"));
  CHECK_THAT(read_all(TuningCache(dir.path()).path_of("k")),
             Contains("measured: broken cannot run (this kernel does not take head size 72), flash 1.000 ms\n"));
}
