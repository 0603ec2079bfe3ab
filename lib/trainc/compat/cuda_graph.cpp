#include "trainc/compat/cuda_graph.h"

#include <stdexcept>

#if TRAINC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace trainc {

#if TRAINC_WITH_CUDA

std::optional<int> cuda_compute_capability(c10::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->major;
}

bool cuda_stream_capturing() { return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None; }

struct CudaGraph::Impl {
  explicit Impl(c10::Device device)
      : index(device.index() < 0 ? 0 : device.index()), stream(c10::cuda::getStreamFromPool(false, index)) {}

  void on_side_stream(const std::function<void()>& work) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
    at::cuda::CUDAEvent queued;
    queued.record(current);
    queued.block(stream);
    {
      c10::cuda::CUDAStreamGuard on_stream(stream);
      work();
    }
    at::cuda::CUDAEvent finished;
    finished.record(stream);
    finished.block(current);
  }

  c10::DeviceIndex index;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAGraph graph;
};

CudaGraph::CudaGraph(c10::Device device) : impl_(std::make_unique<Impl>(device)) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::run(const std::function<void()>& work) { impl_->on_side_stream(work); }

void CudaGraph::capture(const std::function<void()>& work) {
  impl_->on_side_stream([&] {
    impl_->graph.capture_begin();
    try {
      work();
    } catch (...) {
      // End the capture so the stream is usable again, then report what went wrong in `work`.
      try {
        impl_->graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    impl_->graph.capture_end();
  });
}

void CudaGraph::replay() { impl_->graph.replay(); }

#else

std::optional<int> cuda_compute_capability(c10::Device) { return std::nullopt; }

bool cuda_stream_capturing() { return false; }

struct CudaGraph::Impl {};

CudaGraph::CudaGraph(c10::Device) { throw std::logic_error("CUDA graphs need a LibTorch built with CUDA"); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::run(const std::function<void()>&) {}
void CudaGraph::capture(const std::function<void()>&) {}
void CudaGraph::replay() {}

#endif

}  // namespace trainc
