// defines: render_cpp_kernels
//
// The CPU renderer: one C++ function per fused kernel of a schedule. A kernel's domain is split
// into rows (the dimensions it keeps) and columns (the dimensions it reduces; for a pointwise
// kernel, the innermost one). OpenMP spreads rows over threads; the column loop is contiguous
// where the data allows, and `#pragma omp simd` lets the compiler vectorize it, with glibc's
// vector math (libmvec) for exp, log, tanh and erf. Shapes, strides and offsets are constants in
// the source. bf16 values are loaded to float and rounded to nearest-even when stored; sums and
// maxima accumulate in float (double for float64).
//
// Each kernel is `extern "C" void trainc_kernel_<i>(void* const* args)`: args holds the data
// pointers of the kernel's arguments, in order (see RenderedKernel::arguments). What it shares
// with the CUDA renderer is in kernel_layout.
#pragma once

#include <string>
#include <vector>

#include "trainc/compile/codegen/kernel_layout.h"
#include "trainc/compile/passes/fusion.h"

namespace trainc::codegen {

RenderedProgram render_cpp_kernels(const ir::Graph& graph, const Schedule& schedule);

}  // namespace trainc::codegen
