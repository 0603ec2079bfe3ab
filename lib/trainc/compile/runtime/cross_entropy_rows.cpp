#include "trainc/compile/runtime/cross_entropy_rows.h"

#include <mutex>

#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/runtime/cuda_modules.h"

namespace trainc {
namespace {

constexpr int kBlock = 1024;

// After the generated kernels' prelude (types, k_bf16_load, k_bf16_store).
constexpr const char* kKernels = R"(
// trainc: cross-entropy over rows of bf16 logits.
// (m, s) is a maximum and the sum of exp(z - m) over the values seen; merged with another such pair.
static __device__ __forceinline__ void merge(float& m, float& s, float other_m, float other_s) {
  const float negative_infinity = __int_as_float(0xff800000);
  if (other_m == negative_infinity) return;
  if (m == negative_infinity) {
    m = other_m;
    s = other_s;
  } else if (other_m > m) {
    s = s * expf(m - other_m) + other_s;
    m = other_m;
  } else {
    s += other_s * expf(other_m - m);
  }
}

// The row's log-sum-exp and (when `with_sum`) the sum of its logits, for every thread of the block.
template <bool with_sum>
static __device__ void row_statistics(const uint16_t* __restrict__ z, int vocabulary, float& lse, float& total) {
  __shared__ float shared_m[32], shared_s[32], shared_t[32];
  const float negative_infinity = __int_as_float(0xff800000);
  float m = negative_infinity, s = 0.0f, t = 0.0f;
  for (int j = threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float v = k_bf16_load(z[j]);
    merge(m, s, v, 1.0f);
    if (with_sum) t += v;
  }
  for (int mask = 16; mask > 0; mask >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, mask), __shfl_xor_sync(0xffffffffu, s, mask));
    if (with_sum) t += __shfl_xor_sync(0xffffffffu, t, mask);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
    shared_t[warp] = t;
  }
  __syncthreads();
  m = lane < warps ? shared_m[lane] : negative_infinity;
  s = lane < warps ? shared_s[lane] : 0.0f;
  t = lane < warps ? shared_t[lane] : 0.0f;
  for (int mask = 16; mask > 0; mask >>= 1) {
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, mask), __shfl_xor_sync(0xffffffffu, s, mask));
    if (with_sum) t += __shfl_xor_sync(0xffffffffu, t, mask);
  }
  lse = m + logf(s);
  total = t;
}

extern "C" __global__ void __launch_bounds__(1024) trainc_cross_entropy_forward(const uint16_t* __restrict__ logits, int64_t row_stride,
    int vocabulary, const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {
  const int64_t row = blockIdx.x;
  const uint16_t* z = logits + row * row_stride;
  float lse, total;
  if (smoothing > 0.0f) row_statistics<true>(z, vocabulary, lse, total);
  else row_statistics<false>(z, vocabulary, lse, total);
  if (threadIdx.x == 0) {
    const int64_t target = targets[row];
    const float picked = target >= 0 && target < vocabulary ? k_bf16_load(z[target]) : 0.0f;
    loss[row] = lse - (1.0f - smoothing) * picked - (smoothing / vocabulary) * total;
  }
}

extern "C" __global__ void __launch_bounds__(1024) trainc_cross_entropy_backward(uint16_t* __restrict__ logits, int64_t row_stride,
    int vocabulary, const int64_t* __restrict__ targets, const float* __restrict__ grad, float smoothing) {
  const int64_t row = blockIdx.x;
  uint16_t* z = logits + row * row_stride;
  float lse, total;
  row_statistics<false>(z, vocabulary, lse, total);
  const int64_t target = targets[row];
  const float g = grad[row], uniform = smoothing / vocabulary;
  for (int j = threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float p = expf(k_bf16_load(z[j]) - lse);
    z[j] = k_bf16_store((p - uniform - (j == target ? 1.0f - smoothing : 0.0f)) * g);
  }
}
)";

const CudaModule& module() {
  static std::once_flag once;
  static std::shared_ptr<CudaModule> built;
  std::call_once(once, [] {
    const std::string source = std::string(codegen::cuda_prelude()) + kKernels;
    built = build_cuda_modules({{source, {"trainc_cross_entropy_forward", "trainc_cross_entropy_backward"}}},
                               compiler_settings_from_environment())
                .front()
                .module;
  });
  return *built;
}

}  // namespace

bool cross_entropy_rows_supported(const at::Tensor& logits, at::ScalarType loss_dtype) {
  return TRAINC_WITH_CUDA && logits.is_cuda() && logits.scalar_type() == at::kBFloat16 && loss_dtype == at::kFloat &&
         logits.dim() == 2 && logits.stride(1) == 1 && logits.size(1) < (int64_t{1} << 31);
}

at::Tensor cross_entropy_rows_forward(const at::Tensor& logits, const at::Tensor& targets, double smoothing) {
  at::Tensor loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  if (logits.size(0) == 0) return loss;
  const at::Tensor contiguous_targets = targets.contiguous();
  void* data = logits.data_ptr();
  int64_t row_stride = logits.stride(0);
  int vocabulary = static_cast<int>(logits.size(1));
  void* target_data = contiguous_targets.data_ptr();
  float smoothing_f = static_cast<float>(smoothing);
  void* loss_data = loss.data_ptr();
  void* parameters[] = {&data, &row_stride, &vocabulary, &target_data, &smoothing_f, &loss_data};
  module().launch_with(0, logits.size(0), kBlock, parameters);
  return loss;
}

void cross_entropy_rows_backward(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& grad, double smoothing) {
  if (logits.size(0) == 0) return;
  const at::Tensor contiguous_targets = targets.contiguous();
  const at::Tensor contiguous_grad = grad.contiguous();
  void* data = logits.data_ptr();
  int64_t row_stride = logits.stride(0);
  int vocabulary = static_cast<int>(logits.size(1));
  void* target_data = contiguous_targets.data_ptr();
  void* grad_data = contiguous_grad.data_ptr();
  float smoothing_f = static_cast<float>(smoothing);
  void* parameters[] = {&data, &row_stride, &vocabulary, &target_data, &grad_data, &smoothing_f};
  module().launch_with(1, logits.size(0), kBlock, parameters);
}

}  // namespace trainc
