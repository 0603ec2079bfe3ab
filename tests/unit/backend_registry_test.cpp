// The backend registry's choice for a run on each device type, without a device: which backend and
// mode run, whether the step becomes a CUDA graph, and the combinations refused at start.
#include <catch2/catch.hpp>

#include "trainc/common/error.h"
#include "trainc/compile/backends/registry.h"

using namespace trainc;
using Catch::Matchers::Contains;

namespace {

TrainingArguments compiled(std::optional<std::string> backend, std::optional<std::string> mode) {
  TrainingArguments args;
  args.torch_compile = true;
  args.torch_compile_backend = std::move(backend);
  args.torch_compile_mode = std::move(mode);
  return args;
}

std::string refusal(const TrainingArguments& args, const std::string& device_type) {
  try {
    select_backend(args, device_type);
  } catch (const UserError& error) {
    CHECK(error.exit_code() == 2);
    return error.what();
  }
  FAIL("no refusal");
  return "";
}

}  // namespace

TEST_CASE("reduce-overhead and cudagraphs make the step a CUDA graph on cuda", "[compile][registry]") {
  const BackendChoice selected = select_backend(compiled(std::nullopt, "reduce-overhead"), "cuda");
  CHECK(selected.backend == "inductor");  // as torch.compile: generated CUDA kernels, replayed as a CUDA graph
  CHECK(selected.mode == "reduce-overhead");
  CHECK(selected.whole_step_graph());
  CHECK(selected.describe() == "inductor, mode reduce-overhead (selected for the hardware)");
  CHECK(select_backend(compiled(std::nullopt, std::nullopt), "cuda").backend == "inductor");

  const BackendChoice configured = select_backend(compiled("aot_eager", "reduce-overhead"), "cuda");
  CHECK(configured.whole_step_graph());
  CHECK(configured.describe() == "aot_eager, mode reduce-overhead (configured)");

  const BackendChoice graphs = select_backend(compiled("cudagraphs", std::nullopt), "cuda");
  CHECK(graphs.whole_step_graph());
  CHECK(graphs.mode == "default");

  CHECK_FALSE(select_backend(compiled("aot_eager", std::nullopt), "cuda").whole_step_graph());
}

TEST_CASE("on the CPU reduce-overhead warns and runs mode default, and cudagraphs is refused", "[compile][registry]") {
  const BackendChoice choice = select_backend(compiled("aot_eager", "reduce-overhead"), "cpu");
  CHECK(choice.mode == "default");
  CHECK_FALSE(choice.whole_step_graph());
  REQUIRE(choice.warnings.size() == 1);
  CHECK_THAT(choice.warnings[0], Contains("on cpu the step runs in mode default"));
  CHECK_THAT(refusal(compiled("cudagraphs", std::nullopt), "cpu"), Contains("cudagraphs captures the training step as a CUDA graph, "
                                                                            "which needs a CUDA device; this run is on cpu"));
}

TEST_CASE("CUDA graphs refuse what a replay cannot do", "[compile][registry]") {
  // fp16's skipped steps are decided between the step's two graphs (runtime/step_graphs).
  TrainingArguments fp16 = compiled(std::nullopt, "reduce-overhead");
  fp16.fp16 = true;
  CHECK(select_backend(fp16, "cuda").whole_step_graph());
  TrainingArguments checkpointing = compiled("cudagraphs", std::nullopt);
  checkpointing.gradient_checkpointing = true;
  CHECK_THAT(refusal(checkpointing, "cuda"), Contains("gradient_checkpointing: true with torch_compile_backend: cudagraphs"));
  CHECK(select_backend(compiled("inductor", "reduce-overhead"), "cuda").whole_step_graph());
  CHECK_THAT(refusal(compiled("cudagraphs", "max-autotune"), "cuda"), Contains("needs the inductor backend"));
}

TEST_CASE("max-autotune measures candidates under inductor, with CUDA graphs on cuda", "[compile][registry]") {
  const BackendChoice tuned = select_backend(compiled(std::nullopt, "max-autotune"), "cuda");
  CHECK(tuned.backend == "inductor");
  CHECK(tuned.autotunes());
  CHECK(tuned.whole_step_graph());
  const BackendChoice no_graphs = select_backend(compiled("inductor", "max-autotune-no-cudagraphs"), "cuda");
  CHECK(no_graphs.autotunes());
  CHECK_FALSE(no_graphs.whole_step_graph());
  CHECK_FALSE(select_backend(compiled("inductor", "reduce-overhead"), "cuda").autotunes());

  const BackendChoice on_cpu = select_backend(compiled("inductor", "max-autotune"), "cpu");
  CHECK(on_cpu.mode == "max-autotune-no-cudagraphs");
  CHECK(on_cpu.autotunes());
  CHECK_FALSE(on_cpu.whole_step_graph());
  REQUIRE(on_cpu.warnings.size() == 1);
  CHECK_THAT(on_cpu.warnings[0], Contains("on cpu the step runs in mode max-autotune-no-cudagraphs"));

  CHECK_THAT(refusal(compiled("aot_eager", "max-autotune-no-cudagraphs"), "cpu"), Contains("needs the inductor backend"));
  TrainingArguments fp16 = compiled(std::nullopt, "max-autotune");
  fp16.fp16 = true;
  CHECK(select_backend(fp16, "cuda").whole_step_graph());
  CHECK(setting_without_graphs(select_backend(fp16, "cuda")) == "torch_compile_mode: max-autotune-no-cudagraphs");
}

TEST_CASE("a forward that reads a value on the host runs the step without CUDA graphs, or is refused under fullgraph",
          "[compile][registry]") {
  const std::string read = "reads a tensor's value on the host (aten::item at net.py:7)";
  BackendChoice reduce = select_backend(compiled(std::nullopt, "reduce-overhead"), "cuda");
  decline_step_graph(reduce, "model.path net.pt", read, /*fullgraph=*/false);
  CHECK_FALSE(reduce.whole_step_graph());
  CHECK(reduce.mode == "reduce-overhead");  // the configured mode, reported as such, without its graphs
  REQUIRE(reduce.warnings.size() == 1);
  CHECK_THAT(reduce.warnings[0], Contains("torch_compile_mode: reduce-overhead: the forward of model.path net.pt reads a tensor's value on the host "
                                          "(aten::item at net.py:7)") &&
                                     Contains("the step runs without CUDA graphs, as torch_compile_mode: default runs it"));
  CHECK_THAT(reduce.graphs_declined, Contains("(aten::item at net.py:7)"));

  BackendChoice tuned = select_backend(compiled(std::nullopt, "max-autotune"), "cuda");
  decline_step_graph(tuned, "model.path net.pt", read, false);
  CHECK_FALSE(tuned.whole_step_graph());
  CHECK(tuned.autotunes());
  CHECK_THAT(tuned.warnings.at(0), Contains("as torch_compile_mode: max-autotune-no-cudagraphs runs it"));

  BackendChoice graphs = select_backend(compiled("cudagraphs", std::nullopt), "cuda");
  decline_step_graph(graphs, "model.path net.pt", read, false);
  CHECK_FALSE(graphs.whole_step_graph());
  CHECK_THAT(graphs.warnings.at(0), Contains("torch_compile_backend: cudagraphs: ") && Contains("as torch_compile_backend: eager runs it"));

  BackendChoice full = select_backend(compiled("cudagraphs", std::nullopt), "cuda");
  try {
    decline_step_graph(full, "model.path net.pt", read, /*fullgraph=*/true);
    FAIL("no refusal");
  } catch (const GraphsRefused& error) {
    CHECK(error.exit_code() == 2);
    CHECK_THAT(error.what(), Contains("torch_compile_fullgraph: true with torch_compile_backend: cudagraphs, but the forward of "
                                      "model.path net.pt reads a tensor's value on the host (aten::item at net.py:7)"));
  }

  CHECK(setting_without_graphs(select_backend(compiled("inductor", "reduce-overhead"), "cuda")) == "torch_compile_mode: default");

  // Without CUDA graphs there is nothing to decline: no warning.
  BackendChoice plain = select_backend(compiled("aot_eager", std::nullopt), "cuda");
  decline_step_graph(plain, "model.path net.pt", read, true);
  CHECK(plain.warnings.empty());
  CHECK(plain.graphs_declined.empty());
}
