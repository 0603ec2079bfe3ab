#include "trainc/compat/cuda_graph.h"

#include "trainc/compat/dedicated_stream.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if TRAINC_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <unistd.h>
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

// TRAINC_CUDA_GRAPH_DOT=DIR: each captured graph, as it is instantiated, written to
// DIR/graph-PID-N.dot by CUDA's own printer (nodes, their parameters, edges). A debugging aid: a
// file that cannot be written is a warning, not the run's end.
void write_dot(void* graph) {
  const char* dir = std::getenv("TRAINC_CUDA_GRAPH_DOT");
  if (dir == nullptr || *dir == '\0') return;
  static std::atomic<int> written{0};
  const std::string path = std::string(dir) + "/graph-" + std::to_string(getpid()) + "-" + std::to_string(written++) + ".dot";
  const cudaError_t result = cudaGraphDebugDotPrint(static_cast<cudaGraph_t>(graph), path.c_str(), cudaGraphDebugDotFlagsVerbose);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();  // the error is reported here, not left for the next CUDA call
    TORCH_WARN("TRAINC_CUDA_GRAPH_DOT: could not write ", path, " (", cudaGetErrorString(result), ")");
  }
}

template <typename Graph>
void edit_and_instantiate(Graph& graph, const std::function<void(void*)>& edit) {
  if constexpr (keeps_graph<Graph>::value) {
    if (edit) edit(graph.raw_cuda_graph());
    write_dot(graph.raw_cuda_graph());
    graph.instantiate();
  }
}

// An event for a graph's event record node, made outside any capture. Declared before the graph
// in Impl, so the instantiated graph that records it is destroyed first.
struct RecordedEvent {
  explicit RecordedEvent(c10::DeviceIndex index) {
    c10::cuda::CUDAGuard on_device(index);
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  ~RecordedEvent() { cudaEventDestroy(event); }  // released once pending work has passed it
  RecordedEvent(const RecordedEvent&) = delete;
  RecordedEvent& operator=(const RecordedEvent&) = delete;
  cudaEvent_t event = nullptr;
};

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

  // The streams a capture branched onto (the copy stream at mark_inputs_read, the branch of
  // beside()) rejoin it: a capture ends with every stream it reached joined.
  void join_branches() {
    const std::vector<c10::cuda::CUDAStream> open = std::exchange(branches, {});
    for (const c10::cuda::CUDAStream& branch : open) {
      at::cuda::CUDAEvent passed;
      passed.record(branch);
      passed.block(c10::cuda::getCurrentCUDAStream(index));
    }
  }

  // `branch` joins the capture at the current stream's point of it.
  void branch_from_current(const c10::cuda::CUDAStream& branch) {
    at::cuda::CUDAEvent reached;
    reached.record(c10::cuda::getCurrentCUDAStream(index));
    reached.block(branch);
    branches.push_back(branch);
  }

  c10::DeviceIndex index;
  c10::cuda::CUDAStream stream;
  c10::cuda::CUDAStream copies = dedicated_stream("input copies", index);
  RecordedEvent inputs_read{index};  // recorded by each replay at its mark
  at::cuda::CUDAGraph graph = new_graph<at::cuda::CUDAGraph>();  // instantiated by capture(), after `edit`
  c10::cuda::CUDAStream beside_work = dedicated_stream("work beside a captured step", index);
  std::vector<c10::cuda::CUDAStream> branches;  // in the capture under way, not yet joined
  bool marked = false;                          // a mark recorded in the last capture (reset as one begins)
  bool has_mark = false;                        // the captured graph records inputs_read
  at::cuda::CUDAEvent copied;       // the copies queued for the next replay
  bool copies_pending = false;
};

CudaGraph::CudaGraph(c10::Device device, bool high_priority) : impl_(std::make_unique<Impl>(device, high_priority)) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::run(const std::function<void()>& work) { impl_->on_side_stream(work); }

void CudaGraph::capture(const std::function<void()>& work, const std::function<void(void* graph)>& edit) {
  impl_->on_side_stream([&] {
    impl_->graph.capture_begin();
    impl_->marked = false;
    try {
      work();
      impl_->join_branches();
    } catch (...) {
      // End the capture so the streams are usable again, then report what went wrong in `work`.
      // Each step on its own: an invalidated capture can refuse the join and still be ended.
      try {
        impl_->join_branches();
      } catch (...) {
      }
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

void CudaGraph::mark_inputs_read() {
  Impl& g = *impl_;
  TORCH_CHECK(cuda_stream_capturing() && !g.marked, "mark_inputs_read: once, inside a capture");
  // The copy stream joins the capture here; the record it then makes is a node whose only
  // successor is the capture's end (join_branches), beside the rest of the step.
  g.branch_from_current(g.copies);
  C10_CUDA_CHECK(cudaEventRecordWithFlags(g.inputs_read.event, g.copies.stream(), cudaEventRecordExternal));
  g.marked = true;
  g.has_mark = true;
}

void CudaGraph::beside(const std::function<void()>& work) {
  Impl& g = *impl_;
  TORCH_CHECK(cuda_stream_capturing(), "beside: inside a capture");
  g.branch_from_current(g.beside_work);
  c10::cuda::CUDAStreamGuard on_branch(g.beside_work);
  work();
}

void CudaGraph::copy_inputs(const std::function<void()>& copies) {
  Impl& g = *impl_;
  // Without a mark there is nothing to wait for, and the copies would race the last replay.
  TORCH_CHECK(g.has_mark, "copy_inputs: the graph was captured without mark_inputs_read");
  // A graph's event record node records the event at each launch, as cudaEventRecord would at that
  // point of the stream: this waits for the last replay's (an event never recorded is complete).
  C10_CUDA_CHECK(cudaStreamWaitEvent(g.copies.stream(), g.inputs_read.event, 0));
  {
    c10::cuda::CUDAStreamGuard on_copies(g.copies);
    copies();
  }
  g.copied.record(g.copies);
  g.copies_pending = true;
}

void CudaGraph::replay() {
  if (impl_->copies_pending) {
    impl_->copied.block(c10::cuda::getCurrentCUDAStream(impl_->index));
    impl_->copies_pending = false;
  }
  impl_->graph.replay();
}

#else

std::optional<int> cuda_compute_capability(c10::Device) { return std::nullopt; }

bool cuda_stream_capturing() { return false; }

struct CudaGraph::Impl {};

CudaGraph::CudaGraph(c10::Device, bool) { throw std::logic_error("CUDA graphs need a LibTorch built with CUDA"); }
CudaGraph::~CudaGraph() = default;
void CudaGraph::run(const std::function<void()>&) {}
void CudaGraph::capture(const std::function<void()>&, const std::function<void(void*)>&) {}
void CudaGraph::mark_inputs_read() {}
void CudaGraph::beside(const std::function<void()>&) {}
void CudaGraph::copy_inputs(const std::function<void()>&) {}
void CudaGraph::replay() {}

#endif

}  // namespace trainc
