// trainc's multi-tensor bf16 cast (runtime/cast_kernel) against ATen's cast on the GPU, bit for
// bit, into destinations filled with a sentinel first: 140 tensors (two launches of up to 127) of
// sizes that leave partial chunks and partial 8-element groups, one of a few elements, one of two
// whole chunks, an empty one, and values that round both ways, ties, NaNs, infinities, subnormals
// and numbers past bf16's largest; tensors it does not take (misaligned, another dtype) are refused.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "trainc/compile/runtime/cast_kernel.h"

using namespace trainc;

TEST_CASE("trainc's bf16 cast kernel rounds as ATen's cast", "[cuda]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  std::vector<at::Tensor> sources, destinations;
  for (int i = 0; i < 140; ++i) {
    const int64_t size = i == 9 ? 0 : i == 10 ? 5 : i == 11 ? 8192 : (i * 7919) % 20000 + (i % 11);
    sources.push_back(torch::randn({size}, cuda) * (i % 3 == 0 ? 1e-3 : 10.0));
    destinations.push_back(torch::full({size}, -7.0, cuda.dtype(torch::kBFloat16)));
  }
  // Ties between two bf16 values (the low half 0x8000), NaN, infinities, overflow to infinity.
  const float special[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 3.4e38f, -3.4e38f,
                           1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 0.0f, -0.0f, 1e-40f, -3e-39f, std::numeric_limits<float>::denorm_min()};
  std::vector<float> values(std::begin(special), std::end(special));
  const uint32_t payload_nan = 0x7fa12345u;  // a NaN with a payload
  float with_payload;
  std::memcpy(&with_payload, &payload_nan, sizeof with_payload);
  values.push_back(with_payload);
  sources.push_back(torch::tensor(values, cuda));
  destinations.push_back(torch::full({static_cast<int64_t>(values.size())}, -7.0, cuda.dtype(torch::kBFloat16)));
  REQUIRE(bf16_cast_kernel_takes(destinations, sources));
  bf16_cast_kernel(destinations, sources);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    INFO("tensor " << i << " of " << sources[i].numel());
    const at::Tensor expected = sources[i].to(torch::kBFloat16);
    // Compared as bits, so that NaN equals NaN.
    CHECK(torch::equal(destinations[i].view(torch::kShort), expected.view(torch::kShort)));
  }
  // A source starting 4 bytes into its memory, or a float16 destination, is not taken.
  const at::Tensor storage = torch::randn({65}, cuda);
  CHECK_FALSE(bf16_cast_kernel_takes({torch::empty({64}, cuda.dtype(torch::kBFloat16))}, {storage.narrow(0, 1, 64)}));
  CHECK_FALSE(bf16_cast_kernel_takes({torch::empty({64}, cuda.dtype(torch::kHalf))}, {storage.narrow(0, 0, 64)}));
}
