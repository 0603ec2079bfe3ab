#include "trainc/train/precision.h"

#include <ATen/Context.h>

#include "trainc/common/error.h"
#include "trainc/compat/cuda_graph.h"

namespace trainc {

Precision resolve_precision(const TrainingArguments& args, c10::Device device) {
  Precision precision;
  precision.device = device.type();
  if (args.tf32) {
    if (*args.tf32 && !device.is_cuda()) {
      throw UserError("tf32: true needs an Ampere or newer NVIDIA GPU; this run is on the CPU (unset tf32 or use a GPU)");
    }
    if (device.is_cuda()) {
      at::globalContext().setAllowTF32CuBLAS(*args.tf32);
      at::globalContext().setAllowTF32CuDNN(*args.tf32);
    }
  }
  if (args.fp16) {
    if (!device.is_cuda()) throw UserError("fp16: float16 autocast needs a CUDA GPU; on the CPU use bf16: true");
    precision = {true, c10::kHalf, device.type(), "fp16 autocast + loss scaling", ""};
  } else if (args.bf16) {
    precision = {true, c10::kBFloat16, device.type(), "bf16 autocast", ""};
  }
  const int compute_capability = cuda_compute_capability(device).value_or(0);
  if (args.torch_compile && !args.tf32 && !args.fp16 && compute_capability >= 8) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
    precision.tf32_note = "on: compiling on a compute capability " + std::to_string(compute_capability) +
                          " GPU with tf32 unset turns it on, as Hugging Face does (tf32: false keeps it off)";
  }
  return precision;
}

}  // namespace trainc
