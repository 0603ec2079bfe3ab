// defines: SideStream
//
// A second stream of one GPU for work that may overlap the current stream's (runtime/fused_program:
// a backward's weight gradients beside its input gradients), behind a header that builds without
// CUDA. Every ordering between the two goes through events, which a CUDA graph's capture records as
// edges: work queued on the side stream starts after everything already queued on the current
// one, and the current stream waits for the side stream's work up to a mark. The side stream is
// one per device, created for it and shared by every program (they run one after another and each
// waits for its side work before it returns); the libraries' workspaces for it are made with it,
// outside any capture. It has the device's ordinary (lowest) priority: a graph captured on a
// high-priority stream (CudaGraph) puts its own kernels ahead of the side stream's.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace trainc {

class SideStream {
 public:
  // On a CUDA device; throws in a build without CUDA.
  explicit SideStream(c10::Device device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // Queues what `work` launches on the side stream, after everything queued on the current stream.
  void run(const std::function<void()>& work);
  // Marks the side stream's work queued so far: mark `mark` (marks are numbered from 0).
  void set_mark(int mark);
  // The current stream waits for the side stream's work up to mark `mark`.
  void wait_for_mark(int mark);
  // The current stream waits for all of the side stream's work.
  void join();

  // While `run`'s work runs on this thread: the multiprocessors a large product queued there should
  // aim its kernel at, half the device's, so that a persistent GEMM (one block held on every SM it
  // targets until it ends) leaves the other half to the current stream's kernels. 0 (all of them)
  // anywhere else, and in a build without CUDA.
  static int product_sm_target();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainc
