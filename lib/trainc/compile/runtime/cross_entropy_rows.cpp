#include "trainc/compile/runtime/cross_entropy_rows.h"

#include <cstdint>

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

#if TRAINC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace trainc {
namespace {

constexpr int kBlock = 512;
constexpr int kVector = 8;  // bf16 logits per 16-byte load and store

// After the generated kernels' prelude (types, k_bf16_load, k_bf16_store). Each thread reads W
// consecutive logits at a time: 8 (one 16-byte load) when every row starts 16-byte aligned, as the
// head's padded rows do, else 1.
constexpr const char* kKernels = R"(
// trainc: cross-entropy over rows of bf16 logits.
template <int W> static __device__ __forceinline__ void load_logits(const uint16_t* z, int j, float (&v)[W]) {
  if constexpr (W == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(z + j);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = __uint_as_float(words[k] << 16);
      v[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
    }
  } else {
    v[0] = k_bf16_load(z[j]);
  }
}

// Two floats rounded to bf16 and packed, the first in the low half: one instruction from sm_80.
static __device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
#if __CUDA_ARCH__ >= 800
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
#else
  return uint32_t(k_bf16_store(low)) | (uint32_t(k_bf16_store(high)) << 16);
#endif
}

template <int W> static __device__ __forceinline__ void store_logits(uint16_t* z, int j, const float (&v)[W]) {
  if constexpr (W == 8) {
    *reinterpret_cast<uint4*>(z + j) = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7]));
  } else {
    z[j] = k_bf16_store(v[0]);
  }
}

// The kernels are as much arithmetic as memory: each logit is read, exponentiated and (in the
// backward) written. So each logit's work is kept to a few instructions: e^(z - c) is taken as
// 2^(z * log2(e) - c * log2(e)), one FMA and the hardware's ex2 (within 2 ulp plus the FMA's
// rounding: about 1e-6 relative for logits up to 20); a group's maximum is one max.NaN a logit (a
// pair of logits in the training kernel); the gradient's scale and smoothing one FMA; two bf16
// roundings one cvt; the one-hot term is tested once a group of W. With its row in shared memory,
// the training kernel went from 1.18 to 0.80 ms for GPT-2's 16384 rows with this (from about 20
// instructions a logit to about 10), and takes one exponential a logit where the two-pass kernels
// take two (below).
constexpr float kLog2e = 1.4426950408889634f;

// 2^x; 2^-inf = 0, NaN stays NaN.
static __device__ __forceinline__ float exp2_fast(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}

// The larger of a and b, NaN when either is (fmaxf would drop it), so that NaN reaches the loss.
static __device__ __forceinline__ float max_keeping_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
#else
  return a != a || b != b ? a + b : fmaxf(a, b);
#endif
}

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
// A thread rescales its running sum only when a group of W logits raises its maximum, so each logit
// costs one exponential.
template <bool with_sum, int W>
static __device__ void row_statistics(const uint16_t* __restrict__ z, int vocabulary, float& lse, float& total) {
  __shared__ float shared_m[32], shared_s[32], shared_t[32];
  const float negative_infinity = __int_as_float(0xff800000);
  float m = negative_infinity, s = 0.0f, t = 0.0f;
  const int groups = vocabulary / W;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) {
    float v[W];
    load_logits<W>(z, i * W, v);
    float group_max = v[0];
    for (int k = 1; k < W; ++k) group_max = max_keeping_nan(group_max, v[k]);
    if (!(group_max <= m)) {
      s *= exp2_fast((m - group_max) * kLog2e);  // 0 while m is still -infinity
      m = group_max;
    }
    if (with_sum) {
      for (int k = 0; k < W; ++k) t += v[k];
    }
    if (m == negative_infinity) continue;  // masked logits so far: exp(-inf - -inf) would be NaN
    const float shift = m * kLog2e;
    for (int k = 0; k < W; ++k) s += exp2_fast(fmaf(v[k], kLog2e, -shift));
  }
  for (int j = groups * W + threadIdx.x; j < vocabulary; j += blockDim.x) {  // the last vocabulary % W logits
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

template <int W>
static __device__ void forward_row(const uint16_t* __restrict__ logits, int64_t row_stride, int vocabulary,
                                   const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {
  const int64_t row = blockIdx.x;
  const uint16_t* z = logits + row * row_stride;
  float lse, total;
  if (smoothing > 0.0f) row_statistics<true, W>(z, vocabulary, lse, total);
  else row_statistics<false, W>(z, vocabulary, lse, total);
  if (threadIdx.x == 0) {
    const int64_t target = targets[row];
    const float picked = target >= 0 && target < vocabulary ? k_bf16_load(z[target]) : 0.0f;
    loss[row] = lse - (1.0f - smoothing) * picked - (smoothing / vocabulary) * total;
  }
}

// Writes a row's logit gradients, (softmax - smoothed one-hot) * g, given the row's log-sum-exp:
// over the logits read (`to` == `from`) or from their copy in shared memory.
template <int W>
static __device__ void write_gradient(const uint16_t* from, uint16_t* to, int vocabulary, int64_t target, float lse, float smoothing, float g) {
  const float shift = lse * kLog2e, scaled_uniform = smoothing / vocabulary * g, target_term = (1.0f - smoothing) * g;
  const int groups = vocabulary / W;
  const int64_t target_group = target >= 0 && target < vocabulary ? target / W : -1;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) {
    float v[W];
    load_logits<W>(from, i * W, v);
    for (int k = 0; k < W; ++k) v[k] = fmaf(exp2_fast(fmaf(v[k], kLog2e, -shift)), g, -scaled_uniform);
    if (i == target_group) {
      for (int k = 0; k < W; ++k) v[k] -= i * W + k == target ? target_term : 0.0f;
    }
    store_logits<W>(to, i * W, v);
  }
  for (int j = groups * W + threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float gradient = fmaf(exp2_fast(fmaf(k_bf16_load(from[j]), kLog2e, -shift)), g, -scaled_uniform);
    to[j] = k_bf16_store(j == target ? gradient - target_term : gradient);
  }
}

template <int W>
static __device__ void backward_row(uint16_t* __restrict__ logits, int64_t row_stride, int vocabulary,
                                    const int64_t* __restrict__ targets, const float* __restrict__ grad, float smoothing) {
  const int64_t row = blockIdx.x;
  uint16_t* z = logits + row * row_stride;
  float lse, total;
  row_statistics<false, W>(z, vocabulary, lse, total);
  write_gradient<W>(z, z, vocabulary, targets[row], lse, smoothing, grad[row]);
}

// The forward's loss and the backward's gradient for a grad of 1, in two passes over the row.
template <int W>
static __device__ void loss_and_gradient_row(uint16_t* __restrict__ logits, int64_t row_stride, int vocabulary,
                                             const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {
  const int64_t row = blockIdx.x;
  uint16_t* z = logits + row * row_stride;
  const int64_t target = targets[row];
  // Read before row_statistics' barrier: past it, other threads overwrite the row.
  const float picked = threadIdx.x == 0 && target >= 0 && target < vocabulary ? k_bf16_load(z[target]) : 0.0f;
  float lse, total;
  if (smoothing > 0.0f) row_statistics<true, W>(z, vocabulary, lse, total);
  else row_statistics<false, W>(z, vocabulary, lse, total);
  if (threadIdx.x == 0) loss[row] = lse - (1.0f - smoothing) * picked - (smoothing / vocabulary) * total;
  write_gradient<W>(z, z, vocabulary, target, lse, smoothing, 1.0f);
}

#define TRAINC_CROSS_ENTROPY_KERNELS(W)                                                                                        \
  extern "C" __global__ void __launch_bounds__(512) trainc_cross_entropy_forward##W(const uint16_t* __restrict__ logits,      \
      int64_t row_stride, int vocabulary, const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {  \
    TRAINC_WAIT_FOR_PREVIOUS_KERNEL();                                                                                         \
    forward_row<W>(logits, row_stride, vocabulary, targets, smoothing, loss);                                                  \
  }                                                                                                                            \
  extern "C" __global__ void __launch_bounds__(512) trainc_cross_entropy_backward##W(uint16_t* __restrict__ logits,           \
      int64_t row_stride, int vocabulary, const int64_t* __restrict__ targets, const float* __restrict__ grad,               \
      float smoothing) {                                                                                                       \
    TRAINC_WAIT_FOR_PREVIOUS_KERNEL();                                                                                         \
    backward_row<W>(logits, row_stride, vocabulary, targets, grad, smoothing);                                                 \
  }                                                                                                                            \
  extern "C" __global__ void __launch_bounds__(512) trainc_cross_entropy_loss_and_gradient##W(uint16_t* __restrict__ logits, \
      int64_t row_stride, int vocabulary, const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {   \
    TRAINC_WAIT_FOR_PREVIOUS_KERNEL();                                                                                         \
    loss_and_gradient_row<W>(logits, row_stride, vocabulary, targets, smoothing, loss);                                        \
  }
TRAINC_CROSS_ENTROPY_KERNELS(8)
TRAINC_CROSS_ENTROPY_KERNELS(1)

// One 16-byte copy from global to shared memory that the thread does not wait for (cp.async), so
// all of a row's copies are in flight at once; a plain load and store before sm_80.
static __device__ __forceinline__ void copy_16_bytes_async(uint16_t* shared_to, const uint16_t* global_from) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(shared_to))), "l"(global_from)
               : "memory");
#else
  *reinterpret_cast<uint4*>(shared_to) = *reinterpret_cast<const uint4*>(global_from);
#endif
}

static __device__ __forceinline__ void wait_for_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// A block's maximum (NaN if any is) and sum of each thread's m and t, for every thread; `scratch`
// holds 64 floats, free again once every thread has passed the next barrier.
static __device__ void block_max_and_sum(float& m, float& t, float* scratch) {
  for (int mask = 16; mask > 0; mask >>= 1) {
    m = max_keeping_nan(m, __shfl_xor_sync(0xffffffffu, m, mask));
    t += __shfl_xor_sync(0xffffffffu, t, mask);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  if (lane == 0) {
    scratch[warp] = m;
    scratch[32 + warp] = t;
  }
  __syncthreads();
  m = lane < warps ? scratch[lane] : __int_as_float(0xff800000);
  t = lane < warps ? scratch[32 + lane] : 0.0f;
  for (int mask = 16; mask > 0; mask >>= 1) {
    m = max_keeping_nan(m, __shfl_xor_sync(0xffffffffu, m, mask));
    t += __shfl_xor_sync(0xffffffffu, t, mask);
  }
}

// The larger of each half of two pairs of bf16 (NaN when either is): one instruction from sm_80.
static __device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= 800
  uint32_t result;
  asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(result) : "r"(a), "r"(b));
  return result;
#else
  const float low = max_keeping_nan(__uint_as_float(a << 16), __uint_as_float(b << 16));
  const float high = max_keeping_nan(__uint_as_float(a & 0xffff0000u), __uint_as_float(b & 0xffff0000u));
  return (__float_as_uint(low) >> 16) | (__float_as_uint(high) & 0xffff0000u);
#endif
}

// Two floats rounded to float16 and packed, the first in the low half, and one float16 back.
static __device__ __forceinline__ uint32_t pack_half2(float low, float high) {
#if __CUDA_ARCH__ >= 800
  uint32_t packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
#else
  unsigned short low_bits, high_bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(low_bits) : "f"(low));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(high_bits) : "f"(high));
  return uint32_t(low_bits) | (uint32_t(high_bits) << 16);
#endif
}
static __device__ __forceinline__ float half_to_float(uint32_t bits) {
  float result;
  asm("cvt.f32.f16 %0, %1;" : "=f"(result) : "h"(static_cast<unsigned short>(bits & 0xffffu)));
  return result;
}

// The training kernel, reading each row once: the block copies its row (16-byte aligned) into
// shared memory, then takes the row's maximum (one instruction a pair of logits), then each
// exp(z - max), which it adds up and keeps in the copy in the logit's place, and then the gradient
// from those: one exponential a logit, where a running maximum (as the two-pass kernels keep)
// needs the exponential again for the gradient, and the SM's exponential unit (16 a cycle) was as
// busy as its memory. Each exponential is kept as float16 scaled by 2^14 (at most 2^14 for the
// largest logit): 11 significant bits down to 2^-28 of the largest, where the gradient is rounded
// to bf16's 8 bits, so the gradient rounds as one made from the float32 exponential but for
// values within 2^-11 (relative) of a rounding boundary; below 2^-28 of the largest, float16's
// subnormals keep fewer bits, and below about 2^-39 the exponential becomes 0: each probability
// off by at most 2^-39 (2e-12). The sum adds the float32 exponentials, so the losses agree with
// the two-pass kernels' to float32's rounding of a sum in another order.
extern "C" __global__ void __launch_bounds__(512, 2) trainc_cross_entropy_loss_and_gradient_shared(uint16_t* __restrict__ logits,
    int64_t row_stride, int vocabulary, const int64_t* __restrict__ targets, float smoothing, float* __restrict__ loss) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  extern __shared__ uint4 row_copy_words[];
  __shared__ float scratch[128];  // the two reductions' own halves: no barrier between them
  uint16_t* copy = reinterpret_cast<uint16_t*>(row_copy_words);
  const int64_t row = blockIdx.x;
  uint16_t* z = logits + row * row_stride;
  const int groups = vocabulary / 8;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) copy_16_bytes_async(copy + i * 8, z + i * 8);
  for (int j = groups * 8 + threadIdx.x; j < vocabulary; j += blockDim.x) copy[j] = z[j];
  wait_for_copies();
  __syncthreads();
  const int64_t target = targets[row];
  const float picked = threadIdx.x == 0 && target >= 0 && target < vocabulary ? k_bf16_load(copy[target]) : 0.0f;
  // The maximum, and with label smoothing the sum of the logits.
  uint32_t pair_max = 0xff80ff80u;  // bf16 -infinity twice
  float total = 0.0f;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) {
    const uint4 raw = *reinterpret_cast<const uint4*>(copy + i * 8);
    pair_max = max_bf16x2(max_bf16x2(raw.x, raw.y), max_bf16x2(pair_max, max_bf16x2(raw.z, raw.w)));
    if (smoothing > 0.0f) {
      float v[8];
      load_logits<8>(copy, i * 8, v);
      for (int k = 0; k < 8; ++k) total += v[k];
    }
  }
  float m = max_keeping_nan(__uint_as_float(pair_max << 16), __uint_as_float(pair_max & 0xffff0000u));
  for (int j = groups * 8 + threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float v = k_bf16_load(copy[j]);
    m = max_keeping_nan(m, v);
    if (smoothing > 0.0f) total += v;
  }
  block_max_and_sum(m, total, scratch);
  // 2^14 exp(z - m) = 2^(z log2(e) - m log2(e) + 14); -infinity logits give 0 (a row of them, NaN).
  const float shift = fmaf(m, kLog2e, -14.0f);
  float s = 0.0f;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) {
    float v[8];
    load_logits<8>(copy, i * 8, v);
    for (int k = 0; k < 8; ++k) {
      v[k] = exp2_fast(fmaf(v[k], kLog2e, -shift));
      s += v[k];
    }
    *reinterpret_cast<uint4*>(copy + i * 8) = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]), pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
  }
  for (int j = groups * 8 + threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float e = exp2_fast(fmaf(k_bf16_load(copy[j]), kLog2e, -shift));
    s += e;
    copy[j] = static_cast<uint16_t>(pack_half2(e, 0.0f));
  }
  float unused = 0.0f;
  block_max_and_sum(unused, s, scratch + 64);
  constexpr float kScaleLog = 9.704060527839234f;  // log(2^14)
  if (threadIdx.x == 0) loss[row] = m + (logf(s) - kScaleLog) - (1.0f - smoothing) * picked - (smoothing / vocabulary) * total;
  // The gradient: softmax = scaled exponential / its row's sum, less smoothing / V and, at the
  // target, less 1 - smoothing.
  const float reciprocal = 1.0f / s, scaled_uniform = smoothing / vocabulary, target_term = 1.0f - smoothing;
  const int64_t target_group = target >= 0 && target < vocabulary ? target / 8 : -1;
  for (int i = threadIdx.x; i < groups; i += blockDim.x) {
    const uint4 raw = *reinterpret_cast<const uint4*>(copy + i * 8);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    float v[8];
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = fmaf(half_to_float(words[k]), reciprocal, -scaled_uniform);
      v[2 * k + 1] = fmaf(half_to_float(words[k] >> 16), reciprocal, -scaled_uniform);
    }
    if (i == target_group) {
      for (int k = 0; k < 8; ++k) v[k] -= i * 8 + k == target ? target_term : 0.0f;
    }
    store_logits<8>(z, i * 8, v);
  }
  for (int j = groups * 8 + threadIdx.x; j < vocabulary; j += blockDim.x) {
    const float gradient = fmaf(half_to_float(copy[j]), reciprocal, -scaled_uniform);
    z[j] = k_bf16_store(j == target ? gradient - target_term : gradient);
  }
}
)";

// The module's kernels, in the order build_cuda_modules is given their names.
enum Kernel : std::size_t { kForwardVector, kBackwardVector, kBothVector, kForwardScalar, kBackwardScalar, kBothScalar, kBothShared };

// Whether every row of `logits` starts on a 16-byte boundary, so the kernels may read 8 at a time.
bool rows_aligned(const at::Tensor& logits) {
  return aligned_to_16_bytes(logits) && logits.stride(0) % kVector == 0;
}

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_cross_entropy_forward8", "trainc_cross_entropy_backward8",
                                         "trainc_cross_entropy_loss_and_gradient8", "trainc_cross_entropy_forward1",
                                         "trainc_cross_entropy_backward1", "trainc_cross_entropy_loss_and_gradient1",
                                         "trainc_cross_entropy_loss_and_gradient_shared"});
  return built;
}

// The shared memory the one-pass training kernel needs for a row of `vocabulary` logits, or 0 where
// two blocks of it do not fit on one SM: with one, an SM would wait for each row's copy with no
// other row's arithmetic and writes to overlap it, and the two-pass kernel runs instead.
int one_pass_shared_bytes(int64_t vocabulary) {
#if TRAINC_WITH_CUDA
  const cudaDeviceProp* properties = at::cuda::getCurrentDeviceProperties();
  const int64_t bytes = (vocabulary * 2 + 15) / 16 * 16;
  constexpr int64_t kStatic = 1024;    // the reductions' scratch (512 bytes), with room to spare
  constexpr int64_t kReserved = 1024;  // what the driver keeps of each block's shared memory
  const bool fits = properties->major >= 8 && bytes + kStatic <= static_cast<int64_t>(properties->sharedMemPerBlockOptin) &&
                    2 * (bytes + kStatic + kReserved) <= static_cast<int64_t>(properties->sharedMemPerMultiprocessor);
  return fits ? static_cast<int>(bytes) : 0;
#else
  (void)vocabulary;
  return 0;
#endif
}

// The kernels that write each row's loss, whose parameters are (logits, row stride, vocabulary,
// targets, smoothing, losses): `shared_bytes` > 0 launches `vector` with that much dynamic shared
// memory; else the vector one for rows that start 16-byte aligned, the scalar one otherwise.
void launch_writing_losses(Kernel vector, Kernel scalar, const at::Tensor& logits, const at::Tensor& targets, double smoothing, at::Tensor& loss,
                           int shared_bytes = 0) {
  if (logits.size(0) == 0) return;
  const at::Tensor contiguous_targets = targets.contiguous();
  void* data = logits.data_ptr();
  int64_t row_stride = logits.stride(0);
  int vocabulary = static_cast<int>(logits.size(1));
  void* target_data = contiguous_targets.data_ptr();
  float smoothing_f = static_cast<float>(smoothing);
  void* loss_data = loss.data_ptr();
  void* parameters[] = {&data, &row_stride, &vocabulary, &target_data, &smoothing_f, &loss_data};
  if (shared_bytes > 0) {
    kernels().launch(vector, logits.size(0), kBlock, parameters, shared_bytes);
    return;
  }
  kernels().launch(rows_aligned(logits) ? vector : scalar, logits.size(0), kBlock, parameters);
}

}  // namespace

bool cross_entropy_rows_one_pass(const at::Tensor& logits) {
  return cross_entropy_rows_supported(logits, at::kFloat) && rows_aligned(logits) && one_pass_shared_bytes(logits.size(1)) > 0;
}

bool cross_entropy_rows_supported(const at::Tensor& logits, at::ScalarType loss_dtype) {
  return TRAINC_WITH_CUDA && logits.is_cuda() && logits.scalar_type() == at::kBFloat16 && loss_dtype == at::kFloat &&
         logits.dim() == 2 && logits.stride(1) == 1 && logits.size(1) < (int64_t{1} << 31);
}

at::Tensor cross_entropy_rows_forward(const at::Tensor& logits, const at::Tensor& targets, double smoothing) {
  at::Tensor loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  launch_writing_losses(kForwardVector, kForwardScalar, logits, targets, smoothing, loss);
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
  kernels().launch(rows_aligned(logits) ? kBackwardVector : kBackwardScalar, logits.size(0), kBlock, parameters);
}

void cross_entropy_rows_loss_and_dlogits(at::Tensor& logits, const at::Tensor& targets, double smoothing, at::Tensor& loss) {
  TRAINC_CHECK(loss.scalar_type() == at::kFloat && loss.is_contiguous() && loss.numel() == logits.size(0),
               std::string("cross-entropy losses: expected contiguous float32 [") + std::to_string(logits.size(0)) + "], got " +
                   c10::toString(loss.scalar_type()) + " " + c10::str(loss.sizes()) + (loss.is_contiguous() ? "" : " (not contiguous)"));
  const int shared_bytes = cross_entropy_rows_one_pass(logits) ? one_pass_shared_bytes(logits.size(1)) : 0;
  launch_writing_losses(shared_bytes > 0 ? kBothShared : kBothVector, kBothScalar, logits, targets, smoothing, loss, shared_bytes);
}

}  // namespace trainc
