// defines: memset_nodes_to_kernels, kLargestMemsetAsKernel
//
// A captured CUDA graph's small memset nodes become kernel nodes that write the same bytes, before
// the graph is instantiated. cuBLASLt and cuDNN clear small workspaces (split-K counters, attention's
// accumulators) with cudaMemsetAsync, which a capture records as memset nodes, and on an H200 the
// kernel after each such node starts 3.5-6 us after it ends, where a kernel after a kernel starts
// within 0.5 us: GPT-2's step had 123 of them, about 0.25 ms idle, the small GPT's 10, about 0.04 ms
// of a 1.27 ms step (docs/benchmarks.md). The fill kernel is CUDA source compiled once per process
// with NVRTC (runtime/cuda_modules). Where the fill kernel is launched as a programmatic dependent
// (switch dependent_launch, from Hopper on), its edges from kernels are made programmatic too, as a
// capture records such a launch: it waits for the kernel before it on the GPU before it writes. A
// memset whose edges carry anything but a full dependency (programmatic ports), or larger than
// kLargestMemsetAsKernel, stays as it is.
#pragma once

#include <cstdint>

namespace trainc {

inline constexpr int64_t kLargestMemsetAsKernel = int64_t{1} << 20;  // bytes

// Rewrites `graph` (a cudaGraph_t, not yet instantiated) in place; returns how many memset nodes
// became kernel nodes: 0 in a build without CUDA or with a CUDA older than 13 (whose graph API
// lacks edge data). Memsets on another device than the current one stay. An error (the fill
// kernel's compilation, a driver call) throws, with every node replaced so far replaced whole and
// the rest as captured, so the graph stays correct.
int memset_nodes_to_kernels(void* graph);

}  // namespace trainc
