#include "trainc/compile/runtime/embedding_grad_add.h"

#include <algorithm>
#include <cstdint>

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;
constexpr int kRowsPerBlock = kBlock / 32;  // a warp a row
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// After the generated kernels' prelude (types, k_load8, k_store8).
constexpr const char* kKernels = R"(
// trainc: a table widened to float32, then rows added into it at their indices.
extern "C" __global__ void __launch_bounds__(256) trainc_widen_bf16(const uint16_t* __restrict__ in, float* __restrict__ out,
                                                                   int64_t groups) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups; i += int64_t(gridDim.x) * blockDim.x) {
    float v[8];
    k_load8(in + 8 * i, v);
    k_store8(out + 8 * i, v);
  }
}

// Row r of `rows` ([n, width], width a multiple of 4, 16-byte aligned) added into row indices[r] of
// `table` by warp r; an index outside [0, vocabulary) adds nothing (the caller checked them).
extern "C" __global__ void __launch_bounds__(256) trainc_scatter_add_rows(const float* __restrict__ rows,
    const int64_t* __restrict__ indices, float* table, int64_t n, int width, int64_t vocabulary) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  const int64_t r = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= n) return;
  const int64_t index = indices[r];
  if (index < 0 || index >= vocabulary) return;
  const float4* from = reinterpret_cast<const float4*>(rows + r * width);
  float* to = table + index * width;
  for (int j = threadIdx.x & 31; j < width / 4; j += 32) {
    const float4 v = from[j];
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(to) + j, v);
#else
    atomicAdd(to + 4 * j, v.x);
    atomicAdd(to + 4 * j + 1, v.y);
    atomicAdd(to + 4 * j + 2, v.z);
    atomicAdd(to + 4 * j + 3, v.w);
#endif
  }
}
)";

enum Kernel : std::size_t { kWiden, kScatter };

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_widen_bf16", "trainc_scatter_add_rows"});
  return built;
}

}  // namespace

bool embedding_grad_add_kernels_take(const at::Tensor& base, const at::Tensor& grad, const at::Tensor& indices) {
  if (!TRAINC_WITH_CUDA || !base.is_cuda() || grad.device() != base.device() || indices.device() != base.device()) return false;
  const at::Tensor rows = grad.reshape({-1, grad.size(-1)});
  const bool base_ok = base.scalar_type() == at::kFloat || (base.scalar_type() == at::kBFloat16 && base.size(1) % 8 == 0);
  return base_ok && base.dim() == 2 && base.is_contiguous() && aligned_to_16_bytes(base) && rows.scalar_type() == at::kFloat &&
         rows.is_contiguous() && aligned_to_16_bytes(rows) && rows.size(1) == base.size(1) && rows.size(1) % 4 == 0 &&
         rows.size(1) < (int64_t{1} << 31) && indices.scalar_type() == at::kLong;
}

at::Tensor embedding_grad_add(const at::Tensor& base, const at::Tensor& grad, const at::Tensor& indices, bool in_place) {
  const at::Tensor rows = grad.reshape({-1, grad.size(-1)});
  const at::Tensor flat_indices = indices.reshape({-1});
  TRAINC_CHECK(!in_place || base.scalar_type() == grad.scalar_type(), "embedding_grad_add adds in place only into a base of the gradient's dtype");
  const bool by_kernels = embedding_grad_add_kernels_take(base, grad, indices);
  // In place, the result is a tensor over the base's memory but not a view of it (the base is
  // usually a view of a padded buffer): a backward's gradient becomes the parameter's .grad as it is
  // only when it is no view (runtime/compiled_step), else it is copied, 41 us for the small GPT's table.
  at::Tensor table = in_place ? at::empty({0}, base.options()).set_(base.storage(), base.storage_offset(), base.sizes(), base.strides())
                              : at::empty(base.sizes(), grad.options().memory_format(at::MemoryFormat::Contiguous));
  if (!by_kernels) {
    if (!in_place) table.copy_(base);
    return table.index_add_(0, flat_indices, rows);
  }
  if (!in_place && base.scalar_type() == at::kFloat) {
    table.copy_(base);
  } else if (int64_t groups = base.numel() / 8; !in_place && groups > 0) {
    void* in = base.data_ptr();
    void* out = table.data_ptr();
    void* parameters[] = {&in, &out, &groups};
    kernels().launch(kWiden, std::min(kMaxBlocks, (groups + kBlock - 1) / kBlock), kBlock, parameters);
  }
  int64_t n = rows.size(0);
  if (n == 0) return table;
  const at::Tensor contiguous_indices = flat_indices.contiguous();
  void* rows_data = rows.data_ptr();
  void* index_data = contiguous_indices.data_ptr();
  void* table_data = table.data_ptr();
  int width = static_cast<int>(rows.size(1));
  int64_t vocabulary = table.size(0);
  void* parameters[] = {&rows_data, &index_data, &table_data, &n, &width, &vocabulary};
  kernels().launch(kScatter, (n + kRowsPerBlock - 1) / kRowsPerBlock, kBlock, parameters);
  return table;
}

}  // namespace trainc
