#include "trainc/train/grad_norm_kernel.h"

#include <algorithm>
#include <string>

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;
constexpr int64_t kChunk = 16384;  // elements a block sums: 16 float4 groups a thread
constexpr int kTensorsPerLaunch = 128;  // the lists below stay under 4 KB of kernel parameters
constexpr int kFinishBlock = 1024;

// One launch's gradients, passed by value. Every field is 8 bytes, so the host's layout and the
// kernel's are the same without padding rules to agree on.
struct NormLists {
  const float* grad[kTensorsPerLaunch];
  long long numel[kTensorsPerLaunch];
  long long block_start[kTensorsPerLaunch + 1];  // tensor t's chunks are blocks [block_start[t], block_start[t + 1])
  long long count;
  long long first_partial;  // where this launch's blocks write their sums
};
static_assert(sizeof(NormLists) == 8 * (3 * kTensorsPerLaunch + 3), "NormLists must have no padding, as the kernel's");
static_assert(sizeof(NormLists) <= 4096, "a kernel's parameters past 4 KB need CUDA 12.1 or later");

// After the generated kernels' prelude (k_block_reduce) and the host's constants (so the two
// cannot disagree).
constexpr const char* kKernels = R"(
// trainc: the gradients' global norm and clipping's coefficient.
struct NormLists {
  const float* grad[TRAINC_TENSORS];
  long long numel[TRAINC_TENSORS];
  long long block_start[TRAINC_TENSORS + 1];
  long long count;
  long long first_partial;
};

// Each block: the sum of the squares of one chunk of one gradient.
extern "C" __global__ void __launch_bounds__(256) trainc_grad_square_sums(const NormLists lists, float* __restrict__ partials) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  int t = 0;
  while (t + 1 < lists.count && blockIdx.x >= lists.block_start[t + 1]) ++t;
  const long long begin = (blockIdx.x - lists.block_start[t]) * TRAINC_CHUNK;
  const long long end = min(begin + TRAINC_CHUNK, lists.numel[t]);
  const float* grad = lists.grad[t];
  float sum = 0.0f;
  const long long groups_end = end / 4;  // begin is a multiple of 4; the last chunk may end in a partial group
  const float4* groups = reinterpret_cast<const float4*>(grad);
  long long i = begin / 4 + threadIdx.x;
  // Four groups' loads in flight before their squares are added, in the order one at a time would
  // add them (the same sum, bit for bit).
  for (; i + 3 * blockDim.x < groups_end; i += 4 * blockDim.x) {
    float4 g[4];
    for (int u = 0; u < 4; ++u) g[u] = groups[i + u * blockDim.x];
    for (int u = 0; u < 4; ++u) sum += g[u].x * g[u].x + g[u].y * g[u].y + g[u].z * g[u].z + g[u].w * g[u].w;
  }
  for (; i < groups_end; i += blockDim.x) {
    const float4 g = groups[i];
    sum += g.x * g.x + g.y * g.y + g.z * g.z + g.w * g.w;
  }
  for (long long k = groups_end * 4 + threadIdx.x; k < end; k += blockDim.x) sum += grad[k] * grad[k];
  __shared__ float shared[33];
  sum = k_block_reduce<true>(sum, 0.0f, shared);  // a fixed shuffle tree: the same order every time
  if (threadIdx.x == 0) partials[lists.first_partial + blockIdx.x] = sum;
}

// One block: the norm, sqrt of the partial sums' total, and min(1, max_norm / (norm + 1e-6)) as
// ATen's clamp_max computes it (NaN stays NaN).
extern "C" __global__ void __launch_bounds__(1024) trainc_grad_norm_finish(const float* __restrict__ partials, long long count,
    float max_norm, float* __restrict__ norm, float* __restrict__ coefficient) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  float sum = 0.0f;
  for (long long i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  __shared__ float shared[33];
  sum = k_block_reduce<true>(sum, 0.0f, shared);
  if (threadIdx.x == 0) {
    const float total = sqrtf(sum);
    const float scale = max_norm / (total + 1e-6f);
    *norm = total;
    *coefficient = scale > 1.0f ? 1.0f : scale;
  }
}
)";

enum Kernel : std::size_t { kSquareSums, kFinish };

RuntimeKernels& kernels() {
  static RuntimeKernels built("#define TRAINC_TENSORS " + std::to_string(kTensorsPerLaunch) + "\n#define TRAINC_CHUNK " +
                                  std::to_string(kChunk) + "\n" + kKernels,
                              {"trainc_grad_square_sums", "trainc_grad_norm_finish"});
  return built;
}

int64_t chunks_of(const at::Tensor& grad) { return (grad.numel() + kChunk - 1) / kChunk; }

}  // namespace

bool grad_norm_kernel_takes(at::TensorList grads) {
  if (!TRAINC_WITH_CUDA || grads.empty() || !grads.front().is_cuda()) return false;
  const at::Device device = grads.front().device();
  return std::all_of(grads.begin(), grads.end(), [&](const at::Tensor& g) {
    return g.device() == device && g.scalar_type() == at::kFloat && g.is_contiguous() && aligned_to_16_bytes(g);
  });
}

NormAndCoefficient grad_norm_kernel(at::TensorList grads, double max_norm) {
  TRAINC_CHECK(grad_norm_kernel_takes(grads), "grad_norm_kernel: gradients the kernels do not take (grad_norm_kernel_takes says which)");
  long long partial_count = 0;
  for (const at::Tensor& grad : grads) partial_count += chunks_of(grad);
  const auto options = grads.front().options();
  at::Tensor partials = at::empty({std::max<long long>(partial_count, 1)}, options);
  at::Tensor norm = at::empty({}, options), coefficient = at::empty({}, options);
  long long first_partial = 0;
  launch_tensor_chunks<NormLists>(
      grads.size(), kChunk,
      [&](NormLists& lists, std::size_t k, std::size_t i) {
        lists.grad[k] = grads[i].data_ptr<float>();
        return grads[i].numel();
      },
      [&](NormLists& lists, long long blocks) {
        lists.first_partial = first_partial;
        first_partial += blocks;
        if (blocks == 0) return;
        void* partials_data = partials.data_ptr();
        void* parameters[] = {&lists, &partials_data};
        kernels().launch(kSquareSums, blocks, kBlock, parameters);
      });
  const void* partials_data = partials.data_ptr();
  float max_norm_f = static_cast<float>(max_norm);
  void* norm_data = norm.data_ptr();
  void* coefficient_data = coefficient.data_ptr();
  void* parameters[] = {&partials_data, &partial_count, &max_norm_f, &norm_data, &coefficient_data};
  kernels().launch(kFinish, 1, kFinishBlock, parameters);
  return {norm, coefficient};
}

}  // namespace trainc
