// defines: RuntimeKernels, aligned_to_16_bytes, launch_tensor_chunks
//
// The runtime's own CUDA kernels (cross-entropy rows, column sums, scaled rows, the embedding's
// scatter, AdamW): source written after the generated kernels' prelude (types, k_load8, k_store8,
// bf16 conversions), compiled with NVRTC once per process, on the first launch, through the
// kernel cache (runtime/cuda_modules). Each file keeps one instance:
//   RuntimeKernels& kernels() { static RuntimeKernels k(kKernels, {"trainc_a", "trainc_b"}); return k; }
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "trainc/compile/codegen/cuda_prelude.h"
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
  // Whether kernel `index` is launched as a programmatic dependent (runtime/cuda_modules).
  bool dependent_launch(std::size_t index) { return module().dependent_launch(index); }

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

// The multi-tensor kernels' launches (AdamW, the clipping norm, the bf16 casts): `tensors` tensors
// cut into launches of as many as a `Lists` holds, passed by value with the launch, each block
// working on `chunk` elements of one tensor. `Lists` has numel[] (its length is the capacity),
// block_start[] (one more: tensor k's blocks are [block_start[k], block_start[k + 1])) and count,
// which this fills; fill(lists, k, i) puts tensor i's pointers at place k and returns its element
// count; launch(lists, blocks) launches one, blocks possibly 0.
template <typename Lists, typename Fill, typename Launch>
void launch_tensor_chunks(std::size_t tensors, int64_t chunk, Fill fill, Launch launch) {
  constexpr std::size_t capacity = std::extent_v<decltype(Lists::numel)>;
  for (std::size_t first = 0; first < tensors; first += capacity) {
    Lists lists{};
    const std::size_t count = std::min(capacity, tensors - first);
    long long blocks = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const int64_t numel = fill(lists, k, first + k);
      lists.numel[k] = numel;
      lists.block_start[k] = blocks;
      blocks += (numel + chunk - 1) / chunk;
    }
    lists.block_start[count] = blocks;
    lists.count = static_cast<long long>(count);
    launch(lists, blocks);
  }
}

}  // namespace trainc
