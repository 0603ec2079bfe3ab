#include "trainc/train/adamw_kernel.h"

#include <cstdint>
#include <string>

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;
// Elements a block updates: 4 float4 groups a thread. The small GPT's 16.2M parameters make 4,064
// blocks; chunks of 16,384 made 1,016 and the step took 9-13 us longer (docs/benchmarks.md, "AdamW
// in smaller chunks"), presumably a tail of blocks running on a partly idle GPU.
constexpr int64_t kChunk = 4096;
constexpr int kTensorsPerLaunch = 56;  // the lists below stay under 4 KB of kernel parameters

// One launch's tensors, passed by value. Every field is 8 bytes, so the host's layout and the
// kernel's are the same without padding rules to agree on.
struct AdamWLists {
  float* param[kTensorsPerLaunch];
  const float* grad[kTensorsPerLaunch];
  float* exp_avg[kTensorsPerLaunch];
  float* exp_avg_sq[kTensorsPerLaunch];
  const float* step[kTensorsPerLaunch];
  uint16_t* shadow[kTensorsPerLaunch];  // the parameter's bf16 copy, or null
  double weight_decay[kTensorsPerLaunch];
  long long numel[kTensorsPerLaunch];
  long long block_start[kTensorsPerLaunch + 1];  // tensor t's chunks are blocks [block_start[t], block_start[t + 1])
  long long count;
};
static_assert(sizeof(AdamWLists) == 8 * (9 * kTensorsPerLaunch + 2), "AdamWLists must have no padding, as the kernel's");
// With the launch's other parameters: two pointers and three floats.
static_assert(sizeof(AdamWLists) + 2 * sizeof(void*) + 3 * sizeof(float) <= 4096, "a kernel's parameters past 4 KB need CUDA 12.1 or later");

// The kernel's source after the host's constants (so the two cannot disagree).
constexpr const char* kKernels = R"(
// trainc: AdamW over up to TRAINC_TENSORS float32 tensors, the gradients scaled as they are read.
struct AdamWLists {
  float* param[TRAINC_TENSORS];
  const float* grad[TRAINC_TENSORS];
  float* exp_avg[TRAINC_TENSORS];
  float* exp_avg_sq[TRAINC_TENSORS];
  const float* step[TRAINC_TENSORS];
  uint16_t* shadow[TRAINC_TENSORS];
  double weight_decay[TRAINC_TENSORS];
  long long numel[TRAINC_TENSORS];
  long long block_start[TRAINC_TENSORS + 1];
  long long count;
};

struct AdamWScalars {
  float lr, beta1, beta2, weight_decay, eps, step_size, bias_correction2_sqrt, factor;
  __device__ void update(float& p, float g, float& m, float& v) const {
    g = g * factor;
    p -= lr * weight_decay * p;
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    p -= step_size * m / (sqrtf(v) / bias_correction2_sqrt + eps);
  }
};

extern "C" __global__ void __launch_bounds__(256) trainc_adamw(const AdamWLists lists, const float* __restrict__ lr_ptr,
    const float* __restrict__ factor_ptr, float beta1, float beta2, float eps) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  int t = 0;
  while (t + 1 < lists.count && blockIdx.x >= lists.block_start[t + 1]) ++t;
  const long long begin = (blockIdx.x - lists.block_start[t]) * TRAINC_CHUNK;
  const long long end = min(begin + TRAINC_CHUNK, lists.numel[t]);
  const float step = *lists.step[t];
  AdamWScalars s;
  s.lr = *lr_ptr;
  s.beta1 = beta1, s.beta2 = beta2, s.weight_decay = static_cast<float>(lists.weight_decay[t]), s.eps = eps;
  s.step_size = s.lr / (1.0f - powf(beta1, step));
  s.bias_correction2_sqrt = sqrtf(1.0f - powf(beta2, step));
  s.factor = factor_ptr != nullptr ? *factor_ptr : 1.0f;
  float* param = lists.param[t];
  const float* grad = lists.grad[t];
  float* exp_avg = lists.exp_avg[t];
  float* exp_avg_sq = lists.exp_avg_sq[t];
  uint16_t* shadow = lists.shadow[t];
  const long long groups_end = end / 4;  // begin is a multiple of 4; the last chunk may end in a partial group
  for (long long i = begin / 4 + threadIdx.x; i < groups_end; i += blockDim.x) {
    float4 p = reinterpret_cast<float4*>(param)[i];
    const float4 g = reinterpret_cast<const float4*>(grad)[i];
    float4 m = reinterpret_cast<float4*>(exp_avg)[i];
    float4 v = reinterpret_cast<float4*>(exp_avg_sq)[i];
    s.update(p.x, g.x, m.x, v.x);
    s.update(p.y, g.y, m.y, v.y);
    s.update(p.z, g.z, m.z, v.z);
    s.update(p.w, g.w, m.w, v.w);
    reinterpret_cast<float4*>(param)[i] = p;
    reinterpret_cast<float4*>(exp_avg)[i] = m;
    reinterpret_cast<float4*>(exp_avg_sq)[i] = v;
    if (shadow != nullptr) {
      const unsigned int low = k_bf16_store(p.x) | (static_cast<unsigned int>(k_bf16_store(p.y)) << 16);
      const unsigned int high = k_bf16_store(p.z) | (static_cast<unsigned int>(k_bf16_store(p.w)) << 16);
      reinterpret_cast<uint2*>(shadow)[i] = make_uint2(low, high);
    }
  }
  for (long long i = groups_end * 4 + threadIdx.x; i < end; i += blockDim.x) {
    s.update(param[i], grad[i], exp_avg[i], exp_avg_sq[i]);
    if (shadow != nullptr) shadow[i] = k_bf16_store(param[i]);
  }
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built("#define TRAINC_TENSORS " + std::to_string(kTensorsPerLaunch) + "\n#define TRAINC_CHUNK " +
                                  std::to_string(kChunk) + "\n" + kKernels,
                              {"trainc_adamw"});
  return built;
}

bool device_float_scalar(const at::Tensor& t, const at::Device& device) {
  return t.defined() && t.device() == device && t.scalar_type() == at::kFloat && t.numel() == 1;
}

bool float_tensor_like(const at::Tensor& t, const at::Tensor& param) {
  return t.device() == param.device() && t.scalar_type() == at::kFloat && t.is_contiguous() && aligned_to_16_bytes(t) && t.numel() == param.numel();
}

// A parameter's bf16 copy the kernel writes 4 elements at a time.
bool shadow_takes(const at::Tensor& shadow, const at::Tensor& param) {
  return shadow.device() == param.device() && shadow.scalar_type() == at::kBFloat16 && shadow.is_contiguous() &&
         shadow.sizes() == param.sizes() && reinterpret_cast<std::uintptr_t>(shadow.data_ptr()) % 8 == 0;
}

}  // namespace

bool adamw_kernel_takes(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                        at::TensorList steps, const at::Tensor& learning_rate, const at::Tensor& grad_factor) {
  if (!TRAINC_WITH_CUDA || params.empty() || !params.front().is_cuda()) return false;
  const std::size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n) return false;
  const at::Device device = params.front().device();
  if (!device_float_scalar(learning_rate, device) || (grad_factor.defined() && !device_float_scalar(grad_factor, device))) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params[i];
    if (!float_tensor_like(p, p) || !float_tensor_like(grads[i], p) || !float_tensor_like(exp_avgs[i], p) ||
        !float_tensor_like(exp_avg_sqs[i], p) || !device_float_scalar(steps[i], device)) {
      return false;
    }
  }
  return true;
}

void adamw_kernel_update(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                         at::TensorList steps, const at::Tensor& learning_rate, double beta1, double beta2,
                         at::ArrayRef<double> weight_decays, double eps, const at::Tensor& grad_factor, at::TensorList shadows) {
  TRAINC_CHECK(adamw_kernel_takes(params, grads, exp_avgs, exp_avg_sqs, steps, learning_rate, grad_factor),
               "adamw_kernel_update: tensors the kernel does not take (adamw_kernel_takes says which it does)");
  TRAINC_CHECK(weight_decays.size() == params.size(), "adamw_kernel_update: one weight decay per parameter");
  TRAINC_CHECK(shadows.empty() || shadows.size() == params.size(), "adamw_kernel_update: one shadow (or none) per parameter");
  for (std::size_t i = 0; i < shadows.size(); ++i) {
    TRAINC_CHECK(!shadows[i].defined() || shadow_takes(shadows[i], params[i]),
                 "adamw_kernel_update: shadow " + std::to_string(i) + " is not a contiguous, 8-byte aligned bf16 tensor of its parameter's shape on its device");
  }
  const void* lr_data = learning_rate.data_ptr();
  const void* factor_data = grad_factor.defined() ? grad_factor.data_ptr() : nullptr;
  float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2), e = static_cast<float>(eps);
  launch_tensor_chunks<AdamWLists>(
      params.size(), kChunk,
      [&](AdamWLists& lists, std::size_t k, std::size_t i) {
        lists.param[k] = params[i].data_ptr<float>();
        lists.grad[k] = grads[i].data_ptr<float>();
        lists.exp_avg[k] = exp_avgs[i].data_ptr<float>();
        lists.exp_avg_sq[k] = exp_avg_sqs[i].data_ptr<float>();
        lists.step[k] = steps[i].data_ptr<float>();
        lists.shadow[k] = i < shadows.size() && shadows[i].defined() ? static_cast<uint16_t*>(shadows[i].data_ptr()) : nullptr;
        lists.weight_decay[k] = weight_decays[i];
        return params[i].numel();
      },
      [&](AdamWLists& lists, long long blocks) {
        if (blocks == 0) return;
        void* parameters[] = {&lists, &lr_data, &factor_data, &b1, &b2, &e};
        kernels().launch(0, blocks, kBlock, parameters);
      });
}

}  // namespace trainc
