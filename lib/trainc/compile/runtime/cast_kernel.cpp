#include "trainc/compile/runtime/cast_kernel.h"

#include <cstdint>
#include <string>

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;
constexpr int64_t kChunk = 4096;         // elements a block converts: 2 groups of 8 a thread
constexpr int kTensorsPerLaunch = 127;   // the lists below stay within 4 KB of kernel parameters

// One launch's tensors, passed by value. Every field is 8 bytes, so the host's layout and the
// kernel's are the same without padding rules to agree on.
struct CastLists {
  const float* source[kTensorsPerLaunch];
  uint16_t* destination[kTensorsPerLaunch];
  long long numel[kTensorsPerLaunch];
  long long block_start[kTensorsPerLaunch + 1];  // tensor t's chunks are blocks [block_start[t], block_start[t + 1])
  long long count;
};
static_assert(sizeof(CastLists) == 8 * (4 * kTensorsPerLaunch + 2), "CastLists must have no padding, as the kernel's");
static_assert(sizeof(CastLists) <= 4096, "a kernel's parameters past 4 KB need CUDA 12.1 or later");

// After the generated kernels' prelude (k_load8, k_store8, k_bf16_store) and the host's constants.
constexpr const char* kKernels = R"(
// trainc: float32 tensors rounded into bf16 ones.
struct CastLists {
  const float* source[TRAINC_TENSORS];
  uint16_t* destination[TRAINC_TENSORS];
  long long numel[TRAINC_TENSORS];
  long long block_start[TRAINC_TENSORS + 1];
  long long count;
};

extern "C" __global__ void __launch_bounds__(256) trainc_cast_bf16(const CastLists lists) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  int t = 0;
  while (t + 1 < lists.count && blockIdx.x >= lists.block_start[t + 1]) ++t;
  const long long begin = (blockIdx.x - lists.block_start[t]) * TRAINC_CHUNK;
  const long long end = min(begin + TRAINC_CHUNK, lists.numel[t]);
  const float* source = lists.source[t];
  uint16_t* destination = lists.destination[t];
  const long long groups_end = end / 8;  // begin is a multiple of 8; the last chunk may end in a partial group
  for (long long i = begin / 8 + threadIdx.x; i < groups_end; i += blockDim.x) {
    float v[8];
    k_load8(source + 8 * i, v);
    k_store8(destination + 8 * i, v);
  }
  for (long long i = groups_end * 8 + threadIdx.x; i < end; i += blockDim.x) destination[i] = k_bf16_store(source[i]);
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built("#define TRAINC_TENSORS " + std::to_string(kTensorsPerLaunch) + "\n#define TRAINC_CHUNK " +
                                  std::to_string(kChunk) + "\n" + kKernels,
                              {"trainc_cast_bf16"});
  return built;
}

}  // namespace

bool bf16_cast_kernel_takes(at::TensorList destinations, at::TensorList sources) {
  if (!TRAINC_WITH_CUDA || sources.empty() || destinations.size() != sources.size() || !sources.front().is_cuda()) return false;
  const at::Device device = sources.front().device();
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const at::Tensor& from = sources[i];
    const at::Tensor& to = destinations[i];
    if (from.device() != device || to.device() != device || from.scalar_type() != at::kFloat || to.scalar_type() != at::kBFloat16 ||
        from.sizes() != to.sizes() || !from.is_contiguous() || !to.is_contiguous() || !aligned_to_16_bytes(from) ||
        !aligned_to_16_bytes(to)) {
      return false;
    }
  }
  return true;
}

void bf16_cast_kernel(at::TensorList destinations, at::TensorList sources) {
  TRAINC_CHECK(bf16_cast_kernel_takes(destinations, sources),
               "bf16_cast_kernel: tensors the kernel does not take (bf16_cast_kernel_takes says which it does)");
  launch_tensor_chunks<CastLists>(
      sources.size(), kChunk,
      [&](CastLists& lists, std::size_t k, std::size_t i) {
        lists.source[k] = sources[i].data_ptr<float>();
        lists.destination[k] = reinterpret_cast<uint16_t*>(destinations[i].data_ptr());
        return sources[i].numel();
      },
      [](CastLists& lists, long long blocks) {
        if (blocks == 0) return;
        void* parameters[] = {&lists};
        kernels().launch(0, blocks, kBlock, parameters);
      });
}

}  // namespace trainc
