// The CUDA kernel cache (runtime/cuda_modules): a cached cubin is loaded only where its checksum
// holds (runtime/kernel_cache, read_cache_entry). A truncated cubin, one with a byte changed,
// another source's cubin copied over it, or a folder in its place is compiled again, and the
// module's kernel computes what its source says; the next build finds the cubin published again
// and compiles nothing. (The driver would load some of these damaged cubins: another source's
// loads and runs the wrong kernel.)
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <stdio.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "support/posix_scratch_dir.h"
#include "trainc/compile/runtime/cuda_modules.h"

namespace {

// y = 3 x + offset: sources that differ only in a constant, with the same kernel name.
trainc::CudaSource affine_source(int offset) {
  return {"extern \"C\" __global__ void trainc_test_affine(const float* x, float* y, int n) {\n"
          "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) y[i] = 3.0f * x[i] + " + std::to_string(offset) + ".0f;\n"
          "}\n",
          {"trainc_test_affine"}};
}

struct Built {
  std::string key;
  bool cache_hit = false;
};

// Builds the module of `offset` in `settings`' cache and checks its kernel against ATen on fresh inputs.
Built build_and_check(const trainc::CompilerSettings& settings, int offset) {
  const std::vector<trainc::CudaModuleBuild> builds = trainc::build_cuda_modules({affine_source(offset)}, settings);
  REQUIRE(builds.size() == 1);
  constexpr int kElements = 1000;
  const at::Tensor x = torch::randn({kElements}, torch::TensorOptions().device(torch::kCUDA));
  const at::Tensor y = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  int n = kElements;
  void* parameters[] = {&in, &out, &n};
  builds[0].module->launch_with(0, (kElements + 255) / 256, 256, parameters);
  // The kernel may fuse the multiply and add: within a float32 rounding of ATen's two steps.
  CHECK(torch::allclose(y, x * 3 + offset, 1e-6, 1e-6));
  return {builds[0].key, builds[0].cache_hit};
}

std::string read_bytes(const std::string& path) {
  FILE* file = ::fopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::string bytes;
  char buffer[1 << 16];
  for (size_t got; (got = ::fread(buffer, 1, sizeof buffer, file)) > 0;) bytes.append(buffer, got);
  ::fclose(file);
  return bytes;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  FILE* file = ::fopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size());
  REQUIRE(::fclose(file) == 0);
}

}  // namespace

TEST_CASE("a damaged or misplaced cached cubin is compiled again and never loaded", "[cuda]") {
  const trainc::test::PosixScratchDir cache("trainc-cubin-cache");
  trainc::CompilerSettings settings;
  settings.cache_dir = cache.path();
  const Built first = build_and_check(settings, 1);
  CHECK_FALSE(first.cache_hit);
  CHECK(build_and_check(settings, 1).cache_hit);
  const std::string cubin = cache.file(std::string(trainc::kCudaKernelsFolder) + "/" + first.key + ".cubin");
  const std::string intact = read_bytes(cubin);
  const Built other = build_and_check(settings, 2);
  const std::string other_cubin = read_bytes(cache.file(std::string(trainc::kCudaKernelsFolder) + "/" + other.key + ".cubin"));

  const auto compiled_again = [&](const std::string& what) {
    INFO(what);
    CHECK_FALSE(build_and_check(settings, 1).cache_hit);
    CHECK(read_bytes(cubin) == intact);  // published again, whole
    CHECK(build_and_check(settings, 1).cache_hit);
  };
  write_bytes(cubin, intact.substr(0, intact.size() / 2));
  compiled_again("truncated");
  std::string flipped = intact;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
  write_bytes(cubin, flipped);
  compiled_again("a byte changed");
  write_bytes(cubin, other_cubin);
  compiled_again("another source's cubin");
  REQUIRE(::remove(cubin.c_str()) == 0);
  REQUIRE(::mkdir(cubin.c_str(), 0755) == 0);
  compiled_again("a folder in its place");
}
