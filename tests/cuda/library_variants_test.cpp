// On a CUDA GPU: every implementation a compiled program can choose for a library call computes the
// same thing. Attention: each fused backend (flash, memory-efficient, cuDNN), forward and
// gradients, on bf16 q, k, v laid out as a GPT's (views of one [B, T, 3, H, D] projection), against
// the textbook formula in float64: each result within 2e-2 of the largest element (bf16 keeps 8
// bits; softmax and three products round in between). Matrix products: cuBLAS and cuBLASLt on bf16
// within 1e-2, each of cuBLASLt's ranked algorithms called directly, and bf16 products written in
// float32 within float32 accumulation. Sums over leading dimensions split over the rows against ATen's,
// and attention's gradients stacked by the same kernel as it sums them. Then
// max-autotune's choice on the GPU: measured once, recorded, read back.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <ATen/cuda/CUDAContext.h>

#include <array>
#include <iostream>
#include <utility>
#include <vector>

#include "support/posix_scratch_dir.h"
#include "support/numerics.h"
#include "trainc/compat/cublaslt_algorithms.h"
#include "trainc/compat/cuda_graph.h"
#include "trainc/compat/device_timing.h"
#include "trainc/compat/library_variants.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/autotune/library_choice.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/column_sums.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"

using namespace trainc;
using trainc::test::relative_error;

namespace {

struct Qkv {
  at::Tensor q, k, v, grad_out;
};

// q, k, v as a GPT's attention reads them: [B, H, T, D] views of one [B, T, 3, H, D] projection.
Qkv gpt_layout(int64_t b, int64_t h, int64_t t, int64_t d) {
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const at::Tensor projection = torch::randn({b, t, 3, h, d}, options);
  const at::Tensor grad = torch::randn({b, t, h, d}, options);
  return {projection.select(2, 0).permute({0, 2, 1, 3}), projection.select(2, 1).permute({0, 2, 1, 3}),
          projection.select(2, 2).permute({0, 2, 1, 3}), grad.permute({0, 2, 1, 3})};
}

}  // namespace

TEST_CASE("every fused attention backend computes the attention and its gradients", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const Qkv in = gpt_layout(2, 4, 256, 64);
  const double scale = 0.125;
  const auto f64 = [](const at::Tensor& t) { return t.to(torch::kDouble); };
  const at::Tensor expected = attention_with(AttentionBackend::math, f64(in.q), f64(in.k), f64(in.v), scale, true);
  const auto expected_grads = attention_grads_with(AttentionBackend::math, f64(in.q), f64(in.k), f64(in.v), f64(in.grad_out), scale, true);
  const AttentionBackend picked = aten_attention_backend(in.q, in.k, in.v, scale, true, /*training=*/true);
  std::cout << "ATen picks attention backend " << attention_backend_name(picked) << " for bf16 [2, 4, 256, 64]" << std::endl;
  CHECK(picked != AttentionBackend::math);
  int ran = 0;
  for (AttentionBackend backend : attention_backends(torch::kCUDA)) {
    INFO("backend " << attention_backend_name(backend));
    if (!attention_backend_accepts(backend, in.q, in.k, in.v, scale, true, /*training=*/true)) {
      std::cout << "attention backend " << attention_backend_name(backend) << " cannot run: ATen's rules refuse these inputs" << std::endl;
      CHECK(backend != picked);
      continue;
    }
    at::Tensor out;
    std::array<at::Tensor, 3> grads;
    try {
      out = attention_with(backend, in.q, in.k, in.v, scale, true);
      grads = attention_grads_with(backend, in.q, in.k, in.v, in.grad_out, scale, true);
    } catch (const std::exception& error) {
      // A backend this GPU or build lacks is left out by the tuner; the one ATen picks must run.
      std::cout << "attention backend " << attention_backend_name(backend) << " cannot run: " << error.what() << std::endl;
      CHECK(backend != picked);
      continue;
    }
    ++ran;
    CHECK(relative_error(out, expected) < 2e-2);
    for (int i = 0; i < 3; ++i) {
      INFO("gradient " << "qkv"[i]);
      CHECK(relative_error(grads[static_cast<std::size_t>(i)], expected_grads[static_cast<std::size_t>(i)]) < 2e-2);
    }
  }
  CHECK(ran >= 2);
}

// attention_and_lse, attention_lse and attention_grad_from_lse (the forward keeps its output and
// log-sum-exp, the backward runs no forward), and attention_grad_and_bias_sums (in bf16 through the
// stacking kernel, in f16 through ATen's stack), against the math formula in float64, with ATen's pick (cuDNN on an
// H200) and with cuDNN switched off (flash): within 2e-2 of the largest element, as above. Asked
// with grad mode off, as a compiled step's programs run. The backward must read the kept
// log-sum-exp: raised by 1, it gives other gradients.
TEST_CASE("attention with a kept log-sum-exp: its backward without the forward matches the formula", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  c10::NoGradGuard no_grad;
  const Qkv in = gpt_layout(2, 4, 256, 64);
  const auto f64 = [](const at::Tensor& t) { return t.to(torch::kDouble); };
  const double scale = 1.0 / 8.0;  // the default for heads of 64
  const at::Tensor expected = attention_with(AttentionBackend::math, f64(in.q), f64(in.k), f64(in.v), scale, true);
  const auto expected_grads = attention_grads_with(AttentionBackend::math, f64(in.q), f64(in.k), f64(in.v), f64(in.grad_out), scale, true);
  at::Context& context = at::globalContext();
  struct RestoreCuDNN {
    at::Context& context;
    bool enabled;
    ~RestoreCuDNN() { context.setSDPUseCuDNN(enabled); }
  } restore{context, context.userEnabledCuDNNSDP()};
  const int64_t b = 2, h = 4, t = 256, d = 64;
  std::vector<AttentionBackend> kept;
  for (const bool cudnn : {true, false}) {
    context.setSDPUseCuDNN(cudnn && restore.enabled);
    const AttentionBackend backend = lse_attention_backend(in.q, in.k, in.v, scale, true);
    INFO("cuDNN " << (cudnn ? "on" : "off") << ": backend " << attention_backend_name(backend));
    kept.push_back(backend);
    ir::Node forward;
    forward.op = ir::Op::attention_and_lse;
    forward.attrs.causal = true;
    const at::Tensor out = ir::execute_node(forward, {in.q, in.k, in.v}, torch::kCUDA);
    CHECK(relative_error(out, expected) < 2e-2);
    // The output as the kernel wrote it: [B, T, H, D] in memory, the layout the projection reads.
    CHECK(out.permute({0, 2, 1, 3}).is_contiguous());
    ir::Node read_lse;
    read_lse.op = ir::Op::attention_lse;
    const at::Tensor lse = ir::execute_node(read_lse, {out}, torch::kCUDA);
    CHECK(lse.sizes() == at::IntArrayRef({b, h, t}));
    CHECK_FALSE(lse.isnan().any().item<bool>());
    ir::Node backward = forward;
    backward.op = ir::Op::attention_grad_from_lse;
    const at::Tensor grads = ir::execute_node(backward, {in.q, in.k, in.v, out, lse, in.grad_out}, torch::kCUDA);
    for (int64_t i = 0; i < 3; ++i) {
      INFO("gradient " << "qkv"[i]);
      CHECK(relative_error(grads.select(0, i), expected_grads[static_cast<std::size_t>(i)]) < 2e-2);
    }
    // With the q-k-v projection's bias gradient: the same gradients, stacked as [B, T, 3, H, D], and
    // their column sums (the stack's own, in float32: within 1e-5 of float64's).
    ir::Node with_sums = forward;
    with_sums.op = ir::Op::attention_grad_and_bias_sums;
    ir::AttentionGradSumsLayout sums_layout;
    REQUIRE(ir::attention_grad_sums_layout({b, h, t, d}, 2, sums_layout));
    const auto check_stack_and_sums = [&](const at::Tensor& both) {
      const at::Tensor stacked = both.narrow(0, 0, sums_layout.grads_elements).view({b, t, 3, h, d});
      for (int64_t i = 0; i < 3; ++i) {
        INFO("stacked gradient " << "qkv"[i]);
        CHECK(relative_error(stacked.select(2, i).permute({0, 2, 1, 3}), expected_grads[static_cast<std::size_t>(i)]) < 2e-2);
      }
      const at::Tensor sums = both.narrow(0, sums_layout.sums_offset, sums_layout.sums_elements).view(torch::kFloat);
      CHECK(relative_error(sums, stacked.to(torch::kDouble).view({b * t, 3 * h * d}).sum(0)) < 1e-5);
    };
    {
      INFO("bf16: the stacking kernel");
      check_stack_and_sums(ir::execute_node(with_sums, {in.q, in.k, in.v, out, lse, in.grad_out}, torch::kCUDA));
    }
    const at::Tensor other = ir::execute_node(backward, {in.q, in.k, in.v, out, lse + 1.0, in.grad_out}, torch::kCUDA);
    CHECK(relative_error(other, grads) > 0.1);
    // In f16 the stacking kernel (bf16 only) is not used: ATen stacks into the buffer and sums.
    const auto half = [](const at::Tensor& t) { return t.permute({0, 2, 1, 3}).to(torch::kHalf).permute({0, 2, 1, 3}); };
    const std::vector<at::Tensor> half_in = {half(in.q), half(in.k), half(in.v)};
    const at::Tensor half_out = ir::execute_node(forward, half_in, torch::kCUDA);
    const at::Tensor half_lse = ir::execute_node(read_lse, {half_out}, torch::kCUDA);
    {
      INFO("f16: ATen's stack");
      check_stack_and_sums(
          ir::execute_node(with_sums, {half_in[0], half_in[1], half_in[2], half_out, half_lse, half(in.grad_out)}, torch::kCUDA));
    }
  }
  std::cout << "attention keeps its log-sum-exp with " << attention_backend_name(kept[0]) << ", and with cuDNN off "
            << attention_backend_name(kept[1]) << std::endl;
  CHECK(kept[0] != AttentionBackend::math);  // the path under test ran, not the recomputing fallback
  CHECK(kept[1] != AttentionBackend::math);
}

// Called directly, cuDNN's kernel ran float32 inputs it does not support and returned garbage,
// which max-autotune then measured as the fastest: a step of NaNs. ATen's rules refuse it.
TEST_CASE("a backend is offered only the inputs ATen's rules let it run", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const Qkv in = gpt_layout(2, 4, 128, 64);
  const at::Tensor q = in.q.to(torch::kFloat), k = in.k.to(torch::kFloat), v = in.v.to(torch::kFloat);
  CHECK_FALSE(attention_backend_accepts(AttentionBackend::cudnn, q, k, v, 0.125, true));
  CHECK_FALSE(attention_backend_accepts(AttentionBackend::flash, q, k, v, 0.125, true));
  CHECK(attention_backend_accepts(AttentionBackend::efficient, q, k, v, 0.125, true));
  CHECK(attention_backend_accepts(AttentionBackend::flash, in.q, in.k, in.v, 0.125, true));
  CHECK(aten_attention_backend(q, k, v, 0.125, true) == AttentionBackend::efficient);  // the flags came back
}

TEST_CASE("matrix products on cuBLAS and cuBLASLt agree", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const at::Tensor x = torch::randn({4, 96, 512}, options), w = torch::randn({512, 384}, options), bias = torch::randn({384}, options);
  const at::Tensor expected = at::matmul(x.to(torch::kDouble), w.to(torch::kDouble));
  ir::Node matmul, matmul_bias;
  matmul.op = ir::Op::matmul;
  matmul_bias.op = ir::Op::matmul_bias;
  const std::vector<std::string> libraries = blas_libraries(torch::kCUDA);
  CHECK(libraries.size() == 2);
  for (const std::string& library : libraries) {
    INFO("library " << library);
    CHECK(relative_error(ir::execute_node(matmul, {x, w}, torch::kCUDA, library), expected) < 1e-2);
    CHECK(relative_error(ir::execute_node(matmul_bias, {x, w, bias}, torch::kCUDA, library), expected + bias.to(torch::kDouble)) < 1e-2);
    CHECK(relative_error(ir::execute_node(matmul, {x, w.t().contiguous().t()}, torch::kCUDA, library), expected) < 1e-2);
  }
}

// A weight gradient's product, g^T x, written in float32 by the GEMM: within float32 accumulation of
// the float64 product (1e-4 of the largest element), where rounding it to bf16 first is off by up
// to 2^-9 of an element (about 1e-3 here): the test tells the two apart.
TEST_CASE("a bf16 product to float32 is one GEMM storing its float32 accumulator", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  CHECK(matmul_to_float_in_one_gemm(torch::kCUDA));
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const at::Tensor g = torch::randn({4096, 256}, options), x = torch::randn({4096, 384}, options);
  const at::Tensor expected = at::matmul(g.to(torch::kDouble).t(), x.to(torch::kDouble));
  const double rounded_error = relative_error(at::matmul(g.t(), x).to(torch::kFloat), expected);
  std::cout << "bf16 product to float32: the product rounded to bf16 first is off by " << rounded_error << " of the largest element" << std::endl;
  ir::Node product;
  product.op = ir::Op::matmul_to_float;
  std::vector<std::string> variants = blas_libraries(torch::kCUDA);
  variants.push_back("");  // the default call
  for (const std::string& library : variants) {
    INFO("library '" << library << "'");
    const at::Tensor got = ir::execute_node(product, {g.t(), x}, torch::kCUDA, library);
    CHECK(got.scalar_type() == torch::kFloat);
    CHECK(relative_error(got, expected) < 1e-4);
  }
  CHECK(rounded_error > 1e-4);
}

// cuBLASLt's ranked algorithms called directly (max-autotune's candidates for a product): every
// one offered computes the product, within 1e-2 of the largest element for bf16 results (bf16 keeps
// 8 bits) and 1e-4 for float32 ones (float32 accumulation; split-K algorithms add in another order);
// with a bias epilogue; with the weight row- and column-major (a transposed view); a weight
// gradient's g^T x written in float32. A product whose operand starts off a 16-byte boundary is not
// offered, and asked anyway it is ATen's. Captured in a CUDA graph, an algorithm reads the graph's
// input buffers at every replay.
TEST_CASE("every cuBLASLt algorithm max-autotune measures computes the product", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  REQUIRE_FALSE(cublaslt_version().empty());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const at::Tensor x = torch::randn({4, 96, 512}, options), w = torch::randn({512, 384}, options), bias = torch::randn({384}, options);
  const at::Tensor g = torch::randn({384, 256}, options);  // a gradient over x's 384 rows
  const auto f64 = [](const at::Tensor& t) { return t.to(torch::kDouble); };
  ir::Node matmul, matmul_bias, to_float;
  matmul.op = ir::Op::matmul;
  matmul_bias.op = ir::Op::matmul_bias;
  to_float.op = ir::Op::matmul_to_float;
  const at::Tensor x_rows = x.view({-1, 512});
  struct Case {
    const char* what;
    const ir::Node& node;
    std::vector<at::Tensor> inputs;
    at::Tensor expected;
    double tolerance;
  };
  const std::vector<Case> cases = {
      {"matmul, row-major weight", matmul, {x, w}, at::matmul(f64(x), f64(w)), 1e-2},
      {"matmul, column-major weight", matmul, {x, w.t().contiguous().t()}, at::matmul(f64(x), f64(w)), 1e-2},
      {"matmul_bias", matmul_bias, {x, w, bias}, at::matmul(f64(x), f64(w)) + f64(bias), 1e-2},
      {"matmul_to_float, transposed operand", to_float, {x_rows.t(), g}, at::matmul(f64(x_rows).t(), f64(g)), 1e-4},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const int count = ir::gemm_algorithm_count(c.node, c.inputs, 16);
    std::cout << "cuBLASLt " << cublaslt_version() << " ranks " << count << " algorithms for " << c.what << std::endl;
    REQUIRE(count >= 2);
    // The operands as the executor folds them: x's rows, the weight, the bias.
    const at::Tensor a = c.inputs[0].dim() == 2 ? c.inputs[0] : c.inputs[0].reshape({-1, c.inputs[0].size(-1)});
    const at::Tensor bias = c.inputs.size() > 2 ? c.inputs[2] : at::Tensor();
    const at::ScalarType out_dtype = c.node.op == ir::Op::matmul_to_float ? torch::kFloat : torch::kBFloat16;
    for (int i = 0; i < count; ++i) {
      INFO("algorithm " << i);
      const at::Tensor got = ir::execute_node(c.node, c.inputs, torch::kCUDA, lt_algorithm_name(i));
      CHECK(got.sizes() == c.expected.sizes());
      CHECK(got.scalar_type() == out_dtype);
      CHECK(relative_error(got, c.expected) < c.tolerance);
      // Called directly, the algorithm runs (the executor would fall back to ATen silently).
      at::Tensor direct = torch::empty({a.size(0), c.inputs[1].size(1)}, options.dtype(out_dtype));
      REQUIRE(lt_matmul_out(direct, a, c.inputs[1], bias, i));
      CHECK(relative_error(direct.view(c.expected.sizes()), c.expected) < c.tolerance);
    }
  }
  // Called directly: the call ran (execute_node would fall back to ATen silently); past the ranking it does not.
  at::Tensor out = torch::empty({384, 384}, options);
  CHECK(lt_matmul_out(out, x_rows, w, bias, 0));
  CHECK(relative_error(out, at::matmul(f64(x_rows), f64(w)) + f64(bias)) < 1e-2);
  CHECK_FALSE(lt_matmul_out(out, x_rows, w, bias, 1000));
  CHECK(lt_algorithm_index(lt_algorithm_name(7)) == 7);
  CHECK_FALSE(lt_algorithm_index("cublaslt").has_value());

  const at::Tensor misaligned = torch::randn({4 * 96 * 512 + 1}, options).narrow(0, 1, 4 * 96 * 512).view({4, 96, 512});
  CHECK(ir::gemm_algorithm_count(matmul, {misaligned, w}, 16) == 0);
  CHECK(relative_error(ir::execute_node(matmul, {misaligned, w}, torch::kCUDA, lt_algorithm_name(0)), at::matmul(f64(misaligned), f64(w))) < 1e-2);
  CHECK(ir::gemm_algorithm_count(matmul, {x.to(torch::kFloat), w.to(torch::kFloat)}, 16) == 0);  // float32 operands stay ATen's

  // Captured: the last-ranked algorithm (which may use the shared workspace), called directly,
  // replays on new inputs.
  const int last = ir::gemm_algorithm_count(matmul_bias, {x, w, bias}, 16) - 1;
  const at::Tensor static_x = x_rows.clone();
  const at::Tensor captured = torch::empty({384, 384}, options);
  bool ran = false;
  CudaGraph graph(torch::kCUDA);
  graph.run([&] { ran = lt_matmul_out(captured, static_x, w, bias, last); });
  REQUIRE(ran);
  graph.capture([&] { ran = lt_matmul_out(captured, static_x, w, bias, last); });
  REQUIRE(ran);
  const at::Tensor next_x = torch::randn({384, 512}, options);
  static_x.copy_(next_x);
  graph.replay();
  torch::cuda::synchronize();
  CHECK(relative_error(captured, at::matmul(f64(next_x), f64(w)) + f64(bias)) < 1e-2);
}

// The head's training pair (runtime/linear_cross_entropy) with each of its products on each of
// cuBLASLt's ranked algorithms: the losses within 1e-3 of ATen's mm's, the gradients within 2e-2 of
// the largest element (the products and the kept dlogits round to bf16). max-autotune measures
// each product on its own and names one algorithm per product.
TEST_CASE("the head's products on each of cuBLASLt's algorithms give the head's losses and gradients", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const int64_t rows = 512, width = 128, vocabulary = 1000;
  const at::Tensor x = torch::randn({rows, width}, options), weight = (torch::randn({vocabulary, width}, options) * 0.1).to(torch::kBFloat16);
  const at::Tensor targets = torch::randint(0, vocabulary, {rows}, options.dtype(torch::kLong));
  const at::Tensor grad = torch::rand({rows}, options.dtype(torch::kFloat)) / rows;
  ir::Node forward, backward;
  forward.op = ir::Op::linear_cross_entropy_and_dlogits;
  forward.attrs.dtype = ir::DType::f32;
  backward.op = ir::Op::linear_cross_entropy_grad_from_dlogits;
  ir::LinearCrossEntropyLayout layout;
  REQUIRE(ir::linear_cross_entropy_layout(rows, width, vocabulary, 2, 4, layout));
  const auto losses = [&](const at::Tensor& packed) { return packed.narrow(0, 0, layout.loss_elements).view(torch::kFloat); };
  const std::vector<at::Tensor> forward_inputs = {x, weight, targets};
  const at::Tensor expected_packed = ir::execute_node(forward, forward_inputs, torch::kCUDA);
  const at::Tensor expected_grads = ir::execute_node(backward, {expected_packed, x, weight, grad}, torch::kCUDA);

  const std::vector<HeadGemm> forward_gemms = head_gemms(forward.op, forward_inputs, torch::kFloat);
  REQUIRE(forward_gemms.size() == 1);
  const HeadGemm& logits = forward_gemms[0];
  const int forward_count = lt_algorithm_count(logits.a, logits.b, at::Tensor(), logits.out.scalar_type(), 16);
  REQUIRE(forward_count >= 1);
  for (int i = 0; i < forward_count; ++i) {
    INFO("logits on algorithm " << i);
    REQUIRE(lt_matmul_out(logits.out, logits.a, logits.b, at::Tensor(), i));  // runs: the op's results below are its
    const at::Tensor packed = ir::execute_node(forward, forward_inputs, torch::kCUDA, lt_algorithm_list_name({i}));
    CHECK(relative_error(losses(packed), losses(expected_packed)) < 1e-3);
    CHECK(relative_error(ir::execute_node(backward, {packed, x, weight, grad}, torch::kCUDA), expected_grads) < 2e-2);
  }
  const std::vector<at::Tensor> backward_inputs = {expected_packed, x, weight, grad};
  const std::vector<HeadGemm> backward_gemms = head_gemms(backward.op, backward_inputs, torch::kFloat);
  REQUIRE(backward_gemms.size() == 2);
  for (std::size_t product = 0; product < 2; ++product) {
    const HeadGemm& gemm = backward_gemms[product];
    CHECK(gemm.out.sizes().vec() == (product == 0 ? std::vector<int64_t>{rows, width} : std::vector<int64_t>{layout.padded_vocabulary, width}));
    const int count = lt_algorithm_count(gemm.a, gemm.b, at::Tensor(), gemm.out.scalar_type(), 16);
    REQUIRE(count >= 1);
    for (int i = 0; i < count; ++i) {
      INFO("backward product " << product << " on algorithm " << i);
      REQUIRE(lt_matmul_out(gemm.out, gemm.a, gemm.b, at::Tensor(), i));
      std::vector<int> algorithms = {-1, -1};
      algorithms[product] = i;
      CHECK(relative_error(ir::execute_node(backward, backward_inputs, torch::kCUDA, lt_algorithm_list_name(algorithms)), expected_grads) < 2e-2);
    }
  }

  test::PosixScratchDir dir("trainc-head-autotune");
  Autotuner tuner(TuningCache(dir.path()), [](const std::function<void()>& work) { return time_on_device(torch::kCUDA, work, 3); });
  const std::optional<std::vector<int>> forward_choice = lt_algorithm_list(choose_library_variant(forward, forward_inputs, torch::kCUDA, &tuner));
  const std::optional<std::vector<int>> backward_choice = lt_algorithm_list(choose_library_variant(backward, backward_inputs, torch::kCUDA, &tuner));
  REQUIRE(forward_choice.has_value());
  REQUIRE(backward_choice.has_value());
  CHECK(forward_choice->size() == 1);
  CHECK(backward_choice->size() == 2);
  CHECK(tuner.take_stats().measured == 3);
  CHECK(choose_library_variant(forward, forward_inputs, torch::kCUDA, nullptr).empty());  // without a tuner, ATen's
  CHECK(lt_algorithm_list(lt_algorithm_list_name({3, -1})) == std::vector<int>({3, -1}));
  CHECK_FALSE(lt_algorithm_list("cublaslt-algos 3,x").has_value());
}

// matmul_bias_gelu on cuBLASLt's GELU epilogue (passes/gelu_epilogue), each ranked algorithm: the
// kept sum x . w + b within 1e-2 of the largest element of the float64 one; the activation GELU's
// tanh approximation of the float32 sum, within 1e-2 likewise. Near x = -3, where the tanh
// approximation is 10% off the exact (erf) GELU, each element within 2e-2 of the tanh one: the
// epilogue computes the approximation the model asks for.
TEST_CASE("the GELU epilogue makes the tanh GELU of the product plus bias and keeps the sum", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto f64 = [](const at::Tensor& t) { return t.to(torch::kDouble); };
  const auto gelu_tanh = [](const at::Tensor& s) { return 0.5 * s * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s))); };
  ir::Node node;
  node.op = ir::Op::matmul_bias_gelu;
  const at::Tensor weight = torch::randn({384, 512}, options);  // a linear layer's [out, in]: the product reads its transpose
  for (const bool near_minus_three : {false, true}) {
    INFO((near_minus_three ? "sums near -3" : "random sums"));
    const at::Tensor x = near_minus_three ? (torch::randn({4, 96, 512}, options) * 0.002).to(torch::kBFloat16) : torch::randn({4, 96, 512}, options);
    const at::Tensor bias = near_minus_three ? torch::full({384}, -3.0, options) : torch::randn({384}, options);
    const std::vector<at::Tensor> inputs = {x, weight.t(), bias};
    const at::Tensor sum = at::matmul(f64(x), f64(weight).t()) + f64(bias);
    const at::Tensor expected = gelu_tanh(sum);
    const int count = ir::gemm_algorithm_count(node, inputs, 16);
    std::cout << "cuBLASLt ranks " << count << " algorithms for the GELU epilogue" << std::endl;
    REQUIRE(count >= 1);
    for (int i = 0; i < count; ++i) {
      INFO("algorithm " << i);
      at::Tensor gelu = torch::empty({384, 384}, options), preactivation = torch::empty({384, 384}, options);
      REQUIRE(lt_matmul_out(gelu, x.view({-1, 512}), weight.t(), bias, i, LtEpilogue::gelu, preactivation));  // the epilogue runs
      const at::Tensor both = ir::execute_node(node, inputs, torch::kCUDA, lt_algorithm_name(i));
      REQUIRE(both.sizes() == at::IntArrayRef({2, 4, 96, 384}));
      CHECK(relative_error(preactivation, sum.view({384, 384})) < 1e-2);
      CHECK(relative_error(both.select(0, 1), sum) < 1e-2);
      if (near_minus_three) {
        const double tanh_error = ((f64(both.select(0, 0)) - expected).abs() / expected.abs()).max().item<double>();
        const double erf_error = ((f64(both.select(0, 0)) - at::gelu(sum)).abs() / expected.abs()).min().item<double>();
        CHECK(tanh_error < 2e-2);
        CHECK(erf_error > 5e-2);  // the exact GELU is far off here: the test tells the two apart
      } else {
        CHECK(relative_error(both.select(0, 0), expected) < 1e-2);
      }
    }
  }
}

// matmul_gelu_grad on cuBLASLt's DGELU epilogue (passes/gelu_grad_epilogue), each ranked algorithm,
// the weight as GPT-2's backward reads it (row-major) and transposed: within 1e-2 of the largest
// element of the float64 product times the tanh GELU's derivative (autograd's). At -3.5, where the
// exact GELU's derivative is 16% off the approximation's, within 2e-2 of the approximation's and
// over 0.1 from the exact one.
TEST_CASE("the GELU-gradient epilogue multiplies the product by the tanh GELU's derivative", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto f64 = [](const at::Tensor& t) { return t.to(torch::kDouble); };
  const auto gelu_grad = [](const at::Tensor& y, const at::Tensor& grad, const std::string& approximate) {
    const at::Tensor at_y = y.detach().requires_grad_(true);
    return torch::autograd::grad({at::gelu(at_y, approximate)}, {at_y}, {grad})[0];
  };
  ir::Node node;
  node.op = ir::Op::matmul_gelu_grad;
  const at::Tensor a = torch::randn({4, 96, 512}, options);
  for (const bool transposed : {false, true}) {
    const at::Tensor weight = transposed ? torch::randn({384, 512}, options).t() : torch::randn({512, 384}, options);
    for (const bool at_minus_3_5 : {false, true}) {
      INFO((transposed ? "transposed weight" : "row-major weight") << (at_minus_3_5 ? ", pre-activations -3.5" : ", random pre-activations"));
      const at::Tensor y = at_minus_3_5 ? torch::full({4, 96, 384}, -3.5, options) : (torch::randn({4, 96, 384}, options) * 2).to(torch::kBFloat16);
      const std::vector<at::Tensor> inputs = {a, weight, y};
      const at::Tensor product = at::matmul(f64(a), f64(weight)).view({384, 384});
      const at::Tensor expected = gelu_grad(f64(y).view({384, 384}), product, "tanh"), exact = gelu_grad(f64(y).view({384, 384}), product, "none");
      const int count = ir::gemm_algorithm_count(node, inputs, 16);
      std::cout << "cuBLASLt ranks " << count << " algorithms for the GELU-gradient epilogue" << std::endl;
      REQUIRE(count >= 1);
      for (int i = 0; i < count; ++i) {
        INFO("algorithm " << i);
        at::Tensor direct = torch::empty({384, 384}, options);
        REQUIRE(lt_matmul_out(direct, a.view({-1, 512}), weight, at::Tensor(), i, LtEpilogue::gelu_grad, y.view({-1, 384})));  // the epilogue runs
        const at::Tensor grad = ir::execute_node(node, inputs, torch::kCUDA, lt_algorithm_name(i));
        REQUIRE(grad.sizes() == at::IntArrayRef({4, 96, 384}));
        CHECK(relative_error(direct, expected) < (at_minus_3_5 ? 2e-2 : 1e-2));
        CHECK(relative_error(grad.view({384, 384}), expected) < (at_minus_3_5 ? 2e-2 : 1e-2));
        if (at_minus_3_5) CHECK(relative_error(grad.view({384, 384}), exact) > 0.1);  // the test tells the two apart
      }
    }
  }
}

TEST_CASE("max-autotune measures a call's implementations once and a later run reads the choice", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  test::PosixScratchDir dir("trainc-autotune");
  const Qkv in = gpt_layout(4, 12, 512, 64);
  ir::Node grad;
  grad.op = ir::Op::attention_grad;
  grad.attrs.causal = true;
  const std::vector<at::Tensor> inputs = {in.q, in.k, in.v, in.grad_out};
  const auto measure = [](const std::function<void()>& work) { return time_on_device(torch::kCUDA, work, 5); };
  Autotuner tuner(TuningCache(dir.path()), measure);
  const std::string chosen = choose_library_variant(grad, inputs, torch::kCUDA, &tuner);
  std::cout << "max-autotune chose attention backend " << chosen << " for attention_grad bf16 [4, 12, 512, 64]" << std::endl;
  CHECK(attention_backend_named(chosen).has_value());
  CHECK(tuner.take_stats().measured == 1);
  const at::Tensor expected = ir::execute_node(grad, inputs, torch::kCUDA);
  CHECK(relative_error(ir::execute_node(grad, inputs, torch::kCUDA, chosen), expected) < 2e-2);

  Autotuner later(TuningCache(dir.path()), [](const std::function<void()>&) -> double { FAIL("measured again"); return 0; });
  CHECK(choose_library_variant(grad, inputs, torch::kCUDA, &later) == chosen);
  CHECK(later.take_stats().from_cache == 1);
  // Without a tuner: the backend ATen's rules pick, fixed once.
  CHECK(choose_library_variant(grad, inputs, torch::kCUDA, nullptr) ==
        attention_backend_name(aten_attention_backend(in.q, in.k, in.v, 0.125, true, /*training=*/true)));
}

// runtime/column_sums against ATen's sum in float64: rows that do not fill the last split,
// float32 and bf16 inputs, one or two leading axes, keepdim, rows few enough for one kernel
// (written straight to the result); float32 accumulation over 16k rows stays within 1e-5 of the
// largest sum. Without a tuner, bf16 sums and float32 sums of one kernel are split over the rows,
// other float32 sums are ATen's. Shapes it does not take are left to ATen.
TEST_CASE("sums over leading dimensions split over the rows equal ATen's", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int64_t> axes;
    at::ScalarType dtype;
    bool keepdim;
    bool one_pass;  // rows few enough for one split: no finishing kernel
  };
  const std::vector<Case> cases = {{{16, 1024, 768}, {0, 1}, torch::kBFloat16, false, false}, {{16, 1024, 3072}, {1, 0}, torch::kFloat, false, false},
                                   {{1000, 40}, {0}, torch::kBFloat16, true, false},          {{3, 7, 2304}, {0, 1}, torch::kFloat, true, true},
                                   {{5, 4}, {0}, torch::kFloat, false, true},                 {{8, 256, 256}, {0}, torch::kFloat, false, true},
                                   {{40, 256}, {0}, torch::kFloat, false, false}};
  for (const Case& c : cases) {
    INFO("shape " << at::IntArrayRef(c.shape) << " over " << at::IntArrayRef(c.axes) << " in " << c.dtype);
    const at::Tensor x = torch::randn(c.shape, cuda).to(c.dtype);
    REQUIRE(column_sums_supported(x, c.axes));
    CHECK(column_sums_rows_in_one_split(x, static_cast<int64_t>(c.axes.size())) == c.one_pass);
    ir::Graph graph;
    const ir::ValueId in = graph.add_input("x", {ir::to_dtype(c.dtype), c.shape});
    ir::Attributes axes;
    axes.ints = c.axes;
    axes.keepdim = c.keepdim;
    for (const ir::Op op : {ir::Op::sum, ir::Op::sum_to_float}) {
      if (op == ir::Op::sum_to_float && c.dtype != torch::kBFloat16) continue;
      const ir::ValueId out = graph.add(op, {in}, axes);
      const ir::Node& node = graph.node(out);
      const at::Tensor expected = ir::execute_node(node, {x.to(torch::kDouble)}, torch::kCUDA);
      const at::Tensor got = ir::execute_node(node, {x}, torch::kCUDA, "split_rows");
      CHECK(got.sizes().vec() == node.type.shape);
      CHECK(got.scalar_type() == ir::to_scalar_type(node.type.dtype));
      CHECK(relative_error(got, expected) < (got.scalar_type() == torch::kBFloat16 ? 1e-2 : 1e-5));
      CHECK(choose_library_variant(node, {x}, torch::kCUDA, nullptr) == (c.dtype == torch::kBFloat16 || c.one_pass ? "split_rows" : ""));
    }
  }
  CHECK_FALSE(column_sums_supported(torch::randn({8, 6}, cuda), {0}));                               // 24 bytes a row
  CHECK_FALSE(column_sums_supported(torch::randn({8, 16}, cuda).t(), {0}));                          // not contiguous
  CHECK_FALSE(column_sums_supported(torch::randn({8, 16}, cuda), {1}));                              // a trailing axis
  CHECK_FALSE(column_sums_supported(torch::randn({129}, cuda).narrow(0, 1, 128).view({16, 8}), {0}));  // misaligned
}

// dq, dk, dv stacked by the column-sum kernel as it sums them: the stack ATen makes, and the sums
// column_sums gives that stack, bit for bit (the same order of additions), for gradients laid out as
// the fused attention kernels return them ([B, T, H, D] in memory) and contiguous, over rows that do
// not fill the last split and over rows few enough for one split (no finishing kernel); the sums
// within 1e-5 of float64's. Layouts it does not take are left to ATen.
TEST_CASE("attention's gradients stacked and summed in one kernel equal their stack and its column sums", "[cuda][autotune]") {
  REQUIRE(torch::cuda::is_available());
  const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const int64_t b = 3, h = 12, d = 64;
  // Rows of B * T: 300 (splits, the last partial), and 24 (one split).
  const std::vector<std::pair<int64_t, bool>> layouts = {{100, true}, {100, false}, {8, true}};
  for (const auto& [t, time_major] : layouts) {
    INFO((time_major ? "[B, T, H, D] memory" : "contiguous [B, H, T, D]") << ", " << b * t << " rows");
    std::array<at::Tensor, 3> parts;
    for (at::Tensor& part : parts) part = time_major ? torch::randn({b, t, h, d}, cuda).permute({0, 2, 1, 3}) : torch::randn({b, h, t, d}, cuda);
    at::Tensor stacked = torch::empty({b, t, 3, h, d}, cuda);
    at::Tensor sums = torch::empty({3 * h * d}, cuda.dtype(torch::kFloat));
    REQUIRE(stack_column_sums_supported(parts, stacked));
    stack_column_sums(parts, stacked, sums);
    const at::Tensor expected = torch::stack({parts[0].permute({0, 2, 1, 3}), parts[1].permute({0, 2, 1, 3}), parts[2].permute({0, 2, 1, 3})}, 2);
    CHECK(torch::equal(stacked, expected));
    CHECK(torch::equal(sums, column_sums(expected.contiguous().view({b * t, 3 * h * d}), 1)));
    CHECK(relative_error(sums, expected.to(torch::kDouble).reshape({b * t, 3 * h * d}).sum(0)) < 1e-5);
  }
  const int64_t t = 100;
  at::Tensor stacked = torch::empty({b, t, 3, h, 4}, cuda);
  const at::Tensor narrow_heads = torch::randn({b, h, t, 4}, cuda);  // 8-byte rows of a head
  CHECK_FALSE(stack_column_sums_supported({narrow_heads, narrow_heads, narrow_heads}, stacked));
  const at::Tensor misaligned = torch::randn({b * h * t * d + 1}, cuda).narrow(0, 1, b * h * t * d).view({b, h, t, d});
  stacked = torch::empty({b, t, 3, h, d}, cuda);
  CHECK_FALSE(stack_column_sums_supported({misaligned, misaligned, misaligned}, stacked));
}
