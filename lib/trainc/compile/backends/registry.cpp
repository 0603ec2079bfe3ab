#include "trainc/compile/backends/registry.h"

#include "trainc/common/error.h"

namespace trainc {

const std::vector<BackendInfo>& compile_backends() {
  static const std::vector<BackendInfo> backends = {
      {"eager", true, "no compilation: LibTorch autograd, the reference every backend is tested against"},
      {"aot_eager", true, "capture, joint forward/backward graph and partition, run op by op through ATen; no fusion"},
      {"inductor", true, "fusion into generated kernels (C++ on the CPU, CUDA through NVRTC on GPUs), a memory plan and a kernel "
                         "cache; ATen for matmul, attention and convolution"},
      {"cudagraphs", true, "the whole step (eager autograd's forward and backward, clipping, the optimizer update) captured once "
                           "as a CUDA graph and replayed; no code generation"},
      {"ipex", false, "needs Intel Extension for PyTorch, which trainc is not built with"},
      {"hpu_backend", false, "needs Habana's SynapseAI runtime and an HPU, which trainc is not built with"},
      {"neuron", false, "needs the AWS Neuron SDK and a Trainium or Inferentia device, which trainc is not built with"},
  };
  return backends;
}

std::string BackendChoice::describe() const {
  const std::string origin = selected_from_hardware ? "selected for the hardware" : "configured";
  return backend + ", mode " + mode + " (" + origin + ")";
}

BackendChoice select_backend(const TrainingArguments& args, const std::string& device_type) {
  BackendChoice choice;
  choice.mode = args.torch_compile_mode.value_or("default");
  if (args.torch_compile_backend) {
    choice.backend = *args.torch_compile_backend;
  } else {
    // torch.compile's default on CPUs and CUDA GPUs.
    choice.backend = "inductor";
    choice.selected_from_hardware = true;
  }
  const BackendInfo* info = nullptr;
  for (const BackendInfo& candidate : compile_backends()) {
    if (candidate.name == choice.backend) info = &candidate;
  }
  if (info == nullptr) {
    std::string names;
    for (const BackendInfo& candidate : compile_backends()) names += (names.empty() ? "" : ", ") + candidate.name;
    throw UserError("torch_compile_backend: unknown backend '" + choice.backend + "'; expected one of " + names);
  }
  if (!info->available) {
    const std::string origin = choice.selected_from_hardware
                                   ? "no torch_compile_backend is set and trainc selects inductor for " + device_type + ", but it "
                                   : "torch_compile_backend: " + choice.backend + " ";
    throw UserError(origin + info->what + "; set torch_compile_backend: aot_eager (compiled, run through ATen) or eager");
  }
  if (choice.backend == "eager") {
    if (args.torch_compile_mode) choice.warnings.push_back("torch_compile_mode " + choice.mode + " has no effect with backend eager");
    return choice;
  }
  if (choice.backend == "cudagraphs" && device_type != "cuda") {
    throw UserError("torch_compile_backend: cudagraphs captures the training step as a CUDA graph, which needs a CUDA device; this run "
                    "is on " + device_type + "; set torch_compile_backend: aot_eager (compiled, run through ATen) or eager");
  }
  if (choice.mode == "reduce-overhead" && device_type != "cuda") {
    choice.warnings.push_back("torch_compile_mode reduce-overhead uses CUDA graphs, which need a CUDA device; on " + device_type +
                              " the step runs in mode default");
    choice.mode = "default";
  }
  if (choice.mode == "max-autotune" && device_type != "cuda") {
    choice.warnings.push_back("torch_compile_mode max-autotune adds CUDA graphs, which need a CUDA device; on " + device_type +
                              " the step runs in mode max-autotune-no-cudagraphs");
    choice.mode = "max-autotune-no-cudagraphs";
  }
  if (choice.autotunes() && choice.backend != "inductor") {
    throw UserError("torch_compile_mode: " + choice.mode + " tunes the kernels inductor generates and the library calls it makes, which "
                    "needs the inductor backend; backend " + choice.backend + " runs mode default or reduce-overhead");
  }
  if (choice.whole_step_graph()) {
    const std::string graphs = choice.backend == "cudagraphs" ? "torch_compile_backend: cudagraphs" : "torch_compile_mode: " + choice.mode;
    if (args.gradient_checkpointing) {
      throw UserError("gradient_checkpointing: true with " + graphs + ": recomputing a checkpointed segment restores the random "
                      "generator's state from the host, which a CUDA graph cannot replay; turn one of them off");
    }
  }
  return choice;
}

std::string setting_without_graphs(const BackendChoice& choice) {
  if (choice.backend == "cudagraphs") return "torch_compile_backend: eager";
  return choice.autotunes() ? "torch_compile_mode: max-autotune-no-cudagraphs" : "torch_compile_mode: default";
}

void decline_step_graph(BackendChoice& choice, const std::string& model, const std::string& wait, bool fullgraph) {
  if (!choice.whole_step_graph()) return;
  const std::string graphs = choice.backend == "cudagraphs" ? "torch_compile_backend: cudagraphs" : "torch_compile_mode: " + choice.mode;
  const std::string why = "the forward of " + model + " " + wait +
                          ", which waits for the GPU inside the step, and a CUDA graph's capture cannot record that";
  if (fullgraph) {
    throw GraphsRefused("torch_compile_fullgraph: true with " + graphs + ", but " + why +
                        "; set torch_compile_fullgraph: false to run the step without CUDA graphs, or keep such ops out of forward");
  }
  choice.graphs_declined = why;
  choice.warnings.push_back(graphs + ": " + why + "; the step runs without CUDA graphs, as " + setting_without_graphs(choice) +
                            " runs it");
}

}  // namespace trainc
