#include "trainc/train/loss_scaler.h"

#include <cmath>
#include <limits>

#include "trainc/common/error.h"
#include "trainc/common/json_fields.h"

namespace trainc {

nlohmann::json LossScaleState::to_json() const {
  return {{"scale", scale}, {"growth_tracker", growth_tracker}, {"skipped_steps", skipped_steps}};
}

LossScaleState LossScaleState::from_json(const nlohmann::json& json, const std::string& source) {
  if (!json.is_object()) throw UserError(source + ": not a loss scaler's state (expected a JSON object)");
  LossScaleState state;
  state.scale = json_number(json, "scale", source);
  // The scaled loss is float32: a scale outside its normal range would overflow, or round to 0.
  if (!(state.scale >= std::numeric_limits<float>::min() && state.scale <= std::numeric_limits<float>::max())) {
    throw UserError(source + ": scale is " + json["scale"].dump() + ", expected a positive number in float32's range (1.2e-38 to 3.4e+38)");
  }
  state.growth_tracker = json_whole_number(json, "growth_tracker", source, 0);
  if (state.growth_tracker >= LossScaler::kGrowthInterval) {
    throw UserError(source + ": growth_tracker is " + std::to_string(state.growth_tracker) + ", expected a whole number below " +
                    std::to_string(LossScaler::kGrowthInterval));
  }
  state.skipped_steps = json_whole_number(json, "skipped_steps", source, 0);
  return state;
}

bool LossScaler::update(bool gradients_finite) {
  if (!enabled_) return true;
  if (!gradients_finite) {
    state_.scale *= 0.5;
    state_.growth_tracker = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (++state_.growth_tracker == kGrowthInterval) {
    // As GradScaler: the scale grows only while float32 (the scaled loss's type) still holds it.
    if (state_.scale * 2.0 <= std::numeric_limits<float>::max()) state_.scale *= 2.0;
    state_.growth_tracker = 0;
  }
  return true;
}

bool LossScaler::exhausted() const { return enabled_ && state_.scale < std::numeric_limits<float>::min(); }

}  // namespace trainc
