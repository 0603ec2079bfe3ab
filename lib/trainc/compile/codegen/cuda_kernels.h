// defines: LaunchShape, tuned_launch_shapes, render_cuda_kernels
//
// The CUDA renderer: one `extern "C" __global__` function per fused kernel of a schedule, the
// same kernels the CPU renderer emits (the scheduler is shared; see kernel_layout), compiled at
// run time with NVRTC (runtime/cuda_modules).
//   - pointwise kernels: one thread per element, 256 threads a block (LaunchShape), a grid-stride loop;
//   - reductions: one block per row (grid-stride over rows); its threads stride over the row's
//     columns, and each reduction ends in a warp-shuffle tree and one across the block's warps.
//     The block is sized to the row: a quarter of its columns, rounded up to a power of two,
//     between 32 and 1024 threads. Where that is one warp and there are 1,024 rows or more, a block
//     of eight warps takes eight rows, one a warp, whose reductions stay within the warp
//     (switch warp_rows);
//   - vectorized: when a kernel's rows are a multiple of 8 long (pointwise: without per-row
//     stores), a thread takes 8 consecutive columns at a time: each bf16 or float32 operand that
//     walks the row contiguously from an aligned offset is loaded 16 bytes at a time into
//     registers, the 8 elements are computed in an unrolled loop, and such stores are written 16
//     bytes at a time (other operands: one element at a time, as before). A reduction's block is
//     then sized to two groups of 8 a thread. RenderedKernel::aligned_arguments lists the
//     pointers this needs 16-byte aligned; the runtime copies a misaligned view first.
// Shapes, strides and offsets are constants in the source; indices are 32-bit where every access
// fits, 64-bit otherwise. bf16 values are loaded to float and rounded to nearest-even when
// stored; sums and maxima accumulate in float (double for float64), as on the CPU.
// A kernel's parameters are its arguments' data pointers, in RenderedKernel::arguments' order;
// RenderedKernel::block and ::grid give the launch.
#pragma once

#include <string>
#include <vector>

#include "trainc/compile/codegen/kernel_layout.h"
#include "trainc/compile/passes/fusion.h"

namespace trainc::codegen {

// How kernels are launched: a pointwise kernel's threads per block, and a factor on the block a
// reduction sizes to its row (kept within 32..1024 threads). The default is what mode default
// runs; max-autotune compiles every kernel under each of tuned_launch_shapes() and measures them.
struct LaunchShape {
  int pointwise_block = 256;
  int reduction_scale_log2 = 0;  // the row-sized block times 2^this
  int reduction_block(int row_sized) const;
  std::string name() const;  // "pointwise 256, reductions x1"
};

// Narrower, the default, wider: {128, x1/2}, {256, x1}, {512, x2}.
const std::vector<LaunchShape>& tuned_launch_shapes();

// Kernels are named trainc_kernel_<program_name>_<i> (trainc_kernel_<i> without a name), so a
// profiler trace tells the forward's kernels from the backward's.
RenderedProgram render_cuda_kernels(const ir::Graph& graph, const Schedule& schedule, const std::string& program_name = "",
                                    const LaunchShape& shape = LaunchShape{});

}  // namespace trainc::codegen
