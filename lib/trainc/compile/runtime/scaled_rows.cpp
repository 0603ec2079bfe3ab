#include "trainc/compile/runtime/scaled_rows.h"

#include <algorithm>
#include <cstdint>

#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // more groups than threads: each thread loops

// After the generated kernels' prelude (types, k_load8, k_store8). Thread i scales 8 consecutive
// elements (16 bytes) from 8 * i, all in one row since the width is a multiple of 8. `out` may be
// `rows` (no __restrict__): each element is read before the same thread writes it.
constexpr const char* kKernels = R"(
// trainc: bf16 rows times a float32 factor each.
extern "C" __global__ void __launch_bounds__(256) trainc_scale_rows_bf16(const uint16_t* rows,
    const float* __restrict__ scale, uint16_t* out, int64_t groups, int64_t groups_per_row) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < groups; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = scale[i / groups_per_row];
    float v[8];
    k_load8(rows + 8 * i, v);
    for (int k = 0; k < 8; ++k) v[k] *= s;
    k_store8(out + 8 * i, v);
  }
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_scale_rows_bf16"});
  return built;
}

}  // namespace

bool scale_rows_kernel_takes(const at::Tensor& out, const at::Tensor& rows, const at::Tensor& scale) {
  return TRAINC_WITH_CUDA && rows.is_cuda() && out.device() == rows.device() && scale.device() == rows.device() &&
         rows.scalar_type() == at::kBFloat16 && out.scalar_type() == at::kBFloat16 && rows.dim() == 2 && rows.is_contiguous() &&
         out.is_contiguous() && out.sizes() == rows.sizes() && rows.size(1) % 8 == 0 && aligned_to_16_bytes(rows) &&
         aligned_to_16_bytes(out) && scale.scalar_type() == at::kFloat && scale.numel() == rows.size(0);
}

void scale_rows_into(at::Tensor& out, const at::Tensor& rows, const at::Tensor& scale) {
  if (!scale_rows_kernel_takes(out, rows, scale)) {
    at::mul_out(out, rows, scale.reshape({-1, 1}));
    return;
  }
  int64_t groups = rows.numel() / 8;
  if (groups == 0) return;
  int64_t groups_per_row = rows.size(1) / 8;
  const at::Tensor contiguous_scale = scale.contiguous();
  void* rows_data = rows.data_ptr();
  void* scale_data = contiguous_scale.data_ptr();
  void* out_data = out.data_ptr();
  void* parameters[] = {&rows_data, &scale_data, &out_data, &groups, &groups_per_row};
  kernels().launch(0, std::min(kMaxBlocks, (groups + kBlock - 1) / kBlock), kBlock, parameters);
}

}  // namespace trainc
