// The SMs a weight-gradient product queued on the side stream aims at (runtime/side_product_sms):
// half of them (66 of an H200's 132) where the layer's activations make fewer 128 x 128 tiles
// than twice that, none elsewhere, and none where the side stream gives no target (outside its
// work, on the CPU). The GPU test of the products themselves is in tests/cuda/side_stream_products_test.
#include <catch2/catch.hpp>

#include "trainc/compile/runtime/side_product_sms.h"

using namespace trainc;

TEST_CASE("a side-stream product aims at half the SMs only where the layers are small", "[unit][runtime]") {
  CHECK(small_layers_sm_target(66, 2048, 256) == 66);        // the small GPT's width: 16 x 2 tiles
  CHECK(small_layers_sm_target(66, 2048, 1024) == 66);       // its MLP: 16 x 8 = 128
  CHECK(small_layers_sm_target(66, 131 * 128, 128) == 66);   // 131 tiles
  CHECK(small_layers_sm_target(66, 12 * 128, 11 * 128) == 0);  // 132
  CHECK(small_layers_sm_target(66, 2048, 1152) == 0);        // 16 x 9 = 144
  CHECK(small_layers_sm_target(66, 16384, 768) == 0);        // GPT-2: 128 x 6
  CHECK(small_layers_sm_target(66, 100, 100) == 66);         // a partial tile counts as one
  CHECK(small_layers_sm_target(0, 2048, 256) == 0);          // no target given
}

TEST_CASE("outside the side stream's work no product aims at fewer SMs", "[unit][runtime]") {
  CHECK(side_product_sm_target(2048, 256, Optimization::side_product_sms) == 0);
  CHECK(side_product_sm_target(2048, 256, Optimization::head_grad_sms) == 0);
}
