// defines: CudaGraph, cuda_compute_capability, cuda_stream_capturing
//
// CUDA graph capture and replay (at::cuda::CUDAGraph) behind a header that builds without CUDA.
// On a CPU-only LibTorch (Debian's 1.13) constructing a CudaGraph throws; nothing constructs one
// there, since the backend registry refuses CUDA graphs without a CUDA device.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>

namespace trainc {

// The major compute capability of a CUDA device (8: Ampere, 9: Hopper); empty without CUDA.
std::optional<int> cuda_compute_capability(c10::Device device);

// Whether the current CUDA stream is being captured into a graph (false without CUDA).
bool cuda_stream_capturing();

// One graph and the side stream it is warmed up and captured on (capture needs a stream other
// than the default one). Work on the side stream starts after everything already queued on the
// current stream, and the current stream waits for it.
//
// With `high_priority`, that stream is one of the device's high-priority streams. Captured kernels
// keep the priority of the stream they were captured on (ATen instantiates graphs to use each
// node's own), so where the graph's work forks onto a stream of ordinary priority (SideStream), an
// SM that comes free takes this stream's waiting blocks first.
class CudaGraph {
 public:
  explicit CudaGraph(c10::Device device, bool high_priority = false);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Executes `work` on the side stream (the warm-up before a capture).
  void run(const std::function<void()>& work);
  // Records `work` into the graph without running it. What it allocates comes from the graph's
  // own memory pool and keeps its address for every replay. `edit`, when given, may change the
  // recorded graph (a cudaGraph_t) before it is instantiated.
  void capture(const std::function<void()>& work, const std::function<void(void* graph)>& edit = {});
  // Inside capture()'s work: the point of the recorded work after which the graph's input buffers
  // are no longer read. Each replay records an event there, on a branch of its own (a node on the
  // step's path would delay the kernel after it), which copy_inputs() waits for.
  void mark_inputs_read();
  // Inside capture()'s work: records `work` on a branch of its own that starts at this point of the
  // recorded work and that only the capture's end waits for, so nothing recorded after it waits for
  // it (the loss's bookkeeping, beside the update). Work queued after a replay waits for it.
  void beside(const std::function<void()>& work);
  // Queues `copies` (the next replay's inputs copied into the graph's buffers, from pinned host
  // memory) on the device's copy stream, after the last replay passed its mark: they run beside
  // the rest of that replay instead of between two replays. The next replay() waits for them.
  // Only for a graph captured with a mark (checked): without one the copies would race the replay.
  void copy_inputs(const std::function<void()>& copies);
  // Launches the recorded work on the current stream: one launch for the whole of it.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainc
