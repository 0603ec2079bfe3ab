// Learning-rate schedules against Hugging Face's formulas (transformers.optimization), with
// expected values worked out by hand at chosen steps.
#include <catch2/catch.hpp>

#include <cmath>

#include "trainc/common/error.h"
#include "trainc/train/lr_schedule.h"
#include "trainc/train/step_plan.h"

using namespace trainc;
using Catch::Matchers::Contains;

namespace {
constexpr double kPi = 3.14159265358979323846;
double at(const std::string& type, int64_t step, const StringMap& kwargs = {}, int64_t warmup = 10, int64_t total = 110) {
  return make_lr_schedule(type, kwargs, warmup, total, 1e-3)(step);
}
}  // namespace

TEST_CASE("warmup is linear from 0 for every schedule that has one", "[schedule]") {
  for (const char* type : {"linear", "cosine", "cosine_with_restarts", "polynomial", "constant_with_warmup", "inverse_sqrt"}) {
    INFO(type);
    CHECK(at(type, 0) == Approx(0.0));
    CHECK(at(type, 5) == Approx(0.5));
  }
  CHECK(at("constant", 0) == 1.0);
  CHECK(at("cosine_with_min_lr", 5, {{"min_lr_rate", "0.1"}}) == Approx(0.5));
}

TEST_CASE("schedule values after warmup follow Hugging Face's formulas", "[schedule]") {
  CHECK(at("linear", 10) == Approx(1.0));
  CHECK(at("linear", 60) == Approx(0.5));
  CHECK(at("linear", 110) == Approx(0.0));
  CHECK(at("linear", 200) == Approx(0.0));
  CHECK(at("constant_with_warmup", 99) == 1.0);
  CHECK(at("cosine", 60) == Approx(0.5));
  CHECK(at("cosine", 35) == Approx(0.5 * (1 + std::cos(kPi * 0.25))));
  CHECK(at("cosine", 60, {{"num_cycles", "1"}}) == Approx(0.0).margin(1e-12));
  CHECK(at("cosine_with_restarts", 60, {{"num_cycles", "2"}}) == Approx(1.0));  // restarts halfway
  CHECK(at("cosine_with_restarts", 35, {{"num_cycles", "2"}}) == Approx(0.5));
  CHECK(at("cosine_with_restarts", 110) == 0.0);
  CHECK(at("polynomial", 60, {{"power", "2"}, {"lr_end", "1e-4"}}) == Approx((0.9e-3 * 0.25 + 1e-4) / 1e-3));
  CHECK(at("polynomial", 500, {{"lr_end", "1e-4"}}) == Approx(0.1));
  CHECK(at("inverse_sqrt", 40) == Approx(1.0 / std::sqrt(4.0)));  // timescale defaults to warmup (10)
  CHECK(at("cosine_with_min_lr", 110, {{"min_lr_rate", "0.1"}}) == Approx(0.1));
  CHECK(at("cosine_with_min_lr", 60, {{"min_lr", "1e-4"}}) == Approx(0.5 * 0.9 + 0.1));
}

TEST_CASE("warmup_stable_decay: warmup, plateau, decay, floor", "[schedule]") {
  const StringMap kwargs = {{"num_decay_steps", "20"}, {"min_lr_ratio", "0.1"}};
  CHECK(at("warmup_stable_decay", 5, kwargs) == Approx(0.5 * 0.9 + 0.1));
  CHECK(at("warmup_stable_decay", 50, kwargs) == 1.0);   // stable: 110 - 10 - 20 = 80 steps
  CHECK(at("warmup_stable_decay", 100, kwargs) == Approx(0.5 * 0.9 + 0.1));  // cosine decay, halfway
  CHECK(at("warmup_stable_decay", 110, kwargs) == Approx(0.1));
  const StringMap linear = {{"num_decay_steps", "20"}, {"decay_type", "linear"}, {"warmup_type", "1-sqrt"}};
  CHECK(at("warmup_stable_decay", 95, linear) == Approx(0.75));
  CHECK(at("warmup_stable_decay", 5, linear) == Approx(1.0 - std::sqrt(0.5)));
}

TEST_CASE("warmup steps resolve from counts and ratios", "[schedule]") {
  TrainingArguments args;
  args.warmup_steps = 7;
  CHECK(resolve_warmup_steps(args, 100) == 7);
  args.warmup_steps = 0.05;
  CHECK(resolve_warmup_steps(args, 101) == 6);  // rounded up
  args.warmup_steps = 0;
  args.warmup_ratio = 0.1;
  CHECK(resolve_warmup_steps(args, 100) == 10);
}

TEST_CASE("schedule kwargs are checked", "[schedule]") {
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("linear", {{"num_cycles", "1"}}), Contains("reads no kwargs"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("cosine", {{"num_cycles", "x"}}), Contains("lr_scheduler_kwargs.num_cycles: got \"x\""));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("cosine_with_min_lr", {}), Contains("exactly one of min_lr or min_lr_rate"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", "5"}, {"decay_type", "exp"}}),
                    Contains("expected one of: linear, cosine, 1-sqrt"));
  CHECK_THROWS_WITH(make_lr_schedule("polynomial", {{"lr_end", "1"}}, 0, 10, 1e-3), Contains("expected a value below learning_rate"));
}

TEST_CASE("schedule kwargs outside their ranges are refused", "[schedule]") {
  // Each of these would make the learning rate negative, rise above its peak or divide by zero.
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("polynomial", {{"lr_end", "-1"}}), Contains("lr_scheduler_kwargs.lr_end: got -1.0, expected a number >= 0"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("polynomial", {{"power", "-1"}}), Contains("lr_scheduler_kwargs.power: got -1.0"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("inverse_sqrt", {{"timescale", "0"}}), Contains("expected a number of steps > 0"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("cosine_with_min_lr", {{"min_lr_rate", "5"}}), Contains("in [0, 1]"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", "1.7"}}), Contains("a whole number of steps in [0, 1e15]"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", "1"}, {"num_stable_steps", "-10"}}),
                    Contains("lr_scheduler_kwargs.num_stable_steps: got -10.0"));
  CHECK_THROWS_WITH(check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", "1"}, {"min_lr_ratio", "3"}}), Contains("in [0, 1]"));
  // The edges stay valid.
  CHECK_NOTHROW(check_lr_scheduler_kwargs("cosine_with_min_lr", {{"min_lr_rate", "1"}}));
  CHECK_NOTHROW(check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", "0"}, {"min_lr_ratio", "0"}}));
  CHECK(make_lr_schedule("cosine_with_min_lr", {{"min_lr", "1e-3"}}, 0, 10, 1e-3)(5) == 1.0);
}

TEST_CASE("a number of epochs that makes more steps than a run can count is refused", "[schedule]") {
  TrainingArguments args;
  args.per_device_train_batch_size = 10;
  args.num_train_epochs = 2.5;
  CHECK(plan_steps(args, 100).total_steps == 25);
  args.num_train_epochs = 1e300;  // the step count would not fit an int64
  CHECK_THROWS_WITH(plan_steps(args, 100), Contains("num_train_epochs: got 1e+300, which makes 1e+301 optimizer steps"));
  args.max_steps = 7;  // max_steps wins, epochs unread
  CHECK(plan_steps(args, 100).total_steps == 7);
}
