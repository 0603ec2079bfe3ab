#include "trainc/compat/cublaslt_algorithms.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "trainc/compat/cuda_graph.h"

#if TRAINC_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>
#include <dlfcn.h>
#endif

namespace trainc {
namespace {

constexpr const char* kVariantPrefix = "cublaslt-algo-";
constexpr const char* kListPrefix = "cublaslt-algos ";

}  // namespace

std::string lt_algorithm_list_name(const std::vector<int>& indices) {
  std::string name = kListPrefix;
  for (std::size_t i = 0; i < indices.size(); ++i) name += (i ? "," : "") + std::to_string(indices[i]);
  return name;
}

std::optional<std::vector<int>> lt_algorithm_list(const std::string& variant) {
  const std::string prefix = kListPrefix;
  if (variant.size() <= prefix.size() || variant.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::vector<int> indices;
  std::size_t start = prefix.size();
  while (start <= variant.size()) {
    const std::size_t end = std::min(variant.find(',', start), variant.size());
    const std::string item = variant.substr(start, end - start);
    if (item == "-1") {
      indices.push_back(-1);
    } else {
      const std::optional<int> index = lt_algorithm_index(kVariantPrefix + item);
      if (!index) return std::nullopt;
      indices.push_back(*index);
    }
    start = end + 1;
  }
  return indices;
}

std::string lt_algorithm_name(int index) { return kVariantPrefix + std::to_string(index); }

std::optional<int> lt_algorithm_index(const std::string& variant) {
  const std::string prefix = kVariantPrefix;
  if (variant.size() <= prefix.size() || variant.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int index = 0;
  for (std::size_t i = prefix.size(); i < variant.size(); ++i) {
    if (variant[i] < '0' || variant[i] > '9' || index > 1000) return std::nullopt;
    index = index * 10 + (variant[i] - '0');
  }
  return index;
}

#if TRAINC_WITH_CUDA
namespace {

// The heuristic is asked for this many algorithms; the workspace each may use.
constexpr int kRankedAlgorithms = 16;
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// cuBLASLt's entry points in this process (the header's declarations give their types).
struct LtApi {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtGetVersion) version = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  bool loaded = false;
};

template <typename Function>
bool look_up(Function& function, const char* name) {
  function = reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
  return function != nullptr;
}

const LtApi& lt_api() {
  static const LtApi api = [] {
    LtApi a;
    a.loaded = look_up(a.create, "cublasLtCreate") && look_up(a.version, "cublasLtGetVersion") &&
               look_up(a.desc_create, "cublasLtMatmulDescCreate") && look_up(a.desc_set, "cublasLtMatmulDescSetAttribute") &&
               look_up(a.layout_create, "cublasLtMatrixLayoutCreate") && look_up(a.preference_create, "cublasLtMatmulPreferenceCreate") &&
               look_up(a.preference_set, "cublasLtMatmulPreferenceSetAttribute") &&
               look_up(a.preference_destroy, "cublasLtMatmulPreferenceDestroy") && look_up(a.heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
               look_up(a.matmul, "cublasLtMatmul");
    return a;
  }();
  return api;
}

// The split-K reductions ATen lets a product of `out` dtype use (what it sets for its own cuBLASLt
// calls): all, or none that adds partial sums in a half-precision output. ATen's setting is a bool
// in earlier versions, at::CuBLASReductionOption (0: reduced precision allowed, 1: not, split-K
// still in float32, 2: no split-K) in later ones.
template <typename Option>
uint32_t reduction_schemes(Option option) {
  constexpr uint32_t all = CUBLASLT_REDUCTION_SCHEME_MASK, none = CUBLASLT_REDUCTION_SCHEME_NONE;
  constexpr uint32_t in_float32 = none | static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  if constexpr (std::is_same_v<Option, bool>) {
    return option ? all : in_float32;
  } else {
    const int value = static_cast<int>(option);
    return value == 0 ? all : value == 1 ? in_float32 : none;
  }
}

uint32_t allowed_reductions(at::ScalarType out_dtype) {
  if (out_dtype == at::kBFloat16) return reduction_schemes(at::globalContext().allowBF16ReductionCuBLAS());
  if (out_dtype == at::kHalf) return reduction_schemes(at::globalContext().allowFP16ReductionCuBLAS());
  return static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK);  // a float32 output adds its partial sums in float32
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLASLt: ") + what + " failed with status " + std::to_string(status));
}

std::optional<cudaDataType_t> data_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return CUDA_R_16BF;
    case at::kHalf: return CUDA_R_16F;
    case at::kFloat: return CUDA_R_32F;
    default: return std::nullopt;
  }
}

// A row-major operand t [r, c] as cuBLASLt's column-major operand holding t^T: cuBLASLt computes
// out^T = b^T . a^T, whose column-major result is out's row-major memory.
struct Operand {
  int64_t rows = 0, cols = 0, ld = 0;  // the matrix as stored, column-major
  cublasOperation_t op = CUBLAS_OP_N;  // what turns the stored matrix into t^T
};

bool aligned(const void* address) { return reinterpret_cast<std::uintptr_t>(address) % 16 == 0; }

std::optional<Operand> transposed_operand(const at::Tensor& t) {
  if (t.dim() != 2 || t.numel() == 0 || !aligned(t.data_ptr())) return std::nullopt;
  const int64_t r = t.size(0), c = t.size(1);
  Operand operand;
  if (t.stride(1) == 1 && t.stride(0) >= c) {
    operand = {c, r, t.stride(0), CUBLAS_OP_N};  // memory is t^T column-major
  } else if (t.stride(0) == 1 && t.stride(1) >= r) {
    operand = {r, c, t.stride(1), CUBLAS_OP_T};  // memory is t column-major
  } else {
    return std::nullopt;
  }
  if (operand.ld * static_cast<int64_t>(t.element_size()) % 16 != 0) return std::nullopt;
  return operand;
}

// What decides the ranking: the operands' layouts and dtypes, the output's, the bias, the device,
// the multiprocessors aimed at.
using ProblemKey = std::array<int64_t, 17>;

struct Problem {
  Operand lt_a, lt_b;  // b^T and a^T
  int64_t m = 0, n = 0, k = 0;  // of a . b
  cudaDataType_t operand_type{}, out_type{};
  bool bias = false;
  LtEpilogue epilogue = LtEpilogue::none;
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_MASK;  // the split-K reductions allowed
  int device = 0;
  int32_t sm_count_target = 0;  // 0: all of them

  ProblemKey key() const {
    return {lt_a.rows, lt_a.cols, lt_a.ld, lt_a.op, lt_b.rows, lt_b.cols, lt_b.ld, lt_b.op, m, n, operand_type, out_type, bias, static_cast<int64_t>(epilogue),
            reductions, device, sm_count_target};
  }
};

std::optional<Problem> problem_of(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, at::ScalarType out_dtype, LtEpilogue epilogue) {
  if (!lt_api().loaded || !a.is_cuda() || !b.is_cuda() || a.device() != b.device()) return std::nullopt;
  const std::optional<cudaDataType_t> operand_type = data_type(a.scalar_type()), out_type = data_type(out_dtype);
  if (!operand_type || !out_type || a.scalar_type() == at::kFloat || b.scalar_type() != a.scalar_type()) return std::nullopt;
  if (out_dtype != a.scalar_type() && out_dtype != at::kFloat) return std::nullopt;
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0)) return std::nullopt;
  Problem problem;
  problem.m = a.size(0);
  problem.k = a.size(1);
  problem.n = b.size(1);
  if (problem.n * static_cast<int64_t>(c10::elementSize(out_dtype)) % 16 != 0) return std::nullopt;  // out's leading dimension
  if (bias.defined()) {
    if (bias.dim() != 1 || bias.size(0) != problem.n || !bias.is_contiguous() || bias.scalar_type() != out_dtype ||
        bias.device() != a.device() || !aligned(bias.data_ptr())) {
      return std::nullopt;
    }
    problem.bias = true;
  }
  // The GELU epilogues into bf16 or f16, the forward's with a bias, the backward's without.
  if (epilogue != LtEpilogue::none && (problem.bias != (epilogue == LtEpilogue::gelu) || out_dtype == at::kFloat)) return std::nullopt;
  problem.epilogue = epilogue;
  problem.reductions = allowed_reductions(out_dtype);
  const std::optional<Operand> lt_a = transposed_operand(b), lt_b = transposed_operand(a);
  if (!lt_a || !lt_b) return std::nullopt;
  problem.lt_a = *lt_a;
  problem.lt_b = *lt_b;
  problem.operand_type = *operand_type;
  problem.out_type = *out_type;
  problem.device = a.device().index();
  return problem;
}

// A problem's descriptors and ranked algorithms, made once and kept for the process (plans are few:
// one per distinct product of a model).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, out = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algorithms;
};

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  at::Tensor* workspace = nullptr;  // for products on every stream but the prepared ones, which run one after another
  // A stream prepared for products that run beside the others' (lt_prepare_stream) has its own:
  // a workspace is the scratch of one product at a time.
  std::map<cudaStream_t, at::Tensor*> prepared;
};

std::mutex& state_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Kept until the process ends: nothing here is destroyed at exit, after LibTorch's CUDA state may be.
std::map<int, DeviceState>& device_states() {
  static std::map<int, DeviceState>& states = *new std::map<int, DeviceState>();
  return states;
}

DeviceState& device_state(int device) {
  DeviceState& state = device_states()[device];
  if (state.handle == nullptr) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    check(lt_api().create(&state.handle), "cublasLtCreate");
  }
  return state;
}

at::Tensor* new_workspace(int device) {
  return new at::Tensor(
      at::empty({static_cast<int64_t>(kWorkspaceBytes)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, static_cast<c10::DeviceIndex>(device))));
}

// The workspace of products on `stream`: its own if it was prepared, else the device's, made on
// first use (outside a capture: the callers see to it).
void* workspace_for(int device, cudaStream_t stream) {
  DeviceState& state = device_state(device);
  const auto prepared = state.prepared.find(stream);
  if (prepared != state.prepared.end()) return prepared->second->data_ptr();
  if (state.workspace == nullptr) state.workspace = new_workspace(device);
  return state.workspace->data_ptr();
}

cudaStream_t current_stream(int device) { return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream(); }

const Plan& plan_for(const Problem& problem) {
  static std::map<ProblemKey, Plan>& plans = *new std::map<ProblemKey, Plan>();
  const ProblemKey key = problem.key();
  auto found = plans.find(key);
  if (found != plans.end()) return found->second;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(problem.device));  // the heuristic ranks for the current device
  const LtApi& api = lt_api();
  const DeviceState& state = device_state(problem.device);
  Plan plan;
  check(api.desc_create(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = problem.lt_a.op, op_b = problem.lt_b.op;
  check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "setting TRANSA");
  check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "setting TRANSB");
  // A bias per row of out^T: per column of out. The GELU epilogues keep and read the sum GELU is
  // applied to in an auxiliary matrix laid out as out^T.
  const cublasLtEpilogue_t epilogue = problem.epilogue == LtEpilogue::gelu        ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                      : problem.epilogue == LtEpilogue::gelu_grad ? CUBLASLT_EPILOGUE_DGELU
                                      : problem.bias                              ? CUBLASLT_EPILOGUE_BIAS
                                                                                  : CUBLASLT_EPILOGUE_DEFAULT;
  const cudaDataType_t vector_type = problem.out_type;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "setting the epilogue");
  }
  if (problem.bias) {
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vector_type, sizeof(vector_type)), "setting the bias dtype");
  }
  if (problem.sm_count_target > 0) {
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &problem.sm_count_target, sizeof(problem.sm_count_target)),
          "setting the multiprocessors aimed at");
  }
  if (problem.epilogue != LtEpilogue::none) {
    const int64_t aux_ld = problem.n;
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)), "setting the GELU input's leading dimension");
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &vector_type, sizeof(vector_type)), "setting the GELU input's dtype");
  }
  const auto layout = [&](cublasLtMatrixLayout_t* made, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
    check(api.layout_create(made, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), "cublasLtMatrixLayoutCreate");
  };
  layout(&plan.lt_a, problem.operand_type, problem.lt_a.rows, problem.lt_a.cols, problem.lt_a.ld);
  layout(&plan.lt_b, problem.operand_type, problem.lt_b.rows, problem.lt_b.cols, problem.lt_b.ld);
  layout(&plan.out, problem.out_type, problem.n, problem.m, problem.n);

  cublasLtMatmulPreference_t preference = nullptr;
  check(api.preference_create(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kWorkspaceBytes;
  const uint32_t alignment = 16;
  check(api.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)), "setting the workspace");
  check(api.preference_set(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &problem.reductions, sizeof(problem.reductions)),
        "setting the reductions");
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    check(api.preference_set(preference, attribute, &alignment, sizeof(alignment)), "setting an alignment");
  }
  std::array<cublasLtMatmulHeuristicResult_t, kRankedAlgorithms> results{};
  int returned = 0;
  const cublasStatus_t status = api.heuristic(state.handle, plan.desc, plan.lt_a, plan.lt_b, plan.out, plan.out, preference, kRankedAlgorithms,
                                              results.data(), &returned);
  api.preference_destroy(preference);
  // No algorithm for the problem is an empty ranking, not an error: ATen's call runs it.
  if (status == CUBLAS_STATUS_SUCCESS) {
    for (int i = 0; i < returned; ++i) {
      if (results[static_cast<std::size_t>(i)].state == CUBLAS_STATUS_SUCCESS) plan.algorithms.push_back(results[static_cast<std::size_t>(i)].algo);
    }
  }
  return plans.emplace(key, plan).first->second;
}

}  // namespace

int lt_algorithm_count(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, at::ScalarType out_dtype, int limit, LtEpilogue epilogue) {
  const std::optional<Problem> problem = problem_of(a, b, bias, out_dtype, epilogue);
  if (!problem) return 0;
  std::lock_guard<std::mutex> lock(state_mutex());
  try {
    // Asked outside a CUDA graph's capture (the first run decides): the device's handle and the
    // current stream's workspace are made here, not while a capture records.
    (void)workspace_for(problem->device, current_stream(problem->device));
    return std::min(limit, static_cast<int>(plan_for(*problem).algorithms.size()));
  } catch (const std::exception&) {
    return 0;  // a descriptor cuBLASLt refused: none runs here
  }
}

bool lt_matmul_out(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, int index,
                   LtEpilogue epilogue, const at::Tensor& aux, int sm_count_target) {
  std::optional<Problem> problem = problem_of(a, b, bias, out.scalar_type(), epilogue);
  if (problem) problem->sm_count_target = std::max(0, sm_count_target);
  const auto fits = [&](const at::Tensor& t) {
    return t.device() == a.device() && t.scalar_type() == out.scalar_type() && t.is_contiguous() && t.dim() == 2 && t.size(0) == problem->m &&
           t.size(1) == problem->n && aligned(t.data_ptr());
  };
  if (!problem || index < 0 || !fits(out) || (epilogue != LtEpilogue::none && !(aux.defined() && fits(aux)))) return false;
  std::lock_guard<std::mutex> lock(state_mutex());
  // A product first met while a capture records, or first met on this stream, has no workspace to
  // replay on yet: ATen's.
  const cudaStream_t stream = current_stream(problem->device);
  const auto known = device_states().find(problem->device);
  if ((known == device_states().end() || (known->second.workspace == nullptr && known->second.prepared.count(stream) == 0)) &&
      cuda_stream_capturing()) {
    return false;
  }
  const Plan* planned = nullptr;
  try {
    planned = &plan_for(*problem);
  } catch (const std::exception&) {
    return false;  // a descriptor cuBLASLt refused (an SM count target it does not take): ATen's
  }
  const Plan& plan = *planned;
  if (index >= static_cast<int>(plan.algorithms.size())) return false;
  const LtApi& api = lt_api();
  void* const workspace = workspace_for(problem->device, stream);
  const DeviceState& state = device_state(problem->device);
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(problem->device));
  if (problem->bias) {
    const void* bias_pointer = bias.data_ptr();
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof(bias_pointer)), "setting the bias");
  }
  if (epilogue != LtEpilogue::none) {
    void* aux_pointer = aux.data_ptr();
    check(api.desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_pointer, sizeof(aux_pointer)), "setting the GELU input");
  }
  const float alpha = 1.0f, beta = 0.0f;
  check(api.matmul(state.handle, plan.desc, &alpha, b.data_ptr(), plan.lt_a, a.data_ptr(), plan.lt_b, &beta, out.data_ptr(), plan.out,
                   out.data_ptr(), plan.out, &plan.algorithms[static_cast<std::size_t>(index)], workspace, kWorkspaceBytes, stream),
        "cublasLtMatmul");
  return true;
}

std::string cublaslt_version() { return lt_api().loaded ? std::to_string(lt_api().version()) : std::string(); }

void lt_prepare_stream(int device, void* stream) {
  if (!lt_api().loaded) return;
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& state = device_state(device);
  at::Tensor*& workspace = state.prepared[static_cast<cudaStream_t>(stream)];
  if (workspace == nullptr) workspace = new_workspace(device);
  if (state.workspace == nullptr) state.workspace = new_workspace(device);
}

#else

int lt_algorithm_count(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::ScalarType, int, LtEpilogue) { return 0; }
bool lt_matmul_out(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int, LtEpilogue, const at::Tensor&, int) { return false; }
std::string cublaslt_version() { return {}; }
void lt_prepare_stream(int, void*) {}

#endif

}  // namespace trainc
