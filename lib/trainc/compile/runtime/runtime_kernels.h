// defines: RuntimeKernels, aligned_to_16_bytes
//
// The runtime's own CUDA kernels (cross-entropy rows, column sums, scaled rows, the embedding's
// scatter, AdamW): source written after the generated kernels' prelude (types, k_load8, k_store8,
// bf16 conversions), compiled with NVRTC once per process, on the first launch, through the
// kernel cache (runtime/cuda_modules). Each file keeps one instance:
//   RuntimeKernels& kernels() { static RuntimeKernels k(kKernels, {"trainc_a", "trainc_b"}); return k; }
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/runtime/cuda_modules.h"

namespace trainc {

class RuntimeKernels {
 public:
  RuntimeKernels(std::string source, std::vector<std::string> symbols) : source_(std::move(source)), symbols_(std::move(symbols)) {}

  // Launches kernel `index` (in the order of the symbols) on the current CUDA stream, with the
  // addresses of its parameters (cuLaunchKernel's convention) and `shared_bytes` of dynamic shared
  // memory a block.
  void launch(std::size_t index, int64_t grid, int block, void** parameter_addresses, int shared_bytes = 0) {
    module().launch_with(index, grid, block, parameter_addresses, shared_bytes);
  }

  // Kernel `index` as a CUfunction, built on first use.
  void* function(std::size_t index) { return module().function(index); }

 private:
  const CudaModule& module() {
    std::call_once(built_, [this] {
      module_ = build_cuda_modules({{std::string(codegen::cuda_prelude()) + source_, symbols_}}, compiler_settings_from_environment())
                    .front()
                    .module;
    });
    return *module_;
  }

  std::string source_;
  std::vector<std::string> symbols_;
  std::once_flag built_;
  std::shared_ptr<CudaModule> module_;
};

// Whether a tensor's data starts on a 16-byte boundary (the kernels' vector loads and stores).
inline bool aligned_to_16_bytes(const at::Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0; }

}  // namespace trainc
