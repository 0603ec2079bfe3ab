#include "trainc/compat/side_stream.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compat/dedicated_stream.h"
#include "trainc/compat/device_properties.h"

#if TRAINC_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace trainc {

#if TRAINC_WITH_CUDA

namespace {

// One side stream per device (compat/dedicated_stream), with the libraries' workspaces made for it
// before any capture (ATen's cuBLAS and cuBLASLt make theirs at a stream's first product).
c10::cuda::CUDAStream side_stream_of(c10::DeviceIndex index) {
  return dedicated_stream("side", index, [index](c10::cuda::CUDAStream stream) {
    lt_prepare_stream(index, stream.stream());
    const bool capturing = cuda_stream_capturing();  // programs are built before captures: never so far
    c10::cuda::CUDAStreamGuard on_side(stream);
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      if (capturing) break;
      const at::Tensor a = at::ones({16, 16}, at::TensorOptions().dtype(dtype).device(at::kCUDA, index));
      (void)at::mm(a, a);
      (void)at::addmm(a, a, a);
    }
    stream.synchronize();
  });
}

}  // namespace

struct SideStream::Impl {
  explicit Impl(c10::Device device) : index(device.index() < 0 ? 0 : device.index()), stream(side_stream_of(index)) {}

  // The side stream waits for what is queued on the current stream. Every use starts with it: a
  // capture records the side stream only from such a wait on, so a mark or a join on a side stream
  // that ran nothing yet in the capture would refer to work outside it.
  void follow_current() {
    queued.record(c10::cuda::getCurrentCUDAStream(index));
    queued.block(stream);
  }

  c10::DeviceIndex index;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent queued;      // the current stream's work before the side stream's next
  at::cuda::CUDAEvent finished;    // all of the side stream's work, for join()
  std::vector<at::cuda::CUDAEvent> marks;
};

SideStream::SideStream(c10::Device device) : impl_(std::make_unique<Impl>(device)) {}
SideStream::~SideStream() = default;

namespace {
thread_local int side_sm_target = 0;  // SideStream::product_sm_target inside run's work
}  // namespace

void SideStream::run(const std::function<void()>& work) {
  impl_->follow_current();
  c10::cuda::CUDAStreamGuard on_side(impl_->stream);
  struct Target {  // set for the work, restored however it ends
    int before = side_sm_target;
    explicit Target(int sms) { side_sm_target = sms; }
    ~Target() { side_sm_target = before; }
  } target(std::max(1, multiprocessor_count(c10::Device(c10::DeviceType::CUDA, impl_->index)) / 2));
  work();
}

int SideStream::product_sm_target() { return side_sm_target; }

void SideStream::set_mark(int mark) {
  if (static_cast<std::size_t>(mark) >= impl_->marks.size()) impl_->marks.resize(static_cast<std::size_t>(mark) + 1);
  impl_->follow_current();
  impl_->marks[static_cast<std::size_t>(mark)].record(impl_->stream);
}

void SideStream::wait_for_mark(int mark) { impl_->marks.at(static_cast<std::size_t>(mark)).block(c10::cuda::getCurrentCUDAStream(impl_->index)); }

void SideStream::join() {
  impl_->follow_current();
  impl_->finished.record(impl_->stream);
  impl_->finished.block(c10::cuda::getCurrentCUDAStream(impl_->index));
}

#else

struct SideStream::Impl {};

SideStream::SideStream(c10::Device) { throw std::logic_error("a side stream needs a LibTorch built with CUDA"); }
SideStream::~SideStream() = default;
void SideStream::run(const std::function<void()>& work) { work(); }
void SideStream::set_mark(int) {}
void SideStream::wait_for_mark(int) {}
void SideStream::join() {}
int SideStream::product_sm_target() { return 0; }

#endif

}  // namespace trainc
