// defines: DeviceLossScale
//
// fp16's loss scale where the GPU reads it; train/loss_scaler keeps the host's state and decides.
// The backward's seed and the gradients' unscaling read device tensors, so that a CUDA graph
// replays them with the scale of the step it runs rather than the one it was captured with. The
// check for overflowed gradients is GradScaler's: one multi-tensor kernel divides the gradients by
// the scale and notes whether any value is not finite, and the host reads that once a step (a
// synchronization, as GradScaler's step makes), between the gradients and the update.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace trainc {

class DeviceLossScale {
 public:
  explicit DeviceLossScale(c10::Device device);

  // Writes `scale` to the device if it differs from the last one written. Outside a capture, on the
  // stream the step then runs on, before the step.
  void set(double scale);
  // The scale, a 0-dim float32 tensor a backward's loss is multiplied by.
  const at::Tensor& scale() const { return scale_; }
  // A new 0-dim tensor: the scale over `count` micro-batches, one micro-batch's backward seed.
  at::Tensor seed(double count) const;
  // Divides the parameters' defined gradients by the scale, in place. Returns whether every value
  // was finite (a host synchronization).
  bool unscale(const std::vector<at::Tensor>& parameters);

 private:
  at::Tensor scale_;
  at::Tensor inverse_;    // 1 / scale in float32, which the unscaling multiplies by, as GradScaler's does
  at::Tensor found_inf_;  // 1 once the unscaling met a value that is not finite
  double written_ = 0.0;  // the scale last written to scale_ (0: none yet)
};

}  // namespace trainc
