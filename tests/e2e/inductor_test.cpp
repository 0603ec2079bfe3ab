// The inductor backend on the CPU through the real binary: a gpt run tracks eager's loss curve, a
// second run of the same config loads every kernel library from the cache and compiles nothing,
// two runs sharing a cache at once both succeed and leave it whole, a compiler failure shows the
// compiler's log and where the source is, a cache directory that cannot be made is a usage error,
// a damaged cached library is compiled again, and explain / --dump-dir show the fused programs and
// the generated C++.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "support/command.h"
#include "support/metrics.h"

using namespace trainc::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::string gpt_config(const ScratchDir& dir) {
  return dir.write("gpt.yaml",
                   "model: {name: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 16, vocab_size: 64, dropout: 0.1}\n"
                   "data: {kind: synthetic, num_samples: 40}\nper_device_train_batch_size: 8\neval_strategy: no\n"
                   "save_strategy: no\nmax_steps: 8\nlogging_steps: 1\nlearning_rate: 3e-3\n");
}

// trainc with the kernel cache in `cache` (and `environment`, e.g. "CXX=...").
CommandResult run_with_cache(const std::string& cache, const std::string& arguments, const std::string& environment = "") {
  return run_command("TRAINC_CACHE_DIR='" + cache + "' " + environment + " " + TRAINC_BINARY + " " + arguments);
}

std::vector<nlohmann::json> compiles(const std::vector<nlohmann::json>& events) {
  std::vector<nlohmann::json> found;
  for (const auto& event : events) {
    if (event.contains("compile_outcome")) found.push_back(event);
  }
  return found;
}

std::vector<std::string> leftovers(const std::string& cache) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(cache + "/cpu-kernels")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("build-", 0) == 0) names.push_back(name);
  }
  return names;
}

}  // namespace

TEST_CASE("inductor trains gpt with eager's loss curve, and a second run compiles nothing", "[e2e][inductor]") {
  ScratchDir dir;
  const std::string config = gpt_config(dir);
  const std::string cache = dir.file("cache");
  const CommandResult eager = run_trainc("--config " + config + " --output-dir " + dir.file("eager"));
  REQUIRE(eager.exit_code == 0);
  const CommandResult first = run_with_cache(cache, "--config " + config + " --output-dir " + dir.file("first") + " --torch-compile-backend inductor");
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Contains("backend inductor, mode default (configured)"));
  CHECK_THAT(first.out, Contains("libraries compiled"));
  const std::vector<double> expected = losses(read_metrics(dir.file("eager")));
  const auto first_events = read_metrics(dir.file("first"));
  const std::vector<double> got = losses(first_events);
  REQUIRE(got.size() == 8);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-4));
  // The first step compiles, and so does the epoch's last, smaller batch: two libraries each.
  const auto first_compiles = compiles(first_events);
  REQUIRE(first_compiles.size() == 2);
  for (const auto& compile : first_compiles) {
    CHECK(compile["kernel_libraries_compiled"] == 2);
    CHECK(compile["kernel_libraries_cached"] == 0);
  }

  const CommandResult second = run_with_cache(cache, "--config " + config + " --output-dir " + dir.file("second") + " --torch-compile-backend inductor");
  REQUIRE(second.exit_code == 0);
  const auto second_events = read_metrics(dir.file("second"));
  const auto second_compiles = compiles(second_events);
  REQUIRE(second_compiles.size() == 2);
  for (const auto& compile : second_compiles) {
    CHECK(compile["kernel_libraries_compiled"] == 0);
    CHECK(compile["kernel_libraries_cached"] == 2);
  }
  CHECK(losses(second_events) == got);
  CHECK(leftovers(cache).empty());
}

TEST_CASE("with no backend set, trainc compiles with inductor on the CPU", "[e2e][inductor]") {
  ScratchDir dir;
  const CommandResult result =
      run_with_cache(dir.file("cache"), "--config " + gpt_config(dir) + " --output-dir " + dir.file("out") + " --torch-compile true --max-steps 2");
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("backend inductor, mode default (selected for the hardware)"));
}

TEST_CASE("two runs sharing a kernel cache at once both succeed and leave it whole", "[e2e][inductor]") {
  ScratchDir dir;
  const std::string config = gpt_config(dir);
  const std::string cache = dir.file("cache");
  const auto command = [&](const std::string& name) {
    return "TRAINC_CACHE_DIR='" + cache + "' " + TRAINC_BINARY + " --config " + config + " --output-dir " + dir.file(name) +
           " --torch-compile-backend inductor --max-steps 2 > " + dir.file(name + ".log") + " 2>&1; echo $? > " + dir.file(name + ".rc");
  };
  const CommandResult both = run_command("(" + command("a") + ") & (" + command("b") + ") & wait");
  REQUIRE(both.exit_code == 0);
  INFO(read_text(dir.file("a.log")) << read_text(dir.file("b.log")));
  CHECK(read_text(dir.file("a.rc")) == "0\n");
  CHECK(read_text(dir.file("b.rc")) == "0\n");
  CHECK(leftovers(cache).empty());
  // Whatever each run published is complete: a third run loads it all.
  const CommandResult third = run_with_cache(cache, "--config " + config + " --output-dir " + dir.file("c") + " --torch-compile-backend inductor --max-steps 2");
  REQUIRE(third.exit_code == 0);
  const auto third_compiles = compiles(read_metrics(dir.file("c")));
  REQUIRE(third_compiles.size() == 1);
  CHECK(third_compiles[0]["kernel_libraries_compiled"] == 0);
}

TEST_CASE("a damaged or misplaced cached library is compiled again, never loaded", "[e2e][inductor]") {
  // dlopen trusts the file at a key's name: a truncated library faulted the process (SIGBUS), one
  // of another key crashed it, and damaged constants trained on with wrong numbers.
  ScratchDir dir;
  const std::string config = gpt_config(dir);
  const std::string cache = dir.file("cache");
  const std::string arguments = "--config " + config + " --torch-compile-backend inductor --max-steps 2 --output-dir ";
  REQUIRE(run_with_cache(cache, arguments + dir.file("first")).exit_code == 0);
  std::vector<fs::path> libraries;
  for (const auto& entry : fs::directory_iterator(cache + "/cpu-kernels")) {
    if (entry.path().extension() == ".so") libraries.push_back(entry.path());
  }
  std::sort(libraries.begin(), libraries.end());
  REQUIRE(libraries.size() >= 2);
  const auto loss_of = [&](const std::string& run) { return read_metrics(dir.file(run)).back()["train_loss"].get<double>(); };

  const auto damage_and_run = [&](const std::string& run, const std::function<void()>& damage) {
    damage();
    const CommandResult result = run_with_cache(cache, arguments + dir.file(run));
    INFO(result.out << result.err);
    CHECK(result.exit_code == 0);
    CHECK_THAT(result.out + result.err, Contains("kernel cache: " + libraries[0].string() + " is damaged"));
    CHECK(loss_of(run) == loss_of("first"));
  };
  damage_and_run("truncated", [&] { fs::resize_file(libraries[0], fs::file_size(libraries[0]) / 2); });
  damage_and_run("misplaced", [&] { fs::copy_file(libraries[1], libraries[0], fs::copy_options::overwrite_existing); });
  damage_and_run("flipped", [&] {
    std::string bytes = read_text(libraries[0].string());
    bytes[bytes.size() / 2] ^= 0x40;
    std::ofstream(libraries[0], std::ios::binary) << bytes;
  });
  // Compiled again and published whole: the next run loads everything.
  REQUIRE(run_with_cache(cache, arguments + dir.file("last")).exit_code == 0);
  const auto last_compiles = compiles(read_metrics(dir.file("last")));
  REQUIRE(last_compiles.size() == 1);
  CHECK(last_compiles[0]["kernel_libraries_compiled"] == 0);
}

TEST_CASE("a compiler failure shows the compiler's log and the generated source, and a bad cache dir is a usage error", "[e2e][inductor]") {
  ScratchDir dir;
  const std::string compiler = dir.write("broken-c++",
                                         "#!/bin/sh\n"
                                         "if [ \"$1\" = --version ]; then echo 'broken-c++ 1.0'; exit 0; fi\n"
                                         "echo 'unit0.cpp:3:1: error: the compiler refuses' >&2\nexit 1\n");
  REQUIRE(run_command("chmod +x " + compiler).exit_code == 0);
  const std::string base = "--config " + gpt_config(dir) + " --output-dir " + dir.file("out") + " --torch-compile-backend inductor --max-steps 2";
  const CommandResult failed = run_with_cache(dir.file("cache"), base, "CXX=" + compiler);
  INFO(failed.out << failed.err);
  CHECK(failed.exit_code == 1);
  CHECK_THAT(failed.err, Contains("the C++ compiler failed on generated kernels"));
  CHECK_THAT(failed.err, Contains("the compiler refuses"));
  CHECK_THAT(failed.err, Contains("the generated source is in " + dir.file("cache") + "/cpu-kernels/build-"));

  const std::string other = "--config " + gpt_config(dir) + " --output-dir " + dir.file("other") + " --torch-compile-backend inductor";
  const CommandResult unwritable = run_with_cache("/proc/trainc-cache", other);
  CHECK(unwritable.exit_code == 2);
  CHECK_FALSE(fs::exists(dir.file("other")));  // refused before anything is written
  CHECK_THAT(unwritable.err, Contains("TRAINC_CACHE_DIR: cannot create the kernel cache directory /proc/trainc-cache/cpu-kernels"));

  const CommandResult blank = run_command("cd " + dir.path() + " && TRAINC_CACHE_DIR=' ' " + TRAINC_BINARY + " " + other);
  CHECK(blank.exit_code == 2);
  CHECK_THAT(blank.err, Contains("TRAINC_CACHE_DIR=' ': expected a directory path, or the variable unset for the default"));
  CHECK_FALSE(fs::exists(dir.file(" ")));
  CHECK_FALSE(fs::exists(dir.file("other")));

  // XDG_CACHE_HOME counts only as an absolute path, as the XDG spec says: blanks or a relative
  // path leave the cache in ~/.cache. explain makes the cache's folder without compiling.
  const std::string explain = std::string(TRAINC_BINARY) + " explain --config " + gpt_config(dir) + " --torch-compile-backend inductor";
  for (const std::string xdg : {"' '", "relative"}) {
    INFO(xdg);
    const std::string home = dir.file("home-" + std::to_string(xdg.size()));
    const CommandResult run = run_command("cd " + dir.path() + " && env -u TRAINC_CACHE_DIR XDG_CACHE_HOME=" + xdg + " HOME=" + home + " " + explain);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK(fs::is_directory(home + "/.cache/trainc/cpu-kernels"));
  }
  CHECK_FALSE(fs::exists(dir.file(" ")));
  CHECK_FALSE(fs::exists(dir.file("relative")));
  const CommandResult absolute = run_command("env -u TRAINC_CACHE_DIR XDG_CACHE_HOME=" + dir.file("xdg") + " " + explain);
  CHECK(absolute.exit_code == 0);
  CHECK(fs::is_directory(dir.file("xdg/trainc/cpu-kernels")));
}

TEST_CASE("CXX takes a compiler with its arguments, and one that cannot run is a usage error naming it", "[e2e][inductor]") {
  ScratchDir dir;
  // A wrapper in front of the compiler, as CXX="ccache g++" is written for make.
  const std::string wrapper = dir.write("wrapper", "#!/bin/sh\necho \"$@\" >> " + dir.file("wrapped") + "\nexec \"$@\"\n");
  REQUIRE(run_command("chmod +x " + wrapper).exit_code == 0);
  const std::string base = "--config " + gpt_config(dir) + " --torch-compile-backend inductor --max-steps 2 --output-dir ";
  const CommandResult wrapped = run_with_cache(dir.file("cache"), base + dir.file("out"), "CXX='" + wrapper + " c++'");
  INFO(wrapped.out << wrapped.err);
  CHECK(wrapped.exit_code == 0);
  CHECK_THAT(read_text(dir.file("wrapped")), Contains("c++ --version") && Contains("-shared"));

  const CommandResult missing = run_with_cache(dir.file("cache"), base + dir.file("missing"), "CXX=/nonexistent/g++");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("CXX=/nonexistent/g++: cannot run the C++ compiler '/nonexistent/g++' (exit 127"));
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);  // one line

  // A compiler that says it succeeded but writes nothing: named, and nothing half-published.
  const std::string silent = dir.write("silent-c++", "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'silent-c++ 1.0'; fi\nexit 0\n");
  REQUIRE(run_command("chmod +x " + silent).exit_code == 0);
  const CommandResult nothing = run_with_cache(dir.file("silent-cache"), base + dir.file("silent"), "CXX=" + silent);
  CHECK(nothing.exit_code == 1);
  CHECK_THAT(nothing.err, Contains("inductor: the C++ compiler '" + silent + "' exited 0 but wrote no library; the generated source is in " +
                                   dir.file("silent-cache") + "/cpu-kernels/build-"));
  for (const auto& entry : fs::directory_iterator(dir.file("silent-cache") + "/cpu-kernels")) {
    CHECK(entry.path().filename().string().rfind("build-", 0) == 0);  // no .cpp or .so published
  }
}

TEST_CASE("explain shows inductor's fused programs, and --dump-dir writes the generated C++", "[e2e][inductor]") {
  ScratchDir dir;
  const CommandResult explained = run_trainc("explain --config " + gpt_config(dir) + " --torch-compile-backend inductor");
  INFO(explained.out << explained.err);
  REQUIRE(explained.exit_code == 0);
  CHECK_THAT(explained.out, Contains("fused fwd    ") && Contains("generated kernels computing") && Contains("memory plan: "));
  CHECK_THAT(explained.out, Contains("fused bwd    "));
  const CommandResult dumped = run_with_cache(dir.file("cache"), "--config " + gpt_config(dir) + " --output-dir " + dir.file("out") +
                                                                     " --torch-compile-backend inductor --max-steps 1 --dump-dir " + dir.file("dump"));
  REQUIRE(dumped.exit_code == 0);
  CHECK_THAT(read_text(dir.file("dump") + "/compile-1-forward.cpp"), Contains("extern \"C\" void trainc_kernel_0(void* const* args)"));
  CHECK_THAT(read_text(dir.file("dump") + "/compile-1-backward.cpp"), Contains("#pragma omp simd"));
}

TEST_CASE("TRAINC_DISABLE_OPTIMIZATIONS turns optimizations off, the loss curve stays eager's, and an unknown name is a usage error", "[e2e][inductor]") {
  ScratchDir dir;
  const std::string config = gpt_config(dir);
  const CommandResult eager = run_trainc("--config " + config + " --output-dir " + dir.file("eager"));
  REQUIRE(eager.exit_code == 0);
  const std::string compiled = "--config " + config + " --torch-compile-backend inductor --dump-dir ";
  const CommandResult with = run_with_cache(dir.file("cache"), compiled + dir.file("dump-with") + " --output-dir " + dir.file("with"));
  REQUIRE(with.exit_code == 0);
  const std::string joint_with = read_text(dir.file("dump-with") + "/compile-1-joint.txt");
  CHECK_THAT(joint_with, Contains("linear_cross_entropy_and_dlogits(") && Contains("matmul_bias("));

  const std::string all =
      "TRAINC_DISABLE_OPTIMIZATIONS='fused_head, dlogits_in_forward,bias_epilogue,attention_choice,column_sums,sum_to_float,rematerialize,"
      "attention_lse,matmul_to_float,saved_casts,normalization_grad,fused_head,'";  // a name given twice counts once
  const CommandResult without = run_with_cache(dir.file("cache"), compiled + dir.file("dump-without") + " --output-dir " + dir.file("without"), all);
  INFO(without.out << without.err);
  REQUIRE(without.exit_code == 0);
  CHECK_THAT(without.out + without.err, Contains("compile: running without the optimizations TRAINC_DISABLE_OPTIMIZATIONS names: fused_head, "
                                                 "dlogits_in_forward, bias_epilogue, attention_choice, column_sums, sum_to_float, rematerialize, "
                                                 "attention_lse, matmul_to_float, saved_casts, normalization_grad\n"));
  const std::string joint_without = read_text(dir.file("dump-without") + "/compile-1-joint.txt");
  CHECK_THAT(joint_without, !Contains("linear_cross_entropy") && !Contains("matmul_bias("));
  const std::vector<double> expected = losses(read_metrics(dir.file("eager")));
  const std::vector<double> got = losses(read_metrics(dir.file("without")));
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-4));

  const CommandResult unknown = run_with_cache(dir.file("cache"), compiled + dir.file("dump-unknown") + " --output-dir " + dir.file("unknown"),
                                               "TRAINC_DISABLE_OPTIMIZATIONS=fused_head,fusion");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("TRAINC_DISABLE_OPTIMIZATIONS=fused_head,fusion: unknown optimization 'fusion' (expected a comma-separated "
                                   "list of: fused_head, dlogits_in_forward, bias_epilogue,"));
}
