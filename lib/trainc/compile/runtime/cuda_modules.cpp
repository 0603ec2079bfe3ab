#include "trainc/compile/runtime/cuda_modules.h"

#include <algorithm>
#include <cctype>

#include "trainc/common/error.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/optimizations.h"

#if TRAINC_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>
#endif

namespace trainc {

bool kernel_waits_for_previous(const std::string& source, const std::string& symbol) {
  static const std::string kWait = "TRAINC_WAIT_FOR_PREVIOUS_KERNEL();";
  // The source without its comments, so that a commented-out definition is not taken for one.
  std::string code;
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source.compare(i, 2, "//") == 0) {
      i = std::min(source.find('\n', i), source.size()) - 1;
    } else if (source.compare(i, 2, "/*") == 0) {
      i = std::min(source.find("*/", i + 2), source.size() - 2) + 1;
    } else {
      code += source[i];
    }
  }
  const auto identifier = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  const auto skip_space = [&](std::size_t at) {
    while (at < code.size() && std::isspace(static_cast<unsigned char>(code[at])) != 0) ++at;
    return at;
  };
  // Every definition of the symbol (one per branch of an #if, say) must begin with the wait.
  bool defined = false;
  for (std::size_t at = code.find(symbol + "("); at != std::string::npos; at = code.find(symbol + "(", at + 1)) {
    if (at > 0 && identifier(code[at - 1])) continue;  // the symbol is the end of a longer name
    // The parameter list's closing parenthesis, then the body's opening brace: a definition.
    std::size_t close = at + symbol.size();
    for (int depth = 0; close < code.size(); ++close) {
      if (code[close] == '(') ++depth;
      if (code[close] == ')' && --depth == 0) break;
    }
    const std::size_t brace = skip_space(close + 1);
    if (brace >= code.size() || code[brace] != '{') continue;  // a call or a declaration
    if (code.compare(skip_space(brace + 1), kWait.size(), kWait) != 0) return false;
    defined = true;
  }
  return defined;
}

#if TRAINC_WITH_CUDA

namespace fs = std::filesystem;

namespace {

void check_driver(CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorString(result, &text);
  throw std::runtime_error(what + ": " + (text != nullptr ? text : "CUDA driver error " + std::to_string(result)));
}

// "sm_90" for the current GPU.
std::string architecture() {
  int device = 0;
  cudaGetDevice(&device);
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, device);
  return "sm_" + std::to_string(properties.major) + std::to_string(properties.minor);
}

std::string nvrtc_identity() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_options(const std::string& arch) { return {"--gpu-architecture=" + arch, "--std=c++17"}; }

// The cubin of `source`, or a UserError with NVRTC's log (the source is left in `dir`).
std::string compile(const CudaSource& source, const std::string& key, const std::string& arch, const std::string& dir) {
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, source.text.c_str(), (key + ".cu").c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    throw std::runtime_error("nvrtcCreateProgram failed");
  }
  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult result = nvrtcCompileProgram(program, static_cast<int>(option_pointers.size()), option_pointers.data());
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  if (result != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    const fs::path left = fs::path(dir) / ("failed-" + key + ".cu");
    std::ofstream(left) << source.text;
    throw UserError("inductor: NVRTC failed on generated CUDA kernels (" + std::string(nvrtcGetErrorString(result)) + "); the source is in " +
                        left.string() + "\nNVRTC log:\n" + log,
                    kExitFailure);
  }
  std::size_t size = 0;
  nvrtcGetCUBINSize(program, &size);
  std::string cubin(size, '\0');
  nvrtcGetCUBIN(program, cubin.data());
  nvrtcDestroyProgram(&program);
  return cubin;
}

// Programmatic dependent launches: from compute capability 9.0 (Hopper), with CUDA 12's launch API.
bool dependent_launches_available() {
#if CUDA_VERSION >= 12030
  int device = 0;
  cudaGetDevice(&device);
  return cuda_compute_capability(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device))).value_or(0) >= 9;
#else
  return false;
#endif
}

std::shared_ptr<CudaModule> load(const std::string& cubin, const CudaSource& source) {
  cudaFree(nullptr);  // makes the runtime's primary context current in this thread
  CUmodule module = nullptr;
  check_driver(cuModuleLoadData(&module, cubin.data()), "loading generated CUDA kernels");
  const bool dependent = optimization_enabled(Optimization::dependent_launch) && dependent_launches_available();
  std::vector<void*> functions;
  std::vector<bool> dependent_launch;
  for (const std::string& symbol : source.symbols) {
    CUfunction function = nullptr;
    check_driver(cuModuleGetFunction(&function, module, symbol.c_str()), "kernel " + symbol);
    functions.push_back(function);
    dependent_launch.push_back(dependent && kernel_waits_for_previous(source.text, symbol));
  }
  return std::make_shared<CudaModule>(module, std::move(functions), std::move(dependent_launch));
}

}  // namespace

CudaModule::~CudaModule() {
  if (module_ != nullptr) cuModuleUnload(static_cast<CUmodule>(module_));
}

void CudaModule::launch(std::size_t index, int64_t grid, int block, void* const* arguments, std::size_t count) const {
  std::vector<void*> parameters(count);
  for (std::size_t i = 0; i < count; ++i) parameters[i] = const_cast<void**>(&arguments[i]);
  launch_with(index, grid, block, parameters.data());
}

void CudaModule::launch_with(std::size_t index, int64_t grid, int block, void** parameter_addresses, int shared_bytes) const {
  const CUstream stream = c10::cuda::getCurrentCUDAStream().stream();
  const auto function = static_cast<CUfunction>(functions_.at(index));
  // Any dynamic shared memory is allowed explicitly: a kernel's static shared memory counts toward
  // the 48 KB it gets unasked, so dynamic memory just under 48 KB can need it too.
  if (shared_bytes > 0) {
    check_driver(cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
                 "allowing a kernel " + std::to_string(shared_bytes) + " bytes of shared memory");
  }
#if CUDA_VERSION >= 12030
  if (dependent_launch_.at(index)) {
    CUlaunchAttribute dependent{};
    dependent.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    dependent.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = static_cast<unsigned>(grid), config.gridDimY = 1, config.gridDimZ = 1;
    config.blockDimX = static_cast<unsigned>(block), config.blockDimY = 1, config.blockDimZ = 1;
    config.sharedMemBytes = static_cast<unsigned>(shared_bytes);
    config.hStream = stream;
    config.attrs = &dependent;
    config.numAttrs = 1;
    check_driver(cuLaunchKernelEx(&config, function, parameter_addresses, nullptr), "launching a generated CUDA kernel");
    return;
  }
#endif
  check_driver(cuLaunchKernel(function, static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(block), 1, 1,
                              static_cast<unsigned>(shared_bytes), stream, parameter_addresses, nullptr),
               "launching a generated CUDA kernel");
}

std::vector<CudaModuleBuild> build_cuda_modules(const std::vector<CudaSource>& sources, const CompilerSettings& settings) {
  const std::string dir = kernel_cache_directory(settings, kCudaKernelsFolder);
  const std::string arch = architecture();
  std::vector<CudaModuleBuild> builds(sources.size());
  std::vector<std::string> cubins(sources.size());
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    // "checksummed": cubins end with their checksum (read_cache_entry), so those written before
    // that live under other keys and are never mistaken for damaged ones.
    std::vector<std::string> parts = {"trainc " TRAINC_VERSION, "checksummed", nvrtc_identity(), arch, sources[i].text};
    for (const std::string& option : nvrtc_options(arch)) parts.push_back(option);
    builds[i].key = content_hash(parts);
    const std::string cached = (fs::path(dir) / (builds[i].key + ".cubin")).string();
    const CacheEntry entry = read_cache_entry(cached, builds[i].key, &cubins[i]);
    if (entry == CacheEntry::damaged) discard_damaged_entry(cached);
    builds[i].cache_hit = entry == CacheEntry::intact;
    if (!builds[i].cache_hit) missing.push_back(i);
  }
  // NVRTC programs are independent: compile them side by side.
  std::vector<std::exception_ptr> errors(missing.size());
  std::vector<std::thread> threads;
  for (std::size_t m = 0; m < missing.size(); ++m) {
    threads.emplace_back([&, m] {
      try {
        const std::size_t i = missing[m];
        cubins[i] = compile(sources[i], builds[i].key, arch, dir);
      } catch (...) {
        errors[m] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (std::size_t i : missing) {
    publish_file(dir, builds[i].key + ".cu", sources[i].text);
    publish_file(dir, builds[i].key + ".cubin", cubins[i] + cache_entry_trailer(builds[i].key, cubins[i]));
  }
  for (std::size_t i = 0; i < sources.size(); ++i) builds[i].module = load(cubins[i], sources[i]);
  return builds;
}

#else

CudaModule::~CudaModule() = default;

void CudaModule::launch(std::size_t, int64_t, int, void* const*, std::size_t) const {
  throw std::logic_error("CudaModule::launch: this build of trainc has no CUDA");
}

void CudaModule::launch_with(std::size_t, int64_t, int, void**, int) const {
  throw std::logic_error("CudaModule::launch_with: this build of trainc has no CUDA");
}

std::vector<CudaModuleBuild> build_cuda_modules(const std::vector<CudaSource>&, const CompilerSettings&) {
  throw UserError("inductor: this build of trainc has no CUDA (LibTorch without CUDA), so it cannot compile CUDA kernels", kExitFailure);
}

#endif

}  // namespace trainc
