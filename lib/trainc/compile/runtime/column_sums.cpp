#include "trainc/compile/runtime/column_sums.h"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "trainc/compile/codegen/cuda_kernels.h"
#include "trainc/compile/runtime/cuda_modules.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;          // 32 threads across a tile's columns, 8 down the rows
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinRowsPerSplit = 128;  // 16 rows a thread: four groups of four loads in flight

// After the generated kernels' prelude (types, k_load8). T's W consecutive columns are 16 bytes.
constexpr const char* kKernels = R"(
// trainc: column sums of a [rows, columns] matrix in float32, in a fixed order.
static __device__ __forceinline__ void load_group(const uint16_t* p, float (&v)[8]) { k_load8(p, v); }
static __device__ __forceinline__ void load_group(const float* p, float (&v)[4]) {
  const float4 raw = *reinterpret_cast<const float4*>(p);
  v[0] = raw.x, v[1] = raw.y, v[2] = raw.z, v[3] = raw.w;
}

// Block b sums tile b % tiles (32 * W columns) over split b / tiles (rows_per_split rows) into
// partials[split][column]. Thread (tx, ty) adds rows ty, ty + 8, ... of its W columns; the 8 rows
// of threads then add up through shared memory, in order.
template <typename T, int W>
static __device__ void split_sums(const T* __restrict__ x, int64_t rows, int columns, int64_t rows_per_split, int tiles,
                                  float* __restrict__ partials) {
  __shared__ float shared[8][32 * W];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int tile = blockIdx.x % tiles;
  const int64_t split = blockIdx.x / tiles;
  const int column = (tile * 32 + tx) * W;
  const int64_t first = split * rows_per_split, last = min(rows, first + rows_per_split);
  float acc[W];
  for (int k = 0; k < W; ++k) acc[k] = 0.0f;
  if (column < columns) {
    // Four rows' loads in flight before their sums (added in row order, as one at a time would).
    int64_t r = first + ty;
    for (; r + 24 < last; r += 32) {
      float v[4][W];
      for (int u = 0; u < 4; ++u) load_group(x + (r + 8 * u) * columns + column, v[u]);
      for (int u = 0; u < 4; ++u) {
        for (int k = 0; k < W; ++k) acc[k] += v[u][k];
      }
    }
    for (; r < last; r += 8) {
      float v[W];
      load_group(x + r * columns + column, v);
      for (int k = 0; k < W; ++k) acc[k] += v[k];
    }
  }
  for (int k = 0; k < W; ++k) shared[ty][k * 32 + tx] = acc[k];
  __syncthreads();
  const int p = threadIdx.x;
  if (p < 32 * W) {
    float s = 0.0f;
    for (int y = 0; y < 8; ++y) s += shared[y][p];
    const int j = (tile * 32 + (p & 31)) * W + (p >> 5);
    if (j < columns) partials[split * columns + j] = s;
  }
}

extern "C" __global__ void __launch_bounds__(256) trainc_column_sums_bf16(const uint16_t* __restrict__ x, int64_t rows, int columns,
    int64_t rows_per_split, int tiles, float* __restrict__ partials) {
  split_sums<uint16_t, 8>(x, rows, columns, rows_per_split, tiles, partials);
}
extern "C" __global__ void __launch_bounds__(256) trainc_column_sums_f32(const float* __restrict__ x, int64_t rows, int columns,
    int64_t rows_per_split, int tiles, float* __restrict__ partials) {
  split_sums<float, 4>(x, rows, columns, rows_per_split, tiles, partials);
}
// out[j] = the splits' sums of column j, added in split order.
extern "C" __global__ void __launch_bounds__(256) trainc_column_sums_finish(const float* __restrict__ partials, int splits, int columns,
    float* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= columns) return;
  float s = 0.0f;
  for (int i = 0; i < splits; ++i) s += partials[static_cast<int64_t>(i) * columns + j];
  out[j] = s;
}
)";

enum Kernel : std::size_t { kBf16, kF32, kFinish };

const CudaModule& module() {
  static std::once_flag once;
  static std::shared_ptr<CudaModule> built;
  std::call_once(once, [] {
    const std::string source = std::string(codegen::cuda_prelude()) + kKernels;
    built = build_cuda_modules({{source, {"trainc_column_sums_bf16", "trainc_column_sums_f32", "trainc_column_sums_finish"}}},
                               compiler_settings_from_environment())
                .front()
                .module;
  });
  return *built;
}

}  // namespace

bool column_sums_supported(const at::Tensor& x, const std::vector<int64_t>& axes) {
  if (!TRAINC_WITH_CUDA || !x.is_cuda() || (x.scalar_type() != at::kBFloat16 && x.scalar_type() != at::kFloat) || !x.is_contiguous() ||
      reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 != 0 || axes.empty() || static_cast<int64_t>(axes.size()) >= x.dim()) {
    return false;
  }
  std::vector<int64_t> sorted = axes;
  for (int64_t& axis : sorted) axis = axis < 0 ? axis + x.dim() : axis;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) return false;
  }
  int64_t rows = 1;
  for (std::size_t i = 0; i < sorted.size(); ++i) rows *= x.size(static_cast<int64_t>(i));
  const int64_t columns = x.numel() / std::max<int64_t>(rows, 1);
  const int64_t group = x.scalar_type() == at::kBFloat16 ? 8 : 4;
  return rows > 0 && columns > 0 && columns % group == 0 && columns < (int64_t{1} << 30);
}

const std::string& column_sums_version() {
  static const std::string version = content_hash({kKernels});
  return version;
}

at::Tensor column_sums(const at::Tensor& x, int64_t count) {
  const std::vector<int64_t> kept(x.sizes().begin() + count, x.sizes().end());
  int64_t columns_long = 1;
  for (int64_t size : kept) columns_long *= size;
  int64_t rows = x.numel() / columns_long;
  int columns = static_cast<int>(columns_long);
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  int tiles = static_cast<int>((columns_long + 32 * (bf16 ? 8 : 4) - 1) / (32 * (bf16 ? 8 : 4)));
  // About kTargetBlocks blocks in all, each split at least kMinRowsPerSplit rows.
  const int64_t wanted = std::max<int64_t>(1, kTargetBlocks / tiles);
  int64_t rows_per_split = std::max(kMinRowsPerSplit, (rows + wanted - 1) / wanted);
  int splits = static_cast<int>((rows + rows_per_split - 1) / rows_per_split);
  at::Tensor partials = at::empty({splits, columns_long}, x.options().dtype(at::kFloat));
  at::Tensor out = at::empty(kept, x.options().dtype(at::kFloat));
  void* data = x.data_ptr();
  void* partial_data = partials.data_ptr();
  void* split_parameters[] = {&data, &rows, &columns, &rows_per_split, &tiles, &partial_data};
  module().launch_with(bf16 ? kBf16 : kF32, static_cast<int64_t>(tiles) * splits, kBlock, split_parameters);
  void* out_data = out.data_ptr();
  void* finish_parameters[] = {&partial_data, &splits, &columns, &out_data};
  module().launch_with(kFinish, (columns_long + kBlock - 1) / kBlock, kBlock, finish_parameters);
  return out;
}

}  // namespace trainc
