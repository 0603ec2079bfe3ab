// defines: RenderedKernel, RenderedProgram, render_cpp_kernels
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
// pointers of the kernel's arguments, in order (see RenderedKernel::arguments).
#pragma once

#include <string>
#include <vector>

#include "trainc/compile/passes/fusion.h"

namespace trainc::codegen {

struct RenderedKernel {
  std::string symbol;                   // trainc_kernel_<i>
  std::string source;                   // the function's definition
  std::vector<ir::ValueId> arguments;   // the values read (contiguous bases), then the values stored
  int reads = 0;                        // how many of `arguments` are read
};

struct RenderedProgram {
  std::string prelude;  // what every kernel needs: math declarations, bf16 conversions
  std::vector<RenderedKernel> kernels;  // one per FusedKernel, in the schedule's kernel order
  std::string text() const;             // prelude and every kernel: one translation unit
};

RenderedProgram render_cpp_kernels(const ir::Graph& graph, const Schedule& schedule);

}  // namespace trainc::codegen
