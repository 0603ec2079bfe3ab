#include "trainc/train/loss_tracking.h"

#include "trainc/common/error.h"
#include "trainc/compile/runtime/runtime_kernels.h"

namespace trainc {
namespace {

constexpr const char* kKernels = R"(
// trainc: a step's loss added to the run's sums; the first step with a NaN or infinite loss kept.
extern "C" __global__ void trainc_track_step_loss(const float* __restrict__ loss, double* __restrict__ since_log,
    double* __restrict__ total, long long* __restrict__ first_nonfinite, const long long* __restrict__ step_on_device, long long step) {
  TRAINC_WAIT_FOR_PREVIOUS_KERNEL();
  const float value = *loss;
  if (step_on_device != nullptr) step = *step_on_device;
  *since_log += value;
  *total += value;
  if (!isfinite(value) && *first_nonfinite < 0) *first_nonfinite = step;
}
)";

RuntimeKernels& kernels() {
  static RuntimeKernels built(kKernels, {"trainc_track_step_loss"});
  return built;
}

bool kernel_takes(const at::Tensor& loss, const at::Tensor& since_log, const at::Tensor& total, const at::Tensor& first_nonfinite) {
  const auto on_loss_device = [&](const at::Tensor& t) { return t.device() == loss.device() && t.numel() == 1; };
  return TRAINC_WITH_CUDA && loss.is_cuda() && loss.scalar_type() == at::kFloat && loss.numel() == 1 && on_loss_device(since_log) &&
         on_loss_device(total) && on_loss_device(first_nonfinite) && since_log.scalar_type() == at::kDouble &&
         total.scalar_type() == at::kDouble && first_nonfinite.scalar_type() == at::kLong;
}

// `step_on_device` defined: the step is read there, else `step`.
void track(const at::Tensor& loss, const at::Tensor& step_on_device, int64_t step, at::Tensor& since_log, at::Tensor& total,
           at::Tensor& first_nonfinite) {
  if (kernel_takes(loss, since_log, total, first_nonfinite) &&
      (!step_on_device.defined() || (step_on_device.device() == loss.device() && step_on_device.scalar_type() == at::kLong))) {
    void* loss_data = loss.data_ptr();
    void* since_log_data = since_log.data_ptr();
    void* total_data = total.data_ptr();
    void* first_data = first_nonfinite.data_ptr();
    void* step_data = step_on_device.defined() ? step_on_device.data_ptr() : nullptr;
    long long step_value = step;
    void* parameters[] = {&loss_data, &since_log_data, &total_data, &first_data, &step_data, &step_value};
    kernels().launch(0, 1, 1, parameters);
    return;
  }
  const at::Tensor finite = at::isfinite(loss);
  const at::Tensor this_step = step_on_device.defined() ? step_on_device.to(first_nonfinite.options()) : at::full_like(first_nonfinite, step);
  first_nonfinite.copy_(at::where(first_nonfinite.ge(0) | finite, first_nonfinite, this_step));
  since_log += loss;
  total += loss;
}

}  // namespace

void track_step_loss(const at::Tensor& loss, int64_t step, at::Tensor& since_log, at::Tensor& total, at::Tensor& first_nonfinite) {
  track(loss, at::Tensor(), step, since_log, total, first_nonfinite);
}

void track_step_loss(const at::Tensor& loss, const at::Tensor& step, at::Tensor& since_log, at::Tensor& total,
                     at::Tensor& first_nonfinite) {
  TRAINC_CHECK(step.defined() && step.numel() == 1, "track_step_loss: the step on the device must be a scalar tensor");
  track(loss, step, 0, since_log, total, first_nonfinite);
}

}  // namespace trainc
