// defines: relative_error, normwise_relative_error, test_device, test_seed — how the numerics tests
// compare a result with eager's, where they run, and what they draw
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace trainc::test {

// The numerics tests run on the CPU in the main test binary; the CUDA test binary compiles the
// inductor ones again with TRAINC_TEST_ON_CUDA, to run them on the GPU.
inline at::Device test_device() {
#if defined(TRAINC_TEST_ON_CUDA)
  return at::kCUDA;
#else
  return at::kCPU;
#endif
}

// A test's random seed: fresh every run, and printed with any failure so that it can be replayed
// (TRAINC_TEST_SEED).
inline uint64_t test_seed() {
  const char* replay = std::getenv("TRAINC_TEST_SEED");
  return replay != nullptr ? std::stoull(replay) : std::random_device{}() % (1u << 30);
}

// max |got - expected| relative to the largest magnitude of `expected`.
inline double relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = std::max(expected.abs().max().item<double>(), 1e-30);
  return (got.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>() / scale;
}

// ||got - expected|| / ||expected|| (2-norms): how far a tensor is from another as a whole.
inline double normwise_relative_error(const at::Tensor& got, const at::Tensor& expected) {
  const double scale = std::max(expected.to(at::kDouble).norm().item<double>(), 1e-30);
  return (got.to(at::kDouble) - expected.to(at::kDouble)).norm().item<double>() / scale;
}

}  // namespace trainc::test
