#include "trainc/compat/cuda_graph.h"

#include <stdexcept>
#include <type_traits>
#include <utility>

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

namespace {

// Whether ATen's graph can keep what it captured for an edit before instantiating it (recent
// PyTorch: keep_graph, raw_cuda_graph, instantiate). Asked of the declarations, so no version
// number is assumed; without it a capture is instantiated as it was recorded.
template <typename Graph, typename = void>
struct keeps_graph : std::false_type {};
template <typename Graph>
struct keeps_graph<Graph, std::void_t<decltype(Graph(true)), decltype(std::declval<Graph&>().raw_cuda_graph()),
                                      decltype(std::declval<Graph&>().instantiate())>> : std::true_type {};

template <typename Graph>
Graph new_graph() {
  if constexpr (keeps_graph<Graph>::value) {
    return Graph(/*keep_graph=*/true);
  } else {
    return Graph();
  }
}

template <typename Graph>
void edit_and_instantiate(Graph& graph, const std::function<void(void*)>& edit) {
  if constexpr (keeps_graph<Graph>::value) {
    if (edit) edit(graph.raw_cuda_graph());
    graph.instantiate();
  }
}

}  // namespace

struct CudaGraph::Impl {
  Impl(c10::Device device, bool high_priority)
      : index(device.index() < 0 ? 0 : device.index()), stream(c10::cuda::getStreamFromPool(high_priority, index)) {}

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
  at::cuda::CUDAGraph graph = new_graph<at::cuda::CUDAGraph>();  // instantiated by capture(), after `edit`
};

CudaGraph::CudaGraph(c10::Device device, bool high_priority) : impl_(std::make_unique<Impl>(device, high_priority)) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::run(const std::function<void()>& work) { impl_->on_side_stream(work); }

void CudaGraph::capture(const std::function<void()>& work, const std::function<void(void* graph)>& edit) {
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
    edit_and_instantiate(impl_->graph, edit);
  });
}

void CudaGraph::replay() { impl_->graph.replay(); }

#else

std::optional<int> cuda_compute_capability(c10::Device) { return std::nullopt; }

bool cuda_stream_capturing() { return false; }

struct CudaGraph::Impl {};

CudaGraph::CudaGraph(c10::Device, bool) { throw std::logic_error("CUDA graphs need a LibTorch built with CUDA"); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::run(const std::function<void()>&) {}
void CudaGraph::capture(const std::function<void()>&, const std::function<void(void*)>&) {}
void CudaGraph::replay() {}

#endif

}  // namespace trainc
