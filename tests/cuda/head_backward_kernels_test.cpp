// The kernels a tied language-model head's backward runs besides its GEMMs, against ATen on the
// GPU with fresh random inputs: each row scaled by its loss gradient (runtime/scaled_rows), equal
// to ATen's float32 multiply rounded to bf16; and the embedding's gradient added into the head's
// (runtime/embedding_grad_add), within float32 rounding of ATen's widened table plus its
// embedding backward (the atomic adds sum a row's repeats in another order), into a copy or in place
// into a float32 base; and the head's weight gradient in float32 (runtime/linear_cross_entropy),
// the GEMM's accumulator, against the float64 product and the bf16 gradient it would round to.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "support/numerics.h"
#include "trainc/compile/ir/graph.h"
#include "trainc/compile/runtime/embedding_grad_add.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"
#include "trainc/compile/runtime/scaled_rows.h"

using namespace trainc;
using trainc::test::relative_error;

TEST_CASE("rows scaled by a float32 factor each match ATen's multiply bit for bit", "[inductor][cuda]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  // 768 columns take the vector kernel; 12 (not whole 16-byte groups) and float32 take ATen's.
  for (const auto& [width, dtype] : {std::pair<int64_t, at::ScalarType>{768, torch::kBFloat16}, {12, torch::kBFloat16}, {768, torch::kFloat}}) {
    INFO(width << " columns of " << c10::toString(dtype));
    const at::Tensor rows = torch::randn({300, width}, cuda).to(dtype);
    const at::Tensor scale = torch::randn({300}, cuda) * (torch::rand({300}, cuda) > 0.1);
    const at::Tensor expected = at::mul(rows, scale.unsqueeze(1)).to(dtype);
    at::Tensor out = torch::empty_like(rows);
    CHECK(scale_rows_kernel_takes(out, rows, scale) == (width == 768 && dtype == torch::kBFloat16));
    scale_rows_into(out, rows, scale);
    CHECK(torch::equal(out, expected));
    at::Tensor in_place = rows.clone();
    scale_rows_into(in_place, in_place, scale);
    CHECK(torch::equal(in_place, expected));
  }
}

TEST_CASE("embedding_grad_add adds an embedding's gradient into a widened table", "[inductor][cuda]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const int64_t vocabulary = 1000;
  // A bf16 and a float32 base take the kernels; a width of 6 (not whole 16-byte groups) ATen's.
  for (const auto& [width, dtype] : {std::pair<int64_t, at::ScalarType>{64, torch::kBFloat16}, {64, torch::kFloat}, {6, torch::kBFloat16}}) {
    INFO(width << " columns, base of " << c10::toString(dtype));
    const at::Tensor base = torch::randn({vocabulary, width}, cuda).to(dtype);
    const at::Tensor grad = torch::randn({4, 700, width}, cuda);
    const at::Tensor indices = torch::randint(0, vocabulary, {4, 700}, cuda.dtype(torch::kLong));  // repeats: 2800 rows into 1000
    CHECK(embedding_grad_add_kernels_take(base, grad, indices) == (width == 64));
    const at::Tensor got = embedding_grad_add(base, grad, indices);
    const at::Tensor expected = base.to(torch::kFloat) + at::embedding_dense_backward(grad, indices, vocabulary, -1, false);
    REQUIRE(got.scalar_type() == torch::kFloat);
    REQUIRE(got.sizes() == expected.sizes());
    CHECK(relative_error(got, expected) <= 1e-6);
  }
}

TEST_CASE("embedding_grad_add adds in place into a float32 base", "[inductor][cuda]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const int64_t vocabulary = 1000;
  // 64 columns take the kernels; 6 ATen's index_add_.
  for (const int64_t width : {64, 6}) {
    INFO(width << " columns");
    const at::Tensor base = torch::randn({vocabulary, width}, cuda);
    const at::Tensor grad = torch::randn({4, 700, width}, cuda);
    const at::Tensor indices = torch::randint(0, vocabulary, {4, 700}, cuda.dtype(torch::kLong));
    const at::Tensor expected = base + at::embedding_dense_backward(grad, indices, vocabulary, -1, false);
    // The base a view from the second row on, as the head's weight gradient is a view of its buffer.
    const at::Tensor padded = torch::randn({vocabulary + 3, width}, cuda);
    const at::Tensor table = padded.narrow(0, 1, vocabulary);
    table.copy_(base);
    const at::Tensor got = embedding_grad_add(table, grad, indices, /*in_place=*/true);
    CHECK(got.data_ptr() == table.data_ptr());
    CHECK_FALSE(got.is_view());
    CHECK(relative_error(got, expected) <= 1e-6);
  }
}

TEST_CASE("the head's float32 weight gradient is the GEMM's product before rounding", "[inductor][cuda]") {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const int64_t rows = 256, width = 64, vocabulary = 1000;
  const at::Tensor x = torch::randn({rows, width}, cuda).to(torch::kBFloat16);
  const at::Tensor weight = (torch::randn({vocabulary, width}, cuda) * 0.1).to(torch::kBFloat16);
  const at::Tensor targets = torch::randint(0, vocabulary, {rows}, cuda.dtype(torch::kLong));
  const at::Tensor grad = torch::randn({rows}, cuda);
  const at::Tensor packed = linear_cross_entropy_and_dlogits(x, weight, targets, 0.0, torch::kFloat);
  const at::Tensor in_bf16 = linear_cross_entropy_grad_from_dlogits(packed, x, weight, grad, {}, ir::HeadGradients::weight);
  const at::Tensor in_float = linear_cross_entropy_grad_from_dlogits(packed, x, weight, grad, {}, ir::HeadGradients::weight_float);
  REQUIRE(in_float.scalar_type() == torch::kFloat);
  REQUIRE(in_float.sizes() == in_bf16.sizes());
  // D^T @ (g * x), each scaled row rounded to bf16 as the op rounds it, in float64.
  ir::LinearCrossEntropyLayout layout;
  REQUIRE(ir::linear_cross_entropy_layout(rows, width, vocabulary, 2, 4, layout));
  const at::Tensor dlogits = packed.narrow(0, layout.dlogits_offset, rows * layout.padded_vocabulary).view({rows, layout.padded_vocabulary});
  const at::Tensor scaled_x = (x.to(torch::kFloat) * grad.unsqueeze(1)).to(torch::kBFloat16);
  const at::Tensor expected = at::mm(dlogits.to(torch::kDouble).t(), scaled_x.to(torch::kDouble)).view({-1});
  CHECK(relative_error(in_float, expected) <= 1e-5);
  CHECK(relative_error(in_bf16, in_float) <= 1.0 / 256);  // one bf16 rounding
  CHECK(in_float.view({layout.padded_vocabulary, width}).narrow(0, vocabulary, layout.padded_vocabulary - vocabulary).abs().max().item<float>() == 0.0f);
}
