// defines: BackendInfo, BackendChoice, GraphsRefused, compile_backends, select_backend, decline_step_graph,
//          setting_without_graphs
//
// The compile backends and modes by their torch.compile names, what each does in trainc, and the
// choice for a run: the configured backend, or the one selected from the hardware. A backend or
// mode this build cannot run is refused at start with the reason, never run as something else; a
// mode's CUDA graphs alone may be declined, with a warning, where the device or the model cannot
// have them (reduce-overhead on the CPU, decline_step_graph).
#pragma once

#include <string>
#include <vector>

#include "trainc/common/error.h"
#include "trainc/config/training_arguments.h"

namespace trainc {

struct BackendInfo {
  std::string name;
  bool available = false;
  std::string what;  // what it does here, or why it cannot run
};

const std::vector<BackendInfo>& compile_backends();

struct BackendChoice {
  std::string backend;  // "eager" runs uncompiled
  std::string mode;     // "default" unless configured
  bool selected_from_hardware = false;
  // The step runs as a CUDA graph: backend cudagraphs, or a compiling backend in mode
  // reduce-overhead or max-autotune (which select_backend keeps only on CUDA; with eager they have
  // no effect), unless the graphs were declined.
  bool whole_step_graph() const {
    return graphs_declined.empty() &&
           (backend == "cudagraphs" || (backend != "eager" && (mode == "reduce-overhead" || mode == "max-autotune")));
  }
  // Why the step runs without the CUDA graph its backend or mode asks for (decline_step_graph);
  // empty when it does not.
  std::string graphs_declined;
  // Modes max-autotune and max-autotune-no-cudagraphs: measure candidate implementations.
  bool autotunes() const { return mode == "max-autotune" || mode == "max-autotune-no-cudagraphs"; }
  std::vector<std::string> warnings;  // e.g. reduce-overhead on the CPU
  std::string describe() const;       // "aot_eager, mode default (configured)"
};

// device_type: "cpu" or "cuda". Throws UserError (exit 2) naming the key and the reason.
BackendChoice select_backend(const TrainingArguments& args, const std::string& device_type);

// The setting that runs `choice`'s step without CUDA graphs: "torch_compile_mode: default",
// "torch_compile_mode: max-autotune-no-cudagraphs" or "torch_compile_backend: eager".
std::string setting_without_graphs(const BackendChoice& choice);

// decline_step_graph's refusal under torch_compile_fullgraph (exit 2).
class GraphsRefused : public UserError {
 public:
  using UserError::UserError;
};

// A model (`model`: "model.path net.pt") whose forward waits for the GPU (`wait`: "reads a
// tensor's value on the host (aten::item at net.py:7)") inside the step, which a CUDA graph's
// capture cannot record. With CUDA graphs asked for, the step then runs without them, as mode
// default (or max-autotune-no-cudagraphs, or eager autograd for backend cudagraphs) would run it,
// with a warning; under torch_compile_fullgraph that is refused (GraphsRefused). No effect
// without CUDA graphs.
void decline_step_graph(BackendChoice& choice, const std::string& model, const std::string& wait, bool fullgraph);

}  // namespace trainc
