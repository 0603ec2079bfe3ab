#include "trainc/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "trainc/common/error.h"
#include "trainc/config/fields.h"
#include "trainc/config/value_codec.h"

namespace trainc {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The keyword arguments each schedule reads, as Hugging Face names them.
const std::map<std::string, std::vector<std::string>>& kwargs_by_type() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"linear", {}},
      {"constant", {}},
      {"constant_with_warmup", {}},
      {"cosine", {"num_cycles"}},
      {"cosine_with_restarts", {"num_cycles"}},
      {"polynomial", {"lr_end", "power"}},
      {"inverse_sqrt", {"timescale"}},
      {"cosine_with_min_lr", {"num_cycles", "min_lr", "min_lr_rate"}},
      {"warmup_stable_decay",
       {"num_stable_steps", "num_decay_steps", "warmup_type", "decay_type", "min_lr_ratio", "num_cycles"}},
  };
  return table;
}

const std::vector<std::string> kWsdShapes = {"linear", "cosine", "1-sqrt"};

double number_kwarg(const StringMap& kwargs, const std::string& key, double fallback) {
  auto it = kwargs.find(key);
  if (it == kwargs.end()) return fallback;
  return ValueCodec<double>::parse(YAML::Node(it->second), "lr_scheduler_kwargs." + key);
}

std::string shape_kwarg(const StringMap& kwargs, const std::string& key, const std::string& fallback) {
  auto it = kwargs.find(key);
  if (it == kwargs.end()) return fallback;
  if (std::find(kWsdShapes.begin(), kWsdShapes.end(), it->second) == kWsdShapes.end()) {
    throw UserError("lr_scheduler_kwargs." + key + ": got \"" + it->second + "\", expected one of: " +
                    join(kWsdShapes, ", "));
  }
  return it->second;
}

// The values each number may take: outside them a schedule would go negative, rise above the peak
// learning rate or divide by zero.
void check_number_range(const std::string& key, double value) {
  auto require = [&](bool ok, const std::string& expected) {
    if (!ok) throw UserError("lr_scheduler_kwargs." + key + ": got " + format_double(value) + ", expected " + expected);
  };
  if (key == "timescale") {
    require(value > 0, "a number of steps > 0");
  } else if (key == "min_lr_rate" || key == "min_lr_ratio") {
    require(value >= 0 && value <= 1, "a ratio of the peak learning rate in [0, 1]");
  } else if (key == "num_stable_steps" || key == "num_decay_steps") {
    require(value >= 0 && value <= 1e15 && std::floor(value) == value, "a whole number of steps in [0, 1e15]");
  } else {  // num_cycles, lr_end, power, min_lr
    require(value >= 0, "a number >= 0");
  }
}

double warmup_multiplier(int64_t step, int64_t warmup_steps) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
}

double progress_after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) {
  return static_cast<double>(step - warmup_steps) / static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
}

}  // namespace

void check_lr_scheduler_kwargs(const std::string& type, const StringMap& kwargs) {
  const auto& table = kwargs_by_type();
  auto known = table.find(type);
  TRAINC_CHECK(known != table.end(), "schedule " + type + " has no kwargs entry");
  for (const auto& [key, value] : kwargs) {
    const auto& valid = known->second;
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      throw UserError("lr_scheduler_kwargs." + key + ": not read by lr_scheduler_type " + type + "; it reads " +
                      (valid.empty() ? std::string("no kwargs") : join(valid, ", ")));
    }
    if (key == "warmup_type" || key == "decay_type") {
      shape_kwarg(kwargs, key, "");
    } else {
      check_number_range(key, number_kwarg(kwargs, key, 0.0));
    }
  }
  if (type == "cosine_with_min_lr" && (kwargs.count("min_lr") == kwargs.count("min_lr_rate"))) {
    throw UserError("lr_scheduler_kwargs: cosine_with_min_lr needs exactly one of min_lr or min_lr_rate");
  }
  if (type == "warmup_stable_decay" && !kwargs.count("num_decay_steps")) {
    throw UserError("lr_scheduler_kwargs.num_decay_steps: required by lr_scheduler_type warmup_stable_decay");
  }
}

int64_t resolve_warmup_steps(const TrainingArguments& args, int64_t total_steps) {
  if (args.warmup_steps >= 1) return static_cast<int64_t>(args.warmup_steps);
  const double ratio = args.warmup_steps > 0 ? args.warmup_steps : args.warmup_ratio;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
}

LrSchedule make_lr_schedule(const std::string& type, const StringMap& kwargs, int64_t warmup_steps,
                            int64_t total_steps, double learning_rate) {
  check_lr_scheduler_kwargs(type, kwargs);
  const int64_t warmup = warmup_steps;
  const int64_t total = total_steps;
  if (type == "constant") return [](int64_t) { return 1.0; };
  if (type == "constant_with_warmup") {
    return [warmup](int64_t step) { return step < warmup ? warmup_multiplier(step, warmup) : 1.0; };
  }
  if (type == "linear") {
    return [warmup, total](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      return std::max(0.0, static_cast<double>(total - step) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
    };
  }
  if (type == "cosine") {
    const double cycles = number_kwarg(kwargs, "num_cycles", 0.5);
    return [warmup, total, cycles](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      const double progress = progress_after_warmup(step, warmup, total);
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * cycles * 2.0 * progress)));
    };
  }
  if (type == "cosine_with_restarts") {
    const double cycles = number_kwarg(kwargs, "num_cycles", 1.0);
    return [warmup, total, cycles](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      const double progress = progress_after_warmup(step, warmup, total);
      if (progress >= 1.0) return 0.0;
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * std::fmod(cycles * progress, 1.0))));
    };
  }
  if (type == "polynomial") {
    const double lr_end = number_kwarg(kwargs, "lr_end", 1e-7);
    const double power = number_kwarg(kwargs, "power", 1.0);
    if (!(learning_rate > lr_end)) {
      throw UserError("lr_scheduler_kwargs.lr_end: got " + format_double(lr_end) +
                      ", expected a value below learning_rate (" + format_double(learning_rate) + ")");
    }
    return [warmup, total, lr_end, power, learning_rate](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      if (step > total) return lr_end / learning_rate;
      const double decay_steps = static_cast<double>(total - warmup);
      const double remaining = 1.0 - static_cast<double>(step - warmup) / decay_steps;
      return ((learning_rate - lr_end) * std::pow(remaining, power) + lr_end) / learning_rate;
    };
  }
  if (type == "inverse_sqrt") {
    const double timescale = number_kwarg(kwargs, "timescale", warmup > 0 ? static_cast<double>(warmup) : 10000.0);
    return [warmup, timescale](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      const double shift = timescale - static_cast<double>(warmup);
      return 1.0 / std::sqrt((static_cast<double>(step) + shift) / timescale);
    };
  }
  if (type == "cosine_with_min_lr") {
    const double cycles = number_kwarg(kwargs, "num_cycles", 0.5);
    const double min_lr_rate =
        kwargs.count("min_lr") ? (learning_rate > 0 ? number_kwarg(kwargs, "min_lr", 0.0) / learning_rate : 0.0)
                               : number_kwarg(kwargs, "min_lr_rate", 0.0);
    return [warmup, total, cycles, min_lr_rate](int64_t step) {
      if (step < warmup) return warmup_multiplier(step, warmup);
      const double progress = progress_after_warmup(step, warmup, total);
      const double factor = 0.5 * (1.0 + std::cos(kPi * cycles * 2.0 * progress));
      return std::max(0.0, factor * (1.0 - min_lr_rate) + min_lr_rate);
    };
  }
  if (type == "warmup_stable_decay") {
    const auto decay_steps = static_cast<int64_t>(number_kwarg(kwargs, "num_decay_steps", 0.0));
    const auto stable_steps = static_cast<int64_t>(
        number_kwarg(kwargs, "num_stable_steps", static_cast<double>(total - warmup - decay_steps)));
    const std::string warmup_type = shape_kwarg(kwargs, "warmup_type", "linear");
    const std::string decay_type = shape_kwarg(kwargs, "decay_type", "cosine");
    const double min_ratio = number_kwarg(kwargs, "min_lr_ratio", 0.0);
    const double cycles = number_kwarg(kwargs, "num_cycles", 0.5);
    return [=](int64_t step) {
      auto scaled = [min_ratio](double factor) { return std::max(0.0, factor * (1.0 - min_ratio) + min_ratio); };
      if (step < warmup) {
        const double progress = warmup_multiplier(step, warmup);
        if (warmup_type == "linear") return scaled(progress);
        if (warmup_type == "cosine") return scaled(0.5 * (1.0 - std::cos(kPi * progress)));
        return scaled(1.0 - std::sqrt(1.0 - progress));
      }
      if (step < warmup + stable_steps) return 1.0;
      if (step < warmup + stable_steps + decay_steps) {
        const double progress = static_cast<double>(step - warmup - stable_steps) /
                                static_cast<double>(std::max<int64_t>(1, decay_steps));
        if (decay_type == "linear") return scaled(1.0 - progress);
        if (decay_type == "cosine") return scaled(0.5 * (1.0 + std::cos(kPi * cycles * 2.0 * progress)));
        return scaled(1.0 - std::sqrt(progress));
      }
      return min_ratio;
    };
  }
  TRAINC_CHECK(false, "lr_scheduler_type " + type + " has no schedule");
}

}  // namespace trainc
