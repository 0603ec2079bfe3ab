#include "trainc/train/device_step_start.h"

#include <algorithm>
#include <string>
#include <utility>

#include "trainc/common/error.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr int kCountsPerLaunch = 128;  // a thread a count; the list stays well under 4 KB of parameters

// One launch's step counts, passed by value. Every field is 8 bytes, so the host's layout and the
// kernel's are the same without padding rules to agree on.
struct StepCounts {
  float* count[kCountsPerLaunch];
  long long n;
};
static_assert(sizeof(StepCounts) == 8 * (kCountsPerLaunch + 1), "StepCounts must have no padding, as the kernel's");

// After the generated kernels' prelude and the host's constant (so the two cannot disagree).
constexpr const char* kKernels = R"(
// trainc: a training step's start. `learning_rate` null: the step counts only (a second launch).
struct StepCounts {
  float* count[TRAINC_COUNTS];
  long long n;
};

extern "C" __global__ void __launch_bounds__(TRAINC_COUNTS) trainc_step_start(const float* __restrict__ table, long long table_size,
    long long* __restrict__ steps_done, float* __restrict__ learning_rate, const StepCounts counts) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  if (threadIdx.x < counts.n) *counts.count[threadIdx.x] += 1.0f;
  if (threadIdx.x == 0 && learning_rate != nullptr) {
    const long long done = *steps_done;
    *learning_rate = table[done & (table_size - 1)];  // a ring: table_size is a power of two
    *steps_done = done + 1;
  }
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built("#define TRAINC_COUNTS " + std::to_string(kCountsPerLaunch) + "\n" + kKernels, {"trainc_step_start"});
  return built;
}

bool device_float_scalar(const at::Tensor& t, c10::Device device) {
  return t.defined() && t.device() == device && t.scalar_type() == at::kFloat && t.numel() == 1;
}

}  // namespace

DeviceStepStart::DeviceStepStart(LearningRateAt learning_rate_at, int64_t steps_done, c10::Device device, int64_t window)
    : learning_rate_at_(std::move(learning_rate_at)), window_(window), last_step_(steps_done) {
  TRAINC_CHECK(window >= 2 && (window & (window - 1)) == 0, "DeviceStepStart: the window must be a power of two, not " + std::to_string(window));
  TRAINC_CHECK(steps_done >= 0, "DeviceStepStart: a negative count of steps done (" + std::to_string(steps_done) + ")");
  table_ = at::empty({window_}, at::TensorOptions().dtype(at::kFloat).device(device));
  fill_half(held_from());
  fill_half(held_from() + window_ / 2);
  steps_done_ = at::full({}, steps_done, at::TensorOptions().dtype(at::kLong).device(device));
  // The kernel is built now: a CUDA graph's capture, where a step's start is recorded, cannot load it.
  if (TRAINC_WITH_CUDA && device.is_cuda()) kernels().function(0);
}

void DeviceStepStart::before_step(int64_t steps_done) {
  TRAINC_CHECK(steps_done >= last_step_, "DeviceStepStart: steps go forward (asked for step " + std::to_string(steps_done) +
                                             " after step " + std::to_string(last_step_) + ")");
  const int64_t was_held_from = held_from();
  last_step_ = steps_done;
  if (held_from() == was_held_from) return;
  TRAINC_CHECK(!(table_.is_cuda() && cuda_stream_capturing()),
               "DeviceStepStart: a refill inside a CUDA graph's capture (before_step goes between steps)");
  // The slots of steps before held_from() are free: every step that reads them was queued before
  // this copy, on a stream this copy is ordered after.
  for (int64_t first = std::max(was_held_from + window_, held_from()); first < held_from() + window_; first += window_ / 2) {
    fill_half(first);
  }
}

int64_t DeviceStepStart::held_from() const { return last_step_ / (window_ / 2) * (window_ / 2); }

void DeviceStepStart::fill_half(int64_t first) {
  const int64_t half = window_ / 2;
  const bool on_gpu = table_.is_cuda();
  // From pinned memory, asynchronously: ATen's host allocator keeps the buffer until the copy is done.
  at::Tensor rates = at::empty({half}, at::TensorOptions().dtype(at::kFloat).pinned_memory(on_gpu));
  float* rate = rates.data_ptr<float>();
  // Rounded to float32 as a fill of the float32 learning rate rounds the schedule's double.
  for (int64_t k = 0; k < half; ++k) rate[k] = static_cast<float>(learning_rate_at_(first + k));
  const int64_t slot = first % window_;
  table_.slice(0, slot, slot + half).copy_(rates, /*non_blocking=*/on_gpu);
}

void DeviceStepStart::start_step(const at::Tensor& learning_rate, const std::vector<at::Tensor>& step_counts) {
  const c10::Device device = steps_done_.device();
  TRAINC_CHECK(device_float_scalar(learning_rate, device), "DeviceStepStart: the learning rate must be a float32 scalar on " + device.str());
  for (const at::Tensor& count : step_counts) {
    TRAINC_CHECK(device_float_scalar(count, device), "DeviceStepStart: a step count must be a float32 scalar on " + device.str());
  }
  if (!(TRAINC_WITH_CUDA && device.is_cuda())) {
    learning_rate.copy_(table_.index_select(0, steps_done_.remainder(window_).reshape({1})).reshape({}));
    steps_done_.add_(1);
    if (!step_counts.empty()) at::_foreach_add_(step_counts, 1.0);
    return;
  }
  const void* table = table_.data_ptr();
  long long table_size = table_.size(0);
  void* steps_done = steps_done_.data_ptr();
  // The first launch writes the learning rate and the count; any further one, 128 counts more each.
  std::size_t first = 0;
  do {
    StepCounts counts{};
    const std::size_t n = std::min<std::size_t>(kCountsPerLaunch, step_counts.size() - first);
    for (std::size_t k = 0; k < n; ++k) counts.count[k] = step_counts[first + k].data_ptr<float>();
    counts.n = static_cast<long long>(n);
    void* rate = first == 0 ? learning_rate.data_ptr() : nullptr;
    void* parameters[] = {&table, &table_size, &steps_done, &rate, &counts};
    kernels().launch(0, 1, kCountsPerLaunch, parameters);
    first += n;
  } while (first < step_counts.size());
}

}  // namespace trainc
