// defines: cuda_prelude
//
// What every CUDA source trainc compiles with NVRTC starts with: the generated kernels
// (codegen/cuda_kernels) and the runtime's hand-written ones (runtime/runtime_kernels). NVRTC has
// no standard headers, so it spells out the fixed-width types; it holds the math and bf16 helpers
// an expression reads alike for either renderer, the block reductions, and
// TRAINC_WAIT_FOR_PREVIOUS_KERNEL(), with which every kernel begins (runtime/cuda_modules).
#pragma once

namespace trainc::codegen {

const char* cuda_prelude();

}  // namespace trainc::codegen
