// On a CUDA GPU: the weight-gradient products a compiled step records on its side stream
// (compat/side_stream) aimed at half the SMs where the layers are small (runtime/side_product_sms):
// the head's, called by the head's training pair, and a layer's, run by the executor's default for
// matmul_to_float. Each computes the product the whole GPU's kernel does; the rest of the GPU's
// library choices are tested in library_variants_test.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <ATen/cuda/CUDAContext.h>

#include <iostream>

#include "support/numerics.h"
#include "support/scoped_variable.h"
#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compat/device_timing.h"
#include "trainc/compat/side_stream.h"
#include "trainc/compile/optimizations.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"
#include "trainc/compile/runtime/side_product_sms.h"

using namespace trainc;
using trainc::test::relative_error;

// The small GPT's head weight gradient (D^T x, bf16 operands, float32 out) queued from a side
// stream's work, at the SM count target the side stream gives (half the SMs; outside its work 0),
// computes the product the whole-GPU kernel does, within float32 accumulation (1e-4 of the
// largest element; split-K may add in another order). Printed: each alone, the L2 cache emptied
// first (half the SMs is slower alone; it pays beside the layers' backward).
TEST_CASE("the head's weight gradient on the side stream aims at half the SMs and computes the product", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const at::Tensor d = torch::randn({2048, 50304}, options) * 1e-2, x = torch::randn({2048, 256}, options);
  const at::Tensor whole = torch::empty({50304, 256}, options.dtype(torch::kFloat)), half = torch::full_like(whole, -7.0);
  CHECK(SideStream::product_sm_target() == 0);
  REQUIRE(lt_matmul_out(whole, d.t(), x, at::Tensor(), 0));
  int target = 0;
  SideStream side(torch::kCUDA);
  const auto on_side = [&] {
    side.run([&] {
      target = SideStream::product_sm_target();
      head_product_into(half, d.t(), x, -1, target);
    });
    side.join();
  };
  on_side();
  torch::cuda::synchronize();
  CHECK(target == at::cuda::getCurrentDeviceProperties()->multiProcessorCount / 2);
  CHECK(SideStream::product_sm_target() == 0);
  CHECK(relative_error(half, whole) < 1e-4);
  const double whole_ms = 1e3 * time_on_device(torch::kCUDA, [&] { lt_matmul_out(whole, d.t(), x, at::Tensor(), 0); }, 20);
  const double half_ms = 1e3 * time_on_device(torch::kCUDA, on_side, 20);
  std::cout << "head weight gradient alone: the whole GPU's kernel " << whole_ms << " ms, half the SMs' " << half_ms << " ms" << std::endl;
}

// A layer's weight gradient (x^T dy, bf16 operands, float32 out: matmul_to_float) run by the
// executor's default inside the side stream's work is cuBLASLt's first-ranked algorithm for half
// the SMs, bit for bit (the same call made directly), where the layer is small; it computes the
// product ATen's whole-GPU call does within float32 accumulation (1e-4 of the largest element).
// With the switch off, or as a named variant (max-autotune's choice, here "aten"), it is ATen's
// call, bit for bit. GPT-2's width gets no target. Then as a compiled step records it: queued from
// the side stream's work inside a CUDA graph's capture, replayed on new inputs.
TEST_CASE("a layer's weight gradient on the side stream aims at half the SMs and computes the product", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const int half = at::cuda::getCurrentDeviceProperties()->multiProcessorCount / 2;
  ir::Node product;
  product.op = ir::Op::matmul_to_float;
  SideStream side(torch::kCUDA);
  for (const int64_t width : {256, 1024}) {
    const at::Tensor x = torch::randn({2048, width}, options), dy = torch::randn({2048, 768}, options);
    const at::Tensor whole = ir::execute_node(product, {x.t(), dy}, torch::kCUDA, "");  // outside the side stream: ATen's
    const at::Tensor direct = torch::empty({width, 768}, options.dtype(torch::kFloat));
    at::Tensor aimed, named, switched_off;
    bool ran_direct = false;
    int large = -1;
    side.run([&] {
      aimed = ir::execute_node(product, {x.t(), dy}, torch::kCUDA, "");
      ran_direct = lt_matmul_out(direct, x.t(), dy, at::Tensor(), 0, LtEpilogue::none, at::Tensor(), half);
      named = ir::execute_node(product, {x.t(), dy}, torch::kCUDA, "aten");
      large = side_product_sm_target(16384, 768, Optimization::side_product_sms);
      trainc::test::ScopedVariable off(kDisableOptimizationsVariable, "side_product_sms");
      switched_off = ir::execute_node(product, {x.t(), dy}, torch::kCUDA, "");
    });
    side.join();
    torch::cuda::synchronize();
    REQUIRE(ran_direct);
    CHECK(large == 0);
    CHECK(aimed.scalar_type() == torch::kFloat);
    CHECK(torch::equal(aimed, direct));
    CHECK(relative_error(aimed, whole) < 1e-4);
    CHECK(torch::equal(named, whole));
    CHECK(torch::equal(switched_off, whole));
  }

  const at::Tensor x = torch::randn({2048, 256}, options), dy = torch::randn({2048, 768}, options);
  at::Tensor captured;
  CudaGraph graph(torch::kCUDA);
  graph.run([&] { (void)ir::execute_node(product, {x.t(), dy}, torch::kCUDA, ""); });
  graph.capture([&] {
    side.run([&] { captured = ir::execute_node(product, {x.t(), dy}, torch::kCUDA, ""); });
    side.join();
  });
  x.copy_(torch::randn_like(x));
  graph.replay();
  const at::Tensor direct = torch::empty({256, 768}, options.dtype(torch::kFloat));
  side.run([&] { REQUIRE(lt_matmul_out(direct, x.t(), dy, at::Tensor(), 0, LtEpilogue::none, at::Tensor(), half)); });
  side.join();
  torch::cuda::synchronize();
  CHECK(torch::equal(captured, direct));
}
