// defines: LossScaleState, LossScaler
//
// fp16's dynamic loss scaling, as torch.cuda.amp.GradScaler does it with its defaults (a first
// scale of 2^16, halved on an overflow, doubled after 2000 finite steps in a row) inside Hugging
// Face's Trainer: the backward starts from the loss times the scale, the gradients are divided by
// it before clipping, and a step whose gradients overflowed is skipped. A skipped step still
// counts as a step (global_step), but the learning-rate schedule does not advance on it: Hugging
// Face steps its scheduler only when the optimizer ran. A checkpoint keeps the state
// (scaler.json), so a resumed run scales and schedules as the run it continues.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace trainc {

struct LossScaleState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;  // finite steps since the scale last changed (GradScaler's _growth_tracker)
  int64_t skipped_steps = 0;   // steps skipped for overflowed gradients, since the run's first step

  nlohmann::json to_json() const;
  // UserError naming `source` and the key for a value no scaler holds.
  static LossScaleState from_json(const nlohmann::json& json, const std::string& source);
};

class LossScaler {
 public:
  static constexpr int64_t kGrowthInterval = 2000;

  // A disabled scaler scales by 1 and never skips, but keeps the steps an earlier fp16 run skipped.
  explicit LossScaler(bool enabled, LossScaleState state = {}) : enabled_(enabled), state_(state) {}
  bool enabled() const { return enabled_; }
  double scale() const { return enabled_ ? state_.scale : 1.0; }
  int64_t skipped_steps() const { return state_.skipped_steps; }
  const LossScaleState& state() const { return state_; }
  // What a checkpoint keeps (scaler.json): the state while it matters, for fp16's scale or for the
  // steps skipped, which the schedule discounts; nothing otherwise.
  std::optional<LossScaleState> checkpointed() const {
    return enabled_ || state_.skipped_steps > 0 ? std::optional<LossScaleState>(state_) : std::nullopt;
  }
  // After the gradients were unscaled: finite ones let the step happen (and, the 2000th time in a
  // row, double the scale); an overflow skips the step and halves the scale. Returns whether to step.
  bool update(bool gradients_finite);
  // Whether overflows have halved the scale below float32's smallest normal number (2^-126): gradients
  // still not finite at such a scale are not an overflow a smaller scale cures but NaN or inf from
  // the model, and every later step would be skipped. Every scale at or above it is one a
  // checkpoint can keep and a resume reads back (LossScaleState::from_json refuses the rest).
  bool exhausted() const;

 private:
  bool enabled_;
  LossScaleState state_;
};

}  // namespace trainc
