#include "trainc/compile/runtime/column_sums.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kBlock = 256;          // 32 threads across a tile's columns, 8 down the rows
constexpr int64_t kTargetBlocks = 1024;
// 4 rows a thread at least: one group of four loads in flight. A small matrix then gets more blocks
// (the small GPT's [2048, 768] attention gradient: 192, where 16 rows a thread gave 48 and the
// kernel took 7.2 us on the step's path; the step went 1.047 -> 1.036 ms on an H200).
constexpr int64_t kMinRowsPerSplit = 32;

// After the generated kernels' prelude (types, k_load8). T's W consecutive columns are 16 bytes.
constexpr const char* kKernels = R"(
// trainc: column sums of a [rows, columns] matrix in float32, in a fixed order.
static __device__ __forceinline__ void load_group(const uint16_t* p, float (&v)[8]) { k_load8(p, v); }
static __device__ __forceinline__ void load_group(const float* p, float (&v)[4]) {
  const float4 raw = *reinterpret_cast<const float4*>(p);
  v[0] = raw.x, v[1] = raw.y, v[2] = raw.z, v[3] = raw.w;
}

// A matrix's W columns from `column` on, row by row.
template <typename T, int W> struct MatrixColumns {
  const T* at;
  int64_t row_stride;
  __device__ void load(int64_t r, float (&v)[W]) const { load_group(at + r * row_stride, v); }
};
template <typename T, int W> struct Matrix {
  const T* x;
  int columns;
  __device__ MatrixColumns<T, W> columns_from(int column) const { return {x + column, columns}; }
};

// dq, dk and dv ([B, H, T, D] each, D contiguous) read as the rows of their stack, the [B * T,
// 3 * H * D] gradient of a fused q-k-v projection's output, which is written as it is read.
struct StackedParts {
  const uint16_t* part[3];
  int64_t stride_b[3], stride_t[3], stride_h[3];
};
// Part p's field of three: by comparisons, since an index into a parameter's arrays would copy
// them to local memory.
template <typename T> static __device__ __forceinline__ T pick(int p, T first, T second, T third) {
  return p == 0 ? first : p == 1 ? second : third;
}
struct StackColumns {
  const uint16_t* at;  // row (b, t) of the part's columns is at + b * stride_b + t * stride_t
  int64_t stride_b, stride_t;
  int time;
  uint16_t* out;  // the same columns of the stack's row 0
  int64_t out_stride;
  __device__ void load(int64_t r, float (&v)[8]) const {
    const int64_t b = r / time, t = r - b * time;
    const uint4 raw = *reinterpret_cast<const uint4*>(at + b * stride_b + t * stride_t);
    *reinterpret_cast<uint4*>(out + r * out_stride) = raw;
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = __uint_as_float(words[k] << 16);
      v[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
    }
  }
};
struct Stack {
  StackedParts parts;
  int time, heads, dim;
  uint16_t* out;
  int columns;
  __device__ StackColumns columns_from(int column) const {
    const int width = heads * dim, p = column / width, within = column - p * width, h = within / dim, d = within - h * dim;
    const uint16_t* part = pick(p, parts.part[0], parts.part[1], parts.part[2]);
    const int64_t stride_h = pick(p, parts.stride_h[0], parts.stride_h[1], parts.stride_h[2]);
    return {part + h * stride_h + d, pick(p, parts.stride_b[0], parts.stride_b[1], parts.stride_b[2]),
            pick(p, parts.stride_t[0], parts.stride_t[1], parts.stride_t[2]), time, out + column, columns};
  }
};

// Block b sums tile b % tiles (32 * W columns) over split b / tiles (rows_per_split rows) into
// partials[split][column]. Thread (tx, ty) adds rows ty, ty + 8, ... of its W columns; the 8 rows
// of threads then add up through shared memory, in order.
template <int W, typename Source>
static __device__ void split_sums(const Source& source, int64_t rows, int columns, int64_t rows_per_split, int tiles,
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
    const auto reader = source.columns_from(column);
    // Four rows' loads in flight before their sums (added in row order, as one at a time would).
    int64_t r = first + ty;
    for (; r + 24 < last; r += 32) {
      float v[4][W];
      for (int u = 0; u < 4; ++u) reader.load(r + 8 * u, v[u]);
      for (int u = 0; u < 4; ++u) {
        for (int k = 0; k < W; ++k) acc[k] += v[u][k];
      }
    }
    for (; r < last; r += 8) {
      float v[W];
      reader.load(r, v);
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
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  split_sums<8>(Matrix<uint16_t, 8>{x, columns}, rows, columns, rows_per_split, tiles, partials);
}
extern "C" __global__ void __launch_bounds__(256) trainc_column_sums_f32(const float* __restrict__ x, int64_t rows, int columns,
    int64_t rows_per_split, int tiles, float* __restrict__ partials) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  split_sums<4>(Matrix<float, 4>{x, columns}, rows, columns, rows_per_split, tiles, partials);
}
extern "C" __global__ void __launch_bounds__(256) trainc_stack_column_sums_bf16(StackedParts parts, int time, int heads, int dim,
    uint16_t* __restrict__ out, int64_t rows, int columns, int64_t rows_per_split, int tiles, float* __restrict__ partials) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  split_sums<8>(Stack{parts, time, heads, dim, out, columns}, rows, columns, rows_per_split, tiles, partials);
}
// out[j] = the splits' sums of column j. A block takes 32 columns: thread (tx, ty) adds splits
// ty, ty + 8, ... of column tx in order, then the 8 rows of threads add up through shared memory,
// in order. A thread a column adding every split in turn left a narrow matrix's finish to 3 or 4
// blocks, each thread waiting on 64 loads one after another.
extern "C" __global__ void __launch_bounds__(256) trainc_column_sums_finish(const float* __restrict__ partials, int splits, int columns,
    float* __restrict__ out) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  __shared__ float shared[8][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int j = blockIdx.x * 32 + tx;
  float s = 0.0f;
  if (j < columns) {
    #pragma unroll 4
    for (int i = ty; i < splits; i += 8) s += partials[static_cast<int64_t>(i) * columns + j];
  }
  shared[ty][tx] = s;
  __syncthreads();
  if (ty != 0 || j >= columns) return;
  float total = 0.0f;
  for (int y = 0; y < 8; ++y) total += shared[y][tx];
  out[j] = total;
}
)";

enum Kernel : std::size_t { kBf16, kF32, kStackBf16, kFinish };

// The device's StackedParts, field for field.
struct StackedParts {
  const void* part[3];
  int64_t stride_b[3], stride_t[3], stride_h[3];
};
static_assert(sizeof(StackedParts) == 96, "StackedParts must match the kernel's parameter");

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_column_sums_bf16", "trainc_column_sums_f32", "trainc_stack_column_sums_bf16",
                                         "trainc_column_sums_finish"});
  return built;
}

// How a [rows, columns] matrix is cut: tiles of 32 groups of columns, splits of rows, about
// kTargetBlocks blocks in all, each split at least kMinRowsPerSplit rows.
struct Splits {
  int64_t rows = 0;
  int columns = 0;
  int tiles = 0;
  int64_t rows_per_split = 0;
  int count = 0;
};

Splits splits_of(int64_t rows, int64_t columns, int group) {
  Splits splits;
  splits.rows = rows;
  splits.columns = static_cast<int>(columns);
  splits.tiles = static_cast<int>((columns + 32 * group - 1) / (32 * group));
  const int64_t wanted = std::max<int64_t>(1, kTargetBlocks / splits.tiles);
  splits.rows_per_split = std::max(kMinRowsPerSplit, (rows + wanted - 1) / wanted);
  splits.count = static_cast<int>((rows + splits.rows_per_split - 1) / splits.rows_per_split);
  return splits;
}

// Launches `kernel` over `splits`, its parameters `leading` then (rows, columns, rows per split,
// tiles, partials), and the finish that adds the splits' partial sums into `out` (float32 [columns]).
// With one split its sums are the result: they go to `out` and there is no finish, whose one
// addition a column would give the same bits.
void launch_split_sums(Kernel kernel, std::vector<void*> leading, Splits splits, at::Tensor& out) {
  const bool one_split = splits.count == 1;
  at::Tensor partials = one_split ? out : at::empty({splits.count, splits.columns}, out.options());
  void* partial_data = partials.data_ptr();
  for (void* parameter : {static_cast<void*>(&splits.rows), static_cast<void*>(&splits.columns), static_cast<void*>(&splits.rows_per_split),
                          static_cast<void*>(&splits.tiles), static_cast<void*>(&partial_data)}) {
    leading.push_back(parameter);
  }
  kernels().launch(kernel, static_cast<int64_t>(splits.tiles) * splits.count, kBlock, leading.data());
  if (one_split) return;
  void* out_data = out.data_ptr();
  void* finish_parameters[] = {&partial_data, &splits.count, &splits.columns, &out_data};
  kernels().launch(kFinish, (splits.columns + 31) / 32, kBlock, finish_parameters);
}

// The rows a sum over x's leading `count` dimensions adds up: their sizes' product.
int64_t leading_rows(const at::Tensor& x, int64_t count) {
  int64_t rows = 1;
  for (int64_t i = 0; i < count; ++i) rows *= x.size(i);
  return rows;
}

}  // namespace

bool column_sums_supported(const at::Tensor& x, const std::vector<int64_t>& axes) {
  if (!TRAINC_WITH_CUDA || !x.is_cuda() || (x.scalar_type() != at::kBFloat16 && x.scalar_type() != at::kFloat) || !x.is_contiguous() ||
      !aligned_to_16_bytes(x) || axes.empty() || static_cast<int64_t>(axes.size()) >= x.dim()) {
    return false;
  }
  std::vector<int64_t> sorted = axes;
  for (int64_t& axis : sorted) axis = axis < 0 ? axis + x.dim() : axis;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) return false;
  }
  const int64_t rows = leading_rows(x, static_cast<int64_t>(sorted.size()));
  const int64_t columns = x.numel() / std::max<int64_t>(rows, 1);
  const int64_t group = x.scalar_type() == at::kBFloat16 ? 8 : 4;
  return rows > 0 && columns > 0 && columns % group == 0 && columns < (int64_t{1} << 30);
}

bool column_sums_rows_in_one_split(const at::Tensor& x, int64_t count) {
  return leading_rows(x, count) <= kMinRowsPerSplit;  // splits_of never cuts fewer rows
}

const std::string& column_sums_version() {
  // The splits too: max-autotune's choice between these kernels and ATen's was timed with them.
  // "one split, no finish": a single split's sums became the result without the finishing kernel.
  static const std::string version =
      content_hash({kKernels, std::to_string(kTargetBlocks), std::to_string(kMinRowsPerSplit), "one split, no finish"});
  return version;
}

at::Tensor column_sums(const at::Tensor& x, int64_t count) {
  const std::vector<int64_t> kept(x.sizes().begin() + count, x.sizes().end());
  int64_t columns = 1;
  for (int64_t size : kept) columns *= size;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  at::Tensor out = at::empty(kept, x.options().dtype(at::kFloat));
  void* data = x.data_ptr();
  launch_split_sums(bf16 ? kBf16 : kF32, {&data}, splits_of(x.numel() / columns, columns, bf16 ? 8 : 4), out);
  return out;
}

bool stack_column_sums_supported(const std::array<at::Tensor, 3>& parts, const at::Tensor& stacked) {
  if (!TRAINC_WITH_CUDA || !stacked.is_cuda() || stacked.scalar_type() != at::kBFloat16 || !stacked.is_contiguous() || !aligned_to_16_bytes(stacked)) {
    return false;
  }
  for (const at::Tensor& part : parts) {
    if (!part.is_cuda() || part.scalar_type() != at::kBFloat16 || part.dim() != 4 || part.sizes() != parts[0].sizes() || part.stride(3) != 1 ||
        part.size(3) % 8 != 0 || !aligned_to_16_bytes(part)) {
      return false;
    }
    for (int64_t d = 0; d < 3; ++d) {
      if (part.stride(d) % 8 != 0) return false;
    }
  }
  const at::IntArrayRef shape = parts[0].sizes();  // [B, H, T, D]
  return parts[0].numel() > 0 && stacked.numel() == 3 * parts[0].numel() && 3 * shape[1] * shape[3] < (int64_t{1} << 30) &&
         shape[2] < (int64_t{1} << 31);
}

void stack_column_sums(const std::array<at::Tensor, 3>& parts, at::Tensor& stacked, at::Tensor& sums) {
  const at::IntArrayRef shape = parts[0].sizes();  // [B, H, T, D]
  StackedParts stack{};
  for (std::size_t p = 0; p < 3; ++p) {
    stack.part[p] = parts[p].data_ptr();
    stack.stride_b[p] = parts[p].stride(0);
    stack.stride_h[p] = parts[p].stride(1);
    stack.stride_t[p] = parts[p].stride(2);
  }
  int time = static_cast<int>(shape[2]), heads = static_cast<int>(shape[1]), dim = static_cast<int>(shape[3]);
  void* out = stacked.data_ptr();
  launch_split_sums(kStackBf16, {&stack, &time, &heads, &dim, &out}, splits_of(shape[0] * shape[2], 3 * shape[1] * shape[3], 8), sums);
}

}  // namespace trainc
