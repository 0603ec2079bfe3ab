// fp16's loss scaler against torch.cuda.amp.GradScaler's rule with its defaults (2^16 to start,
// halved on an overflow, doubled after 2000 finite steps in a row) and its state as scaler.json
// holds it.
#include <catch2/catch.hpp>

#include <limits>

#include "trainc/common/error.h"
#include "trainc/train/loss_scaler.h"

using namespace trainc;
using Catch::Matchers::Contains;

TEST_CASE("the loss scale halves and the step is skipped on an overflow, and doubles after 2000 finite steps", "[fp16]") {
  LossScaler scaler(true);
  CHECK(scaler.scale() == 65536.0);
  CHECK_FALSE(scaler.update(false));
  CHECK(scaler.scale() == 32768.0);
  CHECK(scaler.skipped_steps() == 1);
  for (int step = 1; step < LossScaler::kGrowthInterval; ++step) REQUIRE(scaler.update(true));
  CHECK(scaler.scale() == 32768.0);
  CHECK(scaler.state().growth_tracker == LossScaler::kGrowthInterval - 1);
  CHECK(scaler.update(true));  // the 2000th finite step in a row
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.state().growth_tracker == 0);
  // An overflow starts the count again.
  for (int step = 0; step < 10; ++step) REQUIRE(scaler.update(true));
  CHECK_FALSE(scaler.update(false));
  CHECK(scaler.state().growth_tracker == 0);
  CHECK(scaler.skipped_steps() == 2);
}

TEST_CASE("the loss scale grows only while float32 holds it", "[fp16]") {
  const double largest = 0x1p127;  // float32's largest power of two
  LossScaler scaler(true, {largest, LossScaler::kGrowthInterval - 1, 0});
  CHECK(scaler.update(true));
  CHECK(scaler.scale() == largest);
  CHECK(scaler.state().growth_tracker == 0);
}

TEST_CASE("the scaler is exhausted once overflows halve the scale below float32's range, and not before", "[fp16]") {
  LossScaler scaler(true);
  int halvings = 0;
  while (!scaler.exhausted()) {
    // Every state the run continues from is one a checkpoint keeps and a resume reads back.
    REQUIRE(LossScaleState::from_json(scaler.state().to_json(), "scaler.json").scale == scaler.scale());
    REQUIRE(halvings < 1000);
    CHECK_FALSE(scaler.update(false));
    ++halvings;
  }
  // 2^16 down to float32's smallest normal number, 2^-126, is 142 halvings; the 143rd leaves its range.
  CHECK(halvings == 143);
  CHECK(scaler.scale() == 0x1p-127);
  CHECK(scaler.skipped_steps() == 143);
  CHECK_THROWS_WITH(LossScaleState::from_json(scaler.state().to_json(), "scaler.json"), Contains("scale is"));
  CHECK_FALSE(LossScaler(true, {0x1p-126, 0, 0}).exhausted());
  CHECK_FALSE(LossScaler(false, {0x1p-127, 0, 0}).exhausted());  // a scaler without fp16 scales by 1
}

TEST_CASE("a scaler without fp16 scales by 1 and skips nothing, but keeps the steps skipped before", "[fp16]") {
  LossScaler scaler(false, {1024.0, 7, 3});
  CHECK(scaler.scale() == 1.0);
  CHECK(scaler.update(false));
  CHECK(scaler.skipped_steps() == 3);
  CHECK(scaler.state().scale == 1024.0);
  CHECK(scaler.state().growth_tracker == 7);
}

TEST_CASE("the scaler's state reads back as written, and values no scaler holds are refused by name", "[fp16]") {
  const LossScaleState state{0.125, 1999, 42};
  const LossScaleState read = LossScaleState::from_json(nlohmann::json::parse(state.to_json().dump()), "scaler.json");
  CHECK(read.scale == 0.125);
  CHECK(read.growth_tracker == 1999);
  CHECK(read.skipped_steps == 42);
  const auto error_of = [](const char* text) {
    try {
      LossScaleState::from_json(nlohmann::json::parse(text), "ck/scaler.json");
    } catch (const UserError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(R"({"scale": 0, "growth_tracker": 0, "skipped_steps": 0})"), Contains("ck/scaler.json: scale is 0, expected a positive number in float32's range"));
  CHECK_THAT(error_of(R"({"scale": 1e-50, "growth_tracker": 0, "skipped_steps": 0})"), Contains("scale is 1e-50, expected a positive number"));
  CHECK_THAT(error_of(R"({"scale": null, "growth_tracker": 0, "skipped_steps": 0})"), Contains("ck/scaler.json: scale is null, expected a number"));
  CHECK_THAT(error_of(R"({"scale": 4, "growth_tracker": 1.5, "skipped_steps": 0})"), Contains("growth_tracker is 1.5, expected a whole number >= 0"));
  CHECK_THAT(error_of(R"({"scale": 4, "growth_tracker": 0, "skipped_steps": -1})"), Contains("skipped_steps is -1, expected a whole number >= 0"));
  CHECK_THAT(error_of(R"({"scale": 4, "growth_tracker": 0})"), Contains("ck/scaler.json: no skipped_steps"));
}
