// The one-pass cross-entropy kernels (runtime/cross_entropy_rows) against ATen on the GPU: bf16
// logits of GPT-2's vocabulary (odd, so rows are not 16-byte aligned multiples) with a padded row
// stride, as linear_cross_entropy gives them (rows start 16-byte aligned: the kernels read 8
// logits at a time), and the same one logit further on (misaligned: one at a time), some targets
// ignored (-100), with and without label
// smoothing, for large logits (a few words dominate each row) and small ones (every word's
// probability near 1/V, so that the smoothing term s/V is a tenth of each gradient). Forward: each
// row's loss within 1e-5 of ATen's float32 cross-entropy (relative to the largest); backward: each
// element of the bf16 gradient within 1% of ATen's float32 gradient rounded to bf16, plus 1e-6 of
// its row's grad (a bf16 ulp is 2^-8 = 0.4%, and sums in another order move a value across a
// rounding boundary; the absolute part covers p - (1 - s) at the target, where float32's
// rounding of p is not small next to the difference).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <tuple>
#include <vector>

#include "support/numerics.h"
#include "trainc/compile/ir/graph.h"
#include "trainc/compile/runtime/cross_entropy_rows.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"

using namespace trainc;
using trainc::test::relative_error;

TEST_CASE("one-pass cross-entropy kernels match ATen on bf16 logits", "[inductor][cuda]") {
  const int64_t rows = 300, vocabulary = 50257, stride = 50304;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const std::vector<std::tuple<int64_t, double, double>> cases = {{0, 0.0, 3.0}, {0, 0.1, 3.0}, {0, 0.1, 0.1},
                                                                   {1, 0.0, 3.0}, {1, 0.1, 3.0}, {1, 0.1, 0.1}};
  for (const auto& [offset, smoothing, scale] : cases) {
    INFO("rows starting at element " << offset << ", label smoothing " << smoothing << ", logits of scale " << scale);
    const at::Tensor storage = (torch::randn({rows, stride}, cuda) * scale).to(torch::kBFloat16);
    at::Tensor logits = storage.narrow(1, offset, vocabulary);
    at::Tensor targets = torch::randint(0, vocabulary, {rows}, cuda.dtype(torch::kLong));
    targets.index_put_({torch::tensor({3, 77}, cuda.dtype(torch::kLong))}, -100);
    const at::Tensor valid = targets != -100;
    REQUIRE(cross_entropy_rows_supported(logits, torch::kFloat));

    const at::Tensor expected_loss = at::cross_entropy_loss(logits.to(torch::kFloat), targets, {}, at::Reduction::None, -100, smoothing);
    const at::Tensor loss = cross_entropy_rows_forward(logits, targets, smoothing);
    CHECK(relative_error(loss.masked_select(valid), expected_loss.masked_select(valid)) <= 1e-5);

    const at::Tensor grad = torch::randn({rows}, cuda) * valid;
    const at::Tensor reference = logits.to(torch::kFloat).requires_grad_(true);
    (at::cross_entropy_loss(reference, targets, {}, at::Reduction::None, -100, smoothing) * grad).sum().backward();
    const at::Tensor expected_grad = reference.grad().to(torch::kBFloat16);
    const at::Tensor outside = at::cat({storage.narrow(1, 0, offset), storage.narrow(1, offset + vocabulary, stride - offset - vocabulary)}, 1);
    const at::Tensor padding_before = outside.clone();
    cross_entropy_rows_backward(logits, targets, grad, smoothing);
    const at::Tensor got = logits.to(torch::kDouble), expected = expected_grad.to(torch::kDouble);
    const at::Tensor allowed = 1e-2 * expected.abs() + 1e-6 * grad.to(torch::kDouble).abs().unsqueeze(1);
    CHECK((got - expected).abs().le(allowed).all().item<bool>());
    CHECK(relative_error(got, expected) <= 1e-2);
    // The storage around the rows is left as it was.
    CHECK(torch::equal(at::cat({storage.narrow(1, 0, offset), storage.narrow(1, offset + vocabulary, stride - offset - vocabulary)}, 1),
                       padding_before));
  }
}

TEST_CASE("one-pass cross-entropy: masked (-inf) logits count for nothing, a NaN logit gives a NaN loss", "[inductor][cuda]") {
  const int64_t rows = 4, vocabulary = 50257, stride = 50304;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  for (const int64_t offset : {0, 1}) {  // 8 logits a thread, then one at a time
    INFO("rows starting at element " << offset);
    at::Tensor storage = (torch::randn({rows, stride}, cuda) * 3).to(torch::kBFloat16);
    at::Tensor logits = storage.narrow(1, offset, vocabulary);
    logits.select(0, 0).narrow(0, 0, 5000).fill_(-INFINITY);  // whole groups of every thread, then finite logits
    logits.select(0, 1).narrow(0, 100, 3).fill_(-INFINITY);
    logits.select(0, 2).narrow(0, 8, 8).fill_(NAN);           // one aligned group of 8
    logits.select(0, 3).narrow(0, vocabulary - 1, 1).fill_(NAN);  // the last logit: past the groups of 8
    const at::Tensor targets = torch::tensor({7000, 5, 9, 11}, cuda.dtype(torch::kLong));
    const at::Tensor expected = at::cross_entropy_loss(logits.to(torch::kFloat), targets, {}, at::Reduction::None, -100, 0.0);
    const at::Tensor loss = cross_entropy_rows_forward(logits, targets, 0.0);
    CHECK(relative_error(loss.narrow(0, 0, 2), expected.narrow(0, 0, 2)) <= 1e-5);
    CHECK(loss.narrow(0, 2, 2).isnan().all().item<bool>());
    CHECK(expected.narrow(0, 2, 2).isnan().all().item<bool>());
    // The training kernel (one pass from shared memory on aligned rows) gives the same losses,
    // within 1e-6, a gradient of exactly 0 at the masked logits, and NaN throughout a NaN row.
    at::Tensor training_loss = torch::empty({rows}, cuda);
    at::Tensor gradient = storage.clone().narrow(1, offset, vocabulary);
    cross_entropy_rows_loss_and_dlogits(gradient, targets, 0.0, training_loss);
    CHECK(relative_error(training_loss.narrow(0, 0, 2), loss.narrow(0, 0, 2)) <= 1e-6);
    CHECK(training_loss.narrow(0, 2, 2).isnan().all().item<bool>());
    CHECK(gradient.select(0, 0).narrow(0, 0, 5000).eq(0).all().item<bool>());
    CHECK(gradient.select(0, 1).narrow(0, 100, 3).eq(0).all().item<bool>());
    CHECK(gradient.narrow(0, 2, 2).isnan().all().item<bool>());
  }
}

// The forward's kernel for training: the losses of cross_entropy_rows_forward and the gradient of
// cross_entropy_rows_backward for a grad of 1, from one launch, aligned rows and misaligned ones.
// Misaligned rows take the two-pass kernel, whose results are the separate kernels' exactly (the
// same threads sum the same logits in the same order). Aligned rows are copied into shared memory
// and read once (GPT-2's 100 KB rows, above the 48 KB a kernel gets unasked; rows just under 48 KB,
// which need asking too with the kernel's own static shared memory; short ones), with one
// exponential a logit kept as float16: the losses within 1e-6 of the separate kernels' (a sum in
// another order); each gradient within 1% of theirs (a bf16 step is 0.4-0.8%), plus 1e-3 of s / V
// (where the probability and s / V cancel, float16's 2^-11 of the probability is what is left) and
// 1e-11 (probabilities under 2^-28 of the row's largest, float16's subnormals, down to 0 under
// about 2^-39: logits of scale 10 have many); and with logits of scale 3 most of them equal (a
// value rounds differently only within 2^-11 of a bf16 rounding boundary: a few percent). Targets
// in the last full group of 8 and past the groups of 8 take the one-hot term there.
TEST_CASE("one-pass cross-entropy: losses and the gradient together match the separate kernels", "[inductor][cuda]") {
  const int64_t rows = 200;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  for (const auto& [vocabulary, stride] : std::vector<std::pair<int64_t, int64_t>>{{50257, 50304}, {24571, 24576}, {1003, 1024}}) {
    for (const int64_t offset : {0, 1}) {
      for (const auto& [smoothing, scale] : std::vector<std::pair<double, double>>{{0.0, 3.0}, {0.1, 3.0}, {0.0, 10.0}, {0.1, 10.0}}) {
        INFO("vocabulary " << vocabulary << ", rows starting at element " << offset << ", label smoothing " << smoothing << ", logits of scale " << scale);
        const at::Tensor storage = (torch::randn({rows, stride}, cuda) * scale).to(torch::kBFloat16);
        at::Tensor targets = torch::randint(0, vocabulary, {rows}, cuda.dtype(torch::kLong));
        targets.index_put_({torch::tensor({5}, cuda.dtype(torch::kLong))}, -100);
        targets.index_put_({torch::tensor({0}, cuda.dtype(torch::kLong))}, vocabulary - 1);
        targets.index_put_({torch::tensor({1}, cuda.dtype(torch::kLong))}, vocabulary / 8 * 8 - 1);
        at::Tensor separate = storage.clone().narrow(1, offset, vocabulary);
        const at::Tensor expected_loss = cross_entropy_rows_forward(separate, targets, smoothing);
        cross_entropy_rows_backward(separate, targets, torch::ones({rows}, cuda), smoothing);
        at::Tensor together = storage.clone().narrow(1, offset, vocabulary);
        CHECK(cross_entropy_rows_one_pass(together) == (offset == 0));  // on an H200: two rows of 50,257 fit in an SM
        at::Tensor loss = torch::empty({rows}, cuda);
        cross_entropy_rows_loss_and_dlogits(together, targets, smoothing, loss);
        if (offset != 0) {
          CHECK(torch::equal(loss, expected_loss));
          CHECK(torch::equal(together, separate));
          continue;
        }
        CHECK(relative_error(loss, expected_loss) <= 1e-6);
        const at::Tensor got = together.to(torch::kDouble), expected = separate.to(torch::kDouble);
        CHECK((got - expected).abs().le(1e-2 * expected.abs() + 1e-3 * smoothing / vocabulary + 1e-11).all().item<bool>());
        if (scale > 3.0) continue;
        const double equal_share = together.eq(separate).to(torch::kDouble).mean().item<double>();
        INFO("gradients equal to the separate kernels': " << equal_share);
        CHECK(equal_share >= 0.9);
      }
    }
  }
}

// GPT-2's head, scaled down in rows and width: the dlogits variant (the gradient made in the
// forward, two GEMMs in the backward) against the recomputing one, within bf16's rounding (2e-2
// relative to the largest element: the gradient is rounded to bf16 before its GEMM, not after).
TEST_CASE("linear_cross_entropy_and_dlogits on the GPU gives the recomputing head's losses and gradients", "[inductor][cuda]") {
  const int64_t rows = 256, width = 64, vocabulary = 50257;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor x = torch::randn({rows, width}, cuda).to(torch::kBFloat16);
  const at::Tensor w = (torch::randn({vocabulary, width}, cuda) * 0.3).to(torch::kBFloat16);
  at::Tensor targets = torch::randint(0, vocabulary, {rows}, cuda.dtype(torch::kLong));
  targets.index_put_({torch::tensor({3, 100}, cuda.dtype(torch::kLong))}, -100);
  const at::Tensor grad = torch::randn({rows}, cuda) * (targets != -100);
  const at::Tensor packed = linear_cross_entropy_and_dlogits(x, w, targets, 0.1, torch::kFloat);
  ir::LinearCrossEntropyLayout layout;
  REQUIRE(ir::linear_cross_entropy_layout(rows, width, vocabulary, 2, 4, layout));
  const at::Tensor valid = targets != -100;
  const at::Tensor losses = packed.narrow(0, 0, layout.loss_elements).view(torch::kFloat);
  CHECK(relative_error(losses.masked_select(valid), linear_cross_entropy(x, w, targets, 0.1, torch::kFloat).masked_select(valid)) <= 1e-5);
  const at::Tensor got = linear_cross_entropy_grad_from_dlogits(packed, x, w, grad);
  const at::Tensor expected = linear_cross_entropy_grad(x, w, targets, grad, 0.1);
  CHECK(relative_error(got.narrow(0, 0, rows * width), expected.narrow(0, 0, rows * width)) <= 2e-2);
  CHECK(relative_error(got.narrow(0, rows * width, vocabulary * width), expected.narrow(0, rows * width, vocabulary * width)) <= 2e-2);
}
