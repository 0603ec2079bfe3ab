// defines: CudaModule, CudaModuleBuild, build_cuda_modules, kernel_waits_for_previous
//
// Generated CUDA source becomes loaded modules here: NVRTC compiles each source to a cubin for the
// current GPU's architecture (no nvcc needed), and the driver loads it. Cubins are cached on disk
// under the CPU kernel cache's rules (runtime/kernel_cache): keyed by a content hash of the source,
// NVRTC's version, the options, the architecture and trainc's version, in
// $TRAINC_CACHE_DIR/cuda-kernels/, published with an atomic rename so that runs sharing a cache
// never read a half-written file, and ending with the cache's checksum trailer: a cubin whose
// checksum fails is reported and compiled again. Sources compile in parallel. A compile error is a UserError
// (exit 1) with NVRTC's log and where the source was left.
//
// Dependent launches (switch dependent_launch, read when a module is loaded: a runtime kernel's at
// its first use; GPUs from Hopper on, CUDA 12.3 on): a kernel whose body begins with
// TRAINC_WAIT_FOR_PREVIOUS_KERNEL() (codegen's prelude) is launched as a programmatic dependent of
// the kernel before it in its stream, in a CUDA graph's capture too, and its blocks wait for that
// kernel on the GPU. After one of trainc's kernels, which let their dependents start as soon as
// they are past their own wait, the GPU launches it while that kernel's last blocks run; after a
// library's kernel, as that kernel's blocks finish. A kernel whose source does not begin so (the
// cross-entropy kernels a macro pastes together are not found in the text) is launched as before,
// since an early start is only safe for a kernel that waits before it touches memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainc/compile/runtime/kernel_cache.h"

namespace trainc {

// Whether every definition of the kernel `symbol` in `source`, comments aside, has
// TRAINC_WAIT_FOR_PREVIOUS_KERNEL(); as its body's first statement (as all of trainc's kernels
// do), and there is one. A kernel defined by a macro's token pasting is not found: false.
bool kernel_waits_for_previous(const std::string& source, const std::string& symbol);

class CudaModule {
 public:
  // dependent_launch[i]: function i is launched as a dependent of the kernel before it (above).
  CudaModule(void* module, std::vector<void*> functions, std::vector<bool> dependent_launch)
      : module_(module), functions_(std::move(functions)), dependent_launch_(std::move(dependent_launch)) {}
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  // Launches function `index` (in the order its symbol was asked for) on the current CUDA stream;
  // `arguments` holds the kernel's pointer parameters in order.
  void launch(std::size_t index, int64_t grid, int block, void* const* arguments, std::size_t count) const;
  // The same with the addresses of the kernel's parameters, whatever their types (cuLaunchKernel's
  // convention), and `shared_bytes` of dynamic shared memory a block (the function is allowed that
  // much first, whatever its static shared memory).
  void launch_with(std::size_t index, int64_t grid, int block, void** parameter_addresses, int shared_bytes = 0) const;
  // Function `index` (a CUfunction), for work launched otherwise (a CUDA graph's kernel node).
  void* function(std::size_t index) const { return functions_.at(index); }
  bool dependent_launch(std::size_t index) const { return dependent_launch_.at(index); }

 private:
  void* module_;
  std::vector<void*> functions_;
  std::vector<bool> dependent_launch_;
};

struct CudaModuleBuild {
  std::shared_ptr<CudaModule> module;
  std::string key;         // the content hash naming its cubin in the cache
  bool cache_hit = false;  // loaded from the cache: nothing was compiled
};

struct CudaSource {
  std::string text;                  // one translation unit
  std::vector<std::string> symbols;  // the kernels to look up, in launch-index order
};

std::vector<CudaModuleBuild> build_cuda_modules(const std::vector<CudaSource>& sources, const CompilerSettings& settings);

}  // namespace trainc
