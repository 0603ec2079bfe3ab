// The kernels a tied language-model head's backward runs besides its GEMMs, against ATen on the
// GPU with fresh random inputs: each row scaled by its loss gradient (runtime/scaled_rows), equal
// to ATen's float32 multiply rounded to bf16; and the embedding's gradient added into the head's
// (runtime/embedding_grad_add), within float32 rounding of ATen's widened table plus its
// embedding backward (the atomic adds sum a row's repeats in another order).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "support/numerics.h"
#include "trainc/compile/runtime/embedding_grad_add.h"
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
