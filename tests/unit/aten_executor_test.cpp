// The ATen executor against ATen called directly, one row per op (coverage checked), on fresh
// random inputs, float64, exact: the executor must call the right ATen function with the right
// arguments (a >= where > was meant would fail here).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <functional>
#include <map>
#include <set>

#include "support/numerics.h"
#include "trainc/compat/library_variants.h"
#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/autotune/library_choice.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/linear_cross_entropy.h"

using namespace trainc::ir;

namespace {

struct ExecCase {
  Op op;
  std::vector<at::Tensor> inputs;
  Attributes attrs;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> expected;
};

Attributes with_ints(std::vector<int64_t> ints) {
  Attributes attrs;
  attrs.ints = std::move(ints);
  return attrs;
}

// Causal attention by the textbook formula, head size 3.
at::Tensor causal_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(3.0);
  scores = scores.masked_fill(torch::ones({q.size(2), k.size(2)}, torch::kBool).triu(1), -INFINITY);
  return torch::matmul(torch::softmax(scores, -1), v);
}

// dq, dk, dv of that attention for the output's gradient `grad`, stacked [3, B, H, T, D].
at::Tensor causal_attention_grads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& grad) {
  std::vector<torch::Tensor> qkv = {q.clone().requires_grad_(true), k.clone().requires_grad_(true), v.clone().requires_grad_(true)};
  causal_attention_reference(qkv[0], qkv[1], qkv[2]).backward(grad);
  return torch::stack({qkv[0].grad(), qkv[1].grad(), qkv[2].grad()});
}

// linear_cross_entropy_and_dlogits's buffer from ATen's losses and softmax (float64 x and losses:
// the losses are the first `rows` elements).
at::Tensor packed_head(const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets, double smoothing) {
  const int64_t rows = x.size(0), vocabulary = w.size(0);
  LinearCrossEntropyLayout layout;
  REQUIRE(linear_cross_entropy_layout(rows, x.size(1), vocabulary, 8, 8, layout));
  const at::Tensor logits = at::mm(x, w.t());
  at::Tensor packed = torch::zeros({layout.total}, x.options());
  packed.narrow(0, 0, rows).copy_(at::cross_entropy_loss(logits, targets, {}, at::Reduction::None, -100, smoothing));
  const at::Tensor dlogits = at::softmax(logits, 1) - smoothing / static_cast<double>(vocabulary) -
                             (1.0 - smoothing) * at::one_hot(targets, vocabulary).to(x.scalar_type());
  packed.narrow(0, layout.dlogits_offset, rows * layout.padded_vocabulary).view({rows, layout.padded_vocabulary}).narrow(1, 0, vocabulary).copy_(dlogits);
  packed.narrow(0, layout.weight_offset, vocabulary * x.size(1)).copy_(w.flatten());  // then zero rows to the padded vocabulary
  return packed;
}

std::vector<ExecCase> cases() {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const auto r = [&](std::vector<int64_t> shape) { return torch::randn(shape, f64); };
  // max_pool2d reads its maxima at the positions max_pool2d_indices found (given here by ATen).
  const at::Tensor pool_input = r({1, 2, 4, 4});
  const at::Tensor pool_indices = std::get<1>(at::max_pool2d_with_indices(pool_input, {2, 2}, {2, 2}, {0, 0}));
  // Overlapping, padded windows (kernel 3, stride 2, padding 1): the positions stay in the unpadded plane.
  const at::Tensor padded_input = r({2, 3, 5, 5});
  const at::Tensor padded_indices = std::get<1>(at::max_pool2d_with_indices(padded_input, {3, 3}, {2, 2}, {1, 1}));
  const auto positive = [&](std::vector<int64_t> shape) { return torch::rand(shape, f64) + 0.1; };
  const at::Tensor head_x = r({6, 5}), head_w = r({7, 5}), head_targets = torch::randint(0, 7, {6});
  Attributes smoothed;  // linear_cross_entropy: loss in float64, label smoothing 0.1
  smoothed.dtype = DType::f64;
  smoothed.scalar = 0.1;
  Attributes constant = with_ints({2, 3});
  constant.scalar = 1.5;
  constant.dtype = DType::f64;
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  Attributes keepdim = with_ints({1});
  keepdim.keepdim = true;
  Attributes causal;
  causal.causal = true;
  const at::Tensor tied = r({4});
  Attributes iota = with_ints({5});
  iota.dtype = DType::i64;
  Attributes certain = with_ints({3, 2});
  certain.scalar = 1.0;
  certain.dtype = DType::f64;
  std::vector<ExecCase> rows = {
      {Op::constant, {}, constant, [](auto&) { return torch::full({2, 3}, 1.5, torch::kDouble); }},
      {Op::neg, {r({5})}, {}, [](auto& x) { return -x[0]; }},
      {Op::exp, {r({5})}, {}, [](auto& x) { return x[0].exp(); }},
      {Op::log, {positive({5})}, {}, [](auto& x) { return x[0].log(); }},
      {Op::tanh, {r({5})}, {}, [](auto& x) { return x[0].tanh(); }},
      {Op::erf, {r({5})}, {}, [](auto& x) { return x[0].erf(); }},
      {Op::sqrt, {positive({5})}, {}, [](auto& x) { return x[0].sqrt(); }},
      {Op::rsqrt, {positive({5})}, {}, [](auto& x) { return 1.0 / x[0].sqrt(); }},
      {Op::reciprocal, {positive({5})}, {}, [](auto& x) { return 1.0 / x[0]; }},
      {Op::relu, {r({5})}, {}, [](auto& x) { return x[0].clamp_min(0); }},
      {Op::sigmoid, {r({5})}, {}, [](auto& x) { return 1.0 / (1.0 + (-x[0]).exp()); }},
      {Op::cast, {r({5})}, to_f32, [](auto& x) { return x[0].to(torch::kFloat); }},
      {Op::add, {r({3, 1}), r({4})}, {}, [](auto& x) { return x[0] + x[1]; }},
      {Op::sub, {r({3, 4}), r({4})}, {}, [](auto& x) { return x[0] - x[1]; }},
      {Op::mul, {r({3, 4}), r({3, 4})}, {}, [](auto& x) { return x[0] * x[1]; }},
      {Op::div, {r({3, 4}), positive({4})}, {}, [](auto& x) { return x[0] / x[1]; }},
      {Op::pow, {positive({3}), r({3})}, {}, [](auto& x) { return (x[1] * x[0].log()).exp(); }},
      {Op::maximum, {r({6}), r({6})}, {}, [](auto& x) { return torch::where(x[0] > x[1], x[0], x[1]); }},
      {Op::gt, {tied, torch::cat({tied.slice(0, 0, 2), r({2})})}, {}, [](auto& x) { return (x[0] - x[1]) > 0; }},
      {Op::eq, {tied, torch::cat({tied.slice(0, 0, 2), r({2})})}, {}, [](auto& x) { return (x[0] - x[1]).abs() == 0; }},
      {Op::where, {r({4}) > 0, r({4}), r({4})}, {}, [](auto& x) { return x[0] * x[1] + x[0].logical_not() * x[2]; }},
      {Op::sum, {r({3, 4, 5})}, with_ints({0, 2}), [](auto& x) { return x[0].sum(2).sum(0); }},
      {Op::amax, {r({3, 4})}, keepdim, [](auto& x) { return std::get<0>(x[0].max(1, true)); }},
      {Op::reshape, {r({2, 6})}, with_ints({3, 4}), [](auto& x) { return x[0].view({3, 4}); }},
      {Op::permute, {r({2, 3, 4})}, with_ints({2, 0, 1}), [](auto& x) { return x[0].transpose(0, 2).transpose(1, 2); }},
      {Op::expand, {r({3, 1})}, with_ints({2, 3, 4}), [](auto& x) { return x[0].unsqueeze(0).repeat({2, 1, 4}); }},
      {Op::slice, {r({4, 10})}, with_ints({1, 2, 9, 3}), [](auto& x) {
         return torch::stack({x[0].select(1, 2), x[0].select(1, 5), x[0].select(1, 8)}, 1);
       }},
      {Op::matmul, {r({2, 3}), r({3, 4})}, {}, [](auto& x) { return (x[0].unsqueeze(2) * x[1].unsqueeze(0)).sum(1); }},
      {Op::matmul_bias, {r({2, 2, 3}), r({3, 4}), r({4})}, {}, [](auto& x) { return (x[0].unsqueeze(3) * x[1]).sum(2) + x[2]; }},
      // [GELU(y), y] for y = x w + b in bf16, GELU's tanh approximation computed in float32 from the
      // rounded y, as the import decomposes it (the CPU has no epilogue: ATen's product).
      {Op::matmul_bias_gelu, {r({2, 2, 3}).to(torch::kBFloat16), r({3, 4}).to(torch::kBFloat16), r({4}).to(torch::kBFloat16)}, {}, [](auto& x) {
         const auto y = at::addmm(x[2], x[0].reshape({4, 3}), x[1]).view({2, 2, 4});
         const auto f = y.to(torch::kFloat);
         const auto h = ((f * 0.5) * (at::tanh((f + f * f * f * 0.044715) * std::sqrt(2.0 / M_PI)) + 1.0)).to(torch::kBFloat16);
         return torch::stack({h, y});
       }},
      // gelu'(y) * a w: the product rounded to bf16, the derivative of GELU's tanh approximation in
      // float32 (against autograd's GELU below).
      {Op::matmul_gelu_grad, {r({2, 2, 3}).to(torch::kBFloat16), r({3, 4}).to(torch::kBFloat16), r({2, 2, 4}).to(torch::kBFloat16)}, {}, [](auto& x) {
         const auto g = at::mm(x[0].reshape({4, 3}), x[1]).to(torch::kFloat);
         const auto y = x[2].reshape({4, 4}).to(torch::kFloat);
         const double c = std::sqrt(2.0 / M_PI);
         const auto t = at::tanh((y + y * y * y * 0.044715) * c);
         return (g * ((t + 1.0) * 0.5 + (y * 0.5) * (1.0 - t * t) * (c * (1.0 + y * y * (3 * 0.044715))))).to(torch::kBFloat16).view({2, 2, 4});
       }},
      {Op::sum_to_float, {r({6, 3, 4}).to(torch::kBFloat16)}, with_ints({0, 1}), [](auto& x) {
         return x[0].to(torch::kFloat).sum(at::IntArrayRef{0, 1});
       }},
      // Small integers, so every rounding is exact; the GPU's one GEMM writing float32 is tested
      // against float64 on rounding inputs in tests/cuda.
      {Op::matmul_to_float, {torch::randint(-8, 9, {4, 3}).to(torch::kBFloat16), torch::randint(-8, 9, {3, 5}).to(torch::kBFloat16)}, {},
       [](auto& x) { return (x[0].to(torch::kDouble).unsqueeze(2) * x[1].to(torch::kDouble).unsqueeze(0)).sum(1); }},
      {Op::embedding, {r({10, 3}), torch::tensor({{1, 7}, {0, 9}}, torch::kLong)}, {}, [](auto& x) {
         return x[0].index_select(0, x[1].view(-1)).view({2, 2, 3});
       }},
      {Op::attention, {r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 5})}, causal, [](auto& x) {
         auto scores = torch::matmul(x[0], x[1].transpose(-2, -1)) / std::sqrt(3.0);
         scores = scores.masked_fill(torch::ones({4, 4}, torch::kBool).triu(1), -INFINITY);
         return torch::matmul(torch::softmax(scores, -1), x[2]);
       }},
      {Op::attention_grad, {r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3})}, causal, [](auto& x) {
         std::vector<torch::Tensor> qkv = {x[0].clone().requires_grad_(true), x[1].clone().requires_grad_(true),
                                           x[2].clone().requires_grad_(true)};
         auto scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(3.0);
         scores = scores.masked_fill(torch::ones({4, 4}, torch::kBool).triu(1), -INFINITY);
         torch::matmul(torch::softmax(scores, -1), qkv[2]).backward(x[3]);
         return torch::stack({qkv[0].grad(), qkv[1].grad(), qkv[2].grad()});
       }},
      {Op::conv2d, {r({1, 2, 5, 5}), r({3, 2, 3, 3})}, with_ints({1, 1}), [](auto& x) {
         return torch::nn::functional::conv2d(x[0], x[1], torch::nn::functional::Conv2dFuncOptions().padding(1));
       }},
      {Op::iota, {}, iota, [](auto&) { return torch::tensor({0, 1, 2, 3, 4}, torch::kLong); }},
      {Op::bernoulli, {}, certain, [](auto&) { return torch::ones({3, 2}, torch::kDouble); }},
      {Op::detach, {r({4})}, {}, [](auto& x) { return x[0]; }},
      {Op::concat, {r({2, 1}), r({2, 3})}, with_ints({1}), [](auto& x) {
         return torch::stack({x[0].select(1, 0), x[1].select(1, 0), x[1].select(1, 1), x[1].select(1, 2)}, 1);
       }},
      {Op::slice_backward, {r({2, 2})}, with_ints({1, 1, 4, 2, 2, 5}), [](auto& x) {
         auto full = torch::zeros({2, 5}, torch::kDouble);
         full.select(1, 1).copy_(x[0].select(1, 0));
         full.select(1, 3).copy_(x[0].select(1, 1));
         return full;
       }},
      {Op::embedding_grad, {r({2, 3}), torch::tensor({4, 4}, torch::kLong)}, with_ints({6}), [](auto& x) {
         auto full = torch::zeros({6, 3}, torch::kDouble);
         full.select(0, 4).copy_(x[0].sum(0));
         return full;
       }},
      // Index 4 twice and 1 once, added into the base widened to the gradient's dtype.
      {Op::embedding_grad_add, {r({6, 3}).to(torch::kFloat), r({3, 3}), torch::tensor({4, 1, 4}, torch::kLong)}, with_ints({6}), [](auto& x) {
         auto sum = x[0].to(torch::kDouble);
         sum.select(0, 4).add_(x[1].select(0, 0) + x[1].select(0, 2));
         sum.select(0, 1).add_(x[1].select(0, 1));
         return sum;
       }},
      {Op::conv2d_input_grad, {r({1, 3, 5, 5}), r({1, 2, 5, 5}), r({3, 2, 3, 3})}, with_ints({1, 1}), [](auto& x) {
         auto input = x[1].clone().requires_grad_(true);
         torch::nn::functional::conv2d(input, x[2], torch::nn::functional::Conv2dFuncOptions().padding(1)).backward(x[0]);
         return input.grad();
       }},
      {Op::conv2d_weight_grad, {r({1, 3, 5, 5}), r({1, 2, 5, 5}), r({3, 2, 3, 3})}, with_ints({1, 1}), [](auto& x) {
         auto weight = x[2].clone().requires_grad_(true);
         torch::nn::functional::conv2d(x[1], weight, torch::nn::functional::Conv2dFuncOptions().padding(1)).backward(x[0]);
         return weight.grad();
       }},
      {Op::max_pool2d_indices, {r({1, 2, 4, 4})}, with_ints({2, 2, 0}), [](auto& x) {
         // Each 2x2 window's argmax (kh * 2 + kw) as a position in the 4x4 plane.
         const auto window = x[0].view({1, 2, 2, 2, 2, 2}).permute({0, 1, 2, 4, 3, 5}).reshape({1, 2, 2, 2, 4}).argmax(-1);
         const auto row = torch::arange(2).view({1, 1, 2, 1}) * 2 + window.div(2, "floor");
         const auto col = torch::arange(2).view({1, 1, 1, 2}) * 2 + window.remainder(2);
         return row * 4 + col;
       }},
      {Op::max_pool2d, {pool_input, pool_indices}, with_ints({2, 2, 0}), [](auto& x) {
         return x[0].view({1, 2, 2, 2, 2, 2}).amax({3, 5});
       }},
      {Op::max_pool2d, {padded_input, padded_indices}, with_ints({3, 2, 1}), [](auto& x) {
         return at::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1});
       }},
      {Op::max_pool2d_grad, {r({1, 2, 2, 2}), pool_input, pool_indices}, with_ints({2, 2, 0}), [](auto& x) {
         auto input = x[1].clone().requires_grad_(true);
         input.view({1, 2, 2, 2, 2, 2}).amax({3, 5}).backward(x[0]);
         return input.grad();
       }},
      {Op::avg_pool2d, {r({1, 2, 4, 4})}, with_ints({2, 2, 0, 1}), [](auto& x) {
         return x[0].view({1, 2, 2, 2, 2, 2}).mean({3, 5});
       }},
      {Op::avg_pool2d_grad, {r({1, 2, 2, 2}), r({1, 2, 4, 4})}, with_ints({2, 2, 0, 1}), [](auto& x) {
         auto input = x[1].clone().requires_grad_(true);
         input.view({1, 2, 2, 2, 2, 2}).mean({3, 5}).backward(x[0]);
         return input.grad();
       }},
      {Op::linear_cross_entropy, {head_x, head_w, head_targets}, smoothed, [](auto& x) {
         return at::cross_entropy_loss(at::mm(x[0], x[1].t()), x[2], {}, at::Reduction::None, -100, 0.1);
       }},
      {Op::linear_cross_entropy_grad, {head_x, head_w, head_targets, r({6})}, smoothed, [](auto& x) {
         auto input = x[0].clone().requires_grad_(true);
         auto weight = x[1].clone().requires_grad_(true);
         (at::cross_entropy_loss(at::mm(input, weight.t()), x[2], {}, at::Reduction::None, -100, 0.1) * x[3]).sum().backward();
         return at::cat({input.grad().flatten(), weight.grad().flatten()});
       }},
      // On the CPU no kernel keeps a log-sum-exp: the output (attention_lse then reads NaNs, below).
      {Op::attention_and_lse, {r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 5})}, causal,
       [](auto& x) { return causal_attention_reference(x[0], x[1], x[2]); }},
      // Without a kernel to call directly, the backward runs the forward again: the output and its
      // log-sum-exp given are not read.
      {Op::attention_grad_from_lse,
       {r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3}), torch::zeros({1, 2, 4}), r({1, 2, 4, 3})}, causal,
       [](auto& x) { return causal_attention_grads(x[0], x[1], x[2], x[5]); }},
      // The gradients stacked as [B, T, 3, H, D] (72 elements, 576 bytes: the sums start at once),
      // then their 18 column sums in float32 as 9 float64 elements.
      {Op::attention_grad_and_bias_sums,
       {r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3}), r({1, 2, 4, 3}), torch::zeros({1, 2, 4}), r({1, 2, 4, 3})}, causal,
       [](auto& x) {
         const at::Tensor stacked = causal_attention_grads(x[0], x[1], x[2], x[5]).permute({1, 3, 0, 2, 4}).contiguous();
         const at::Tensor sums = at::sum(stacked.view({4, 18}), {0}, false, at::kFloat);
         return torch::cat({stacked.flatten(), sums.view(torch::kDouble)});
       }},
      // The bytes of 1.0 and -2.0 as float64 read as float32 (little-endian: the low word first).
      {Op::bitcast, {torch::tensor({1.0, -2.0}, f64)}, to_f32, [](auto&) { return torch::tensor({0.0f, 1.875f, 0.0f, -2.0f}); }},
      {Op::linear_cross_entropy_and_dlogits, {head_x, head_w, head_targets}, smoothed, [](auto& x) { return packed_head(x[0], x[1], x[2], 0.1); }},
      {Op::linear_cross_entropy_grad_from_dlogits, {packed_head(head_x, head_w, head_targets, 0.1), head_x, head_w, r({6})}, smoothed,
       [head_targets](auto& x) {
         auto input = x[1].clone().requires_grad_(true);
         auto weight = x[2].clone().requires_grad_(true);
         (at::cross_entropy_loss(at::mm(input, weight.t()), head_targets, {}, at::Reduction::None, -100, 0.1) * x[3]).sum().backward();
         // The weight's gradient padded to 64 rows with zeros.
         return at::cat({input.grad().flatten(), weight.grad().flatten(), torch::zeros({(64 - 7) * 5}, torch::kDouble)});
       }},
  };
  return rows;
}

}  // namespace

TEST_CASE("every IR op executes as the ATen expression it stands for", "[unit][ir][aten]") {
  // attention_lse reads what an attention_and_lse kept: its own test below.
  std::set<Op> covered = {Op::input, Op::attention_lse};
  for (const ExecCase& c : cases()) {
    INFO(op_name(c.op));
    covered.insert(c.op);
    Graph graph;
    std::vector<ValueId> inputs;
    for (const at::Tensor& t : c.inputs) {
      inputs.push_back(graph.add_input("in", {to_dtype(t.scalar_type()), t.sizes().vec()}));
    }
    const ValueId out = graph.add(c.op, inputs, c.attrs);
    graph.mark_output(out);
    const at::Tensor got = execute_with_aten(graph, c.inputs)[0];
    const at::Tensor expected = c.expected(c.inputs);
    CHECK(got.sizes().vec() == graph.type(out).shape);
    CHECK(got.scalar_type() == to_scalar_type(graph.type(out).dtype));
    CHECK(torch::allclose(got.to(torch::kDouble), expected.to(torch::kDouble), 1e-10, 1e-12, /*equal_nan=*/true));
  }
  CHECK(static_cast<int>(covered.size()) == kOpCount);
}

// The derivative matmul_gelu_grad multiplies by is the tanh GELU's: against autograd's GELU in
// float64 on the same rounded operands, within bf16's rounding of the result (2^-8 relative) and
// float32's of the derivative (where the tanh has flattened to -1 in float32, the derivative is 0,
// not the 1e-6 it is).
TEST_CASE("matmul_gelu_grad is the tanh GELU's backward under a product", "[unit][ir][aten]") {
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  const at::Tensor a = torch::randn({3, 5, 16}, bf16), w = torch::randn({16, 24}, bf16), y = (torch::randn({3, 5, 24}) * 3).to(torch::kBFloat16);
  Graph graph;
  const ValueId out = graph.add(Op::matmul_gelu_grad, {graph.add_input("a", {DType::bf16, {3, 5, 16}}), graph.add_input("w", {DType::bf16, {16, 24}}),
                                                      graph.add_input("y", {DType::bf16, {3, 5, 24}})});
  graph.mark_output(out);
  const at::Tensor got = execute_with_aten(graph, {a, w, y})[0].to(torch::kDouble).view({15, 24});

  const at::Tensor product = at::mm(a.reshape({15, 16}), w).to(torch::kDouble);  // rounded to bf16 first, as the op's
  const at::Tensor preactivation = y.reshape({15, 24}).to(torch::kDouble).requires_grad_(true);
  const at::Tensor expected = torch::autograd::grad({at::gelu(preactivation, "tanh")}, {preactivation}, {product})[0];
  CHECK(torch::allclose(got, expected, 8e-3, 1e-4));
}

TEST_CASE("linear_cross_entropy in chunks of rows equals it in one", "[unit][ir][aten]") {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const at::Tensor x = torch::randn({10, 4}, f64), w = torch::randn({9, 4}, f64), targets = torch::randint(0, 9, {10});
  const at::Tensor grad = torch::randn({10}, f64);
  const int64_t whole = int64_t{1} << 20, three_rows = 27;  // a chunk of 3 rows of 9 logits: 4 chunks, the last of 1 row
  CHECK(torch::allclose(trainc::linear_cross_entropy(x, w, targets, 0.1, torch::kDouble, three_rows),
                        trainc::linear_cross_entropy(x, w, targets, 0.1, torch::kDouble, whole), 1e-12, 1e-12));
  CHECK(torch::allclose(trainc::linear_cross_entropy_grad(x, w, targets, grad, 0.1, three_rows),
                        trainc::linear_cross_entropy_grad(x, w, targets, grad, 0.1, whole), 1e-12, 1e-12));
}

// The dlogits variant against the recomputing one, on the CPU: float32 (tolerance 1e-5 relative
// to the largest element, for sums in another order) and bf16 x (2e-2: the gradient rounded to
// bf16 before the GEMM instead of after, and the product rounded twice), over a vocabulary of 70
// (padded to 128; the buffer keeps the padded weight) and of 128 (no padding, no weight kept), in one
// chunk and in chunks of 3 rows, some targets ignored with a grad of 0.
TEST_CASE("linear_cross_entropy_and_dlogits gives linear_cross_entropy's losses and gradients", "[unit][ir][aten]") {
  const int64_t rows = 10, width = 6;
  const std::vector<std::pair<at::ScalarType, double>> dtypes = {{torch::kFloat, 1e-5}, {torch::kBFloat16, 2e-2}};
  for (const int64_t vocabulary : {int64_t{70}, int64_t{128}}) {
    for (const auto& [dtype, tolerance] : dtypes) {
      for (const double smoothing : {0.0, 0.1}) {
        for (const int64_t chunk : {int64_t{1} << 20, 3 * vocabulary}) {
          INFO(c10::toString(dtype) << ", vocabulary " << vocabulary << ", label smoothing " << smoothing << ", chunks of " << chunk << " logits");
          const auto options = torch::TensorOptions().dtype(dtype);
          const at::Tensor x = torch::randn({rows, width}).to(dtype), w = torch::randn({vocabulary, width}).to(dtype);
          at::Tensor targets = torch::randint(0, vocabulary, {rows});
          targets.index_put_({torch::tensor({2, 7})}, -100);
          const at::Tensor grad = torch::randn({rows}) * (targets != -100);

          const at::Tensor packed = trainc::linear_cross_entropy_and_dlogits(x, w, targets, smoothing, torch::kFloat, chunk);
          LinearCrossEntropyLayout layout;
          REQUIRE(linear_cross_entropy_layout(rows, x.size(1), vocabulary, x.element_size(), 4, layout));
          REQUIRE(packed.numel() == layout.total);
          REQUIRE(packed.scalar_type() == dtype);
          const at::Tensor losses = packed.narrow(0, 0, layout.loss_elements).view(torch::kFloat);
          const at::Tensor expected_losses = trainc::linear_cross_entropy(x, w, targets, smoothing, torch::kFloat, chunk);
          const at::Tensor valid = targets != -100;
          CHECK(trainc::test::relative_error(losses.masked_select(valid), expected_losses.masked_select(valid)) <= 1e-6);
          const at::Tensor padding = packed.narrow(0, layout.dlogits_offset, rows * layout.padded_vocabulary)
                                         .view({rows, layout.padded_vocabulary})
                                         .narrow(1, vocabulary, layout.padded_vocabulary - vocabulary);
          CHECK(torch::equal(padding, torch::zeros_like(padding)));
          // The weight padded with zero rows, for the backward, or nothing when there is no padding.
          CHECK(layout.keeps_weight() == (vocabulary != layout.padded_vocabulary));
          if (layout.keeps_weight()) {
            const at::Tensor kept = packed.narrow(0, layout.weight_offset, layout.padded_vocabulary * width).view({layout.padded_vocabulary, width});
            CHECK(torch::equal(kept.narrow(0, 0, vocabulary), w));
            const at::Tensor appended = kept.narrow(0, vocabulary, layout.padded_vocabulary - vocabulary);
            CHECK(torch::equal(appended, torch::zeros_like(appended)));
          }

          const at::Tensor got = trainc::linear_cross_entropy_grad_from_dlogits(packed, x, w, grad);
          const at::Tensor expected = trainc::linear_cross_entropy_grad(x, w, targets, grad, smoothing, chunk);
          REQUIRE(got.numel() == rows * width + layout.padded_vocabulary * width);
          CHECK(got.scalar_type() == dtype);
          const at::Tensor padding_rows = got.narrow(0, rows * width + vocabulary * width, (layout.padded_vocabulary - vocabulary) * width);
          CHECK(torch::equal(padding_rows, torch::zeros_like(padding_rows)));
          CHECK(trainc::test::relative_error(got.narrow(0, 0, rows * width), expected.narrow(0, 0, rows * width)) <= tolerance);
          CHECK(trainc::test::relative_error(got.narrow(0, rows * width, vocabulary * width), expected.narrow(0, rows * width, vocabulary * width)) <=
                tolerance);
        }
      }
    }
  }
}

namespace {

// x [6, 10] normalized over its rows as the import builds a layer norm, adding `eps` to the
// variance (on the left of the add when eps_first): the mean and x-hat.
struct NormalizedRows {
  ValueId mean, xhat;
};

NormalizedRows normalize_rows(Graph& g, ValueId x, ValueId eps, bool eps_first) {
  Attributes rows, ten;
  rows.ints = {1};
  rows.keepdim = true;
  ten.scalar = 10;
  ten.dtype = DType::f64;
  const ValueId count = g.add(Op::constant, {}, ten);
  const ValueId mean = g.add(Op::div, {g.add(Op::sum, {x}, rows), count});
  const ValueId centered = g.add(Op::sub, {x, mean});
  const ValueId variance = g.add(Op::div, {g.add(Op::sum, {g.add(Op::mul, {centered, centered})}, rows), count});
  const ValueId shifted = eps_first ? g.add(Op::add, {eps, variance}) : g.add(Op::add, {variance, eps});
  return {mean, g.add(Op::mul, {centered, g.add(Op::rsqrt, {shifted})})};
}

}  // namespace

// A layer norm as the import builds it, differentiated: x's gradient is the closed form (two sums
// over the rows, none through the mean or the variance), equal to ATen's layer_norm backward in
// float64; an x whose mean is read elsewhere too keeps the op-by-op rule.
TEST_CASE("a normalization's input gradient is its closed form, equal to ATen's", "[unit][ir][aten][autodiff]") {
  const auto build = [](bool mean_read_elsewhere) {
    Graph forward;
    const ValueId x = forward.add_input("x", {DType::f64, {6, 10}});
    const ValueId w = forward.add_input("w", {DType::f64, {10}});
    const ValueId probe = forward.add_input("probe", {DType::f64, {6, 10}});
    Attributes all, eps;
    all.ints = {0, 1};
    eps.scalar = 1e-5;
    eps.dtype = DType::f64;
    const NormalizedRows normalized = normalize_rows(forward, x, forward.add(Op::constant, {}, eps), /*eps_first=*/false);
    ValueId loss = forward.add(Op::sum, {forward.add(Op::mul, {forward.add(Op::mul, {normalized.xhat, w}), probe})}, all);
    if (mean_read_elsewhere) loss = forward.add(Op::add, {loss, forward.add(Op::sum, {normalized.mean}, all)});
    forward.mark_output(loss);
    return trainc::differentiate(forward, {true, true, false});
  };
  const at::Tensor x = torch::randn({6, 10}, torch::kDouble), w = torch::randn({10}, torch::kDouble), probe = torch::randn({6, 10}, torch::kDouble);
  const std::vector<at::Tensor> inputs = {x, w, probe, torch::full({}, 1.0, torch::kDouble)};
  for (const bool mean_read_elsewhere : {false, true}) {
    INFO("mean read elsewhere: " << mean_read_elsewhere);
    const trainc::JointGraph joint = build(mean_read_elsewhere);
    // The op-by-op rule differentiates rsqrt (its -0.5) and reaches x through the variance's and
    // the mean's gradients; the closed form does neither.
    bool through_rsqrt = false;
    for (const Node& node : joint.graph.nodes()) through_rsqrt = through_rsqrt || (node.op == Op::constant && node.attrs.scalar == -0.5);
    CHECK(through_rsqrt == mean_read_elsewhere);
    const std::vector<at::Tensor> got = execute_with_aten(joint.graph, inputs);
    at::Tensor xg = x.clone().requires_grad_(true), wg = w.clone().requires_grad_(true);
    at::Tensor loss = (at::layer_norm(xg, {10}, wg, {}, 1e-5) * probe).sum();
    if (mean_read_elsewhere) loss = loss + xg.mean(1, true).sum();
    loss.backward();
    CHECK(torch::allclose(got[1], xg.grad(), 1e-10, 1e-12));
    CHECK(torch::allclose(got[2], wg.grad(), 1e-10, 1e-12));
  }
}

// An eps that is not a constant (here learned: exp(log_eps)) is not the closed form's: the rules
// give x and log_eps their gradients.
TEST_CASE("a normalization with a learned eps keeps the op-by-op gradient", "[unit][ir][aten][autodiff]") {
  Graph forward;
  const ValueId x = forward.add_input("x", {DType::f64, {6, 10}});
  const ValueId log_eps = forward.add_input("log_eps", {DType::f64, {}});
  const ValueId probe = forward.add_input("probe", {DType::f64, {6, 10}});
  Attributes all;
  all.ints = {0, 1};
  // eps first: the side a constant eps may take too.
  const NormalizedRows normalized = normalize_rows(forward, x, forward.add(Op::exp, {log_eps}), /*eps_first=*/true);
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::mul, {normalized.xhat, probe})}, all));
  const trainc::JointGraph joint = trainc::differentiate(forward, {true, true, false});
  REQUIRE(joint.gradient_inputs == std::vector<int>{0, 1});
  const at::Tensor xv = torch::randn({6, 10}, torch::kDouble), probe_v = torch::randn({6, 10}, torch::kDouble);
  const std::vector<at::Tensor> got = execute_with_aten(joint.graph, {xv, torch::full({}, -2.0, torch::kDouble), probe_v, torch::full({}, 1.0, torch::kDouble)});
  at::Tensor xg = xv.clone().requires_grad_(true), eps_g = torch::full({}, -2.0, torch::kDouble).requires_grad_(true);
  const at::Tensor c = xg - xg.mean(1, true);
  ((c * at::rsqrt((c * c).mean(1, true) + eps_g.exp())) * probe_v).sum().backward();
  CHECK(torch::allclose(got[1], xg.grad(), 1e-10, 1e-12));
  CHECK(torch::allclose(got[2], eps_g.grad(), 1e-10, 1e-12));
}

// attention_lse reads the log-sum-exp the call that made its input kept (NaN on the CPU, where no
// kernel keeps one), for as long as that output lives; another tensor has none to read.
TEST_CASE("attention_lse reads what attention_and_lse kept for its output", "[unit][ir][aten]") {
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  Node forward;
  forward.op = Op::attention_and_lse;
  forward.attrs.causal = true;
  Node lse;
  lse.op = Op::attention_lse;
  const at::Tensor q = torch::randn({1, 2, 3, 8}, bf16);
  const at::Tensor out = execute_node(forward, {q, q, q}, at::kCPU);
  const at::Tensor kept = execute_node(lse, {out}, at::kCPU);
  CHECK(kept.sizes() == at::IntArrayRef({1, 2, 3}));
  CHECK(kept.scalar_type() == torch::kFloat);
  CHECK(kept.isnan().all().item<bool>());
  CHECK(execute_node(lse, {out}, at::kCPU).is_same(kept));  // read again: the same tensor
  CHECK_THROWS_AS(execute_node(lse, {out.clone()}, at::kCPU), IrError);
}

TEST_CASE("a concatenation of adjacent views is a view of their buffer, and attention's gradients lie side by side", "[unit][ir][aten]") {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const at::Tensor buffer = torch::randn({2, 4, 6}, f64);
  const std::vector<at::Tensor> parts = {buffer.narrow(2, 0, 2), buffer.narrow(2, 2, 3), buffer.narrow(2, 5, 1)};
  Node concat;
  concat.op = Op::concat;
  concat.attrs.ints = {-1};
  const at::Tensor joined = execute_node(concat, parts, at::kCPU);
  CHECK(torch::equal(joined, buffer));
  CHECK(joined.data_ptr() == buffer.data_ptr());
  // Out of order, or from different buffers: copied, as at::cat.
  const std::vector<at::Tensor> swapped = {parts[1], parts[0], parts[2]};
  const at::Tensor copied = execute_node(concat, swapped, at::kCPU);
  CHECK(torch::equal(copied, at::cat(swapped, -1)));
  CHECK_FALSE(copied.storage().is_alias_of(buffer.storage()));
  const std::vector<at::Tensor> apart = {torch::randn({2, 4, 1}, f64), torch::randn({2, 4, 2}, f64)};
  CHECK(torch::equal(execute_node(concat, apart, at::kCPU), at::cat(apart, -1)));

  // attention_grad's [3, B, H, T, D] lies in memory as [B, T, 3, H, D]: dq, dk and dv, each turned
  // back to [B, T, H * D], concatenate into the buffer without a copy.
  const int64_t b = 2, h = 3, t = 4, d = 5;
  Node grad;
  grad.op = Op::attention_grad;
  grad.attrs.causal = true;
  const at::Tensor stacked = execute_node(grad, {torch::randn({b, h, t, d}, f64), torch::randn({b, h, t, d}, f64),
                                                 torch::randn({b, h, t, d}, f64), torch::randn({b, h, t, d}, f64)}, at::kCPU);
  CHECK(stacked.permute({1, 3, 0, 2, 4}).is_contiguous());
  std::vector<at::Tensor> projections;
  for (int64_t i = 0; i < 3; ++i) projections.push_back(stacked.select(0, i).permute({0, 2, 1, 3}).reshape({b, t, h * d}));
  const at::Tensor qkv = execute_node(concat, projections, at::kCPU);
  CHECK(qkv.data_ptr() == stacked.data_ptr());
  CHECK(torch::equal(qkv.reshape({b, t, 3, h, d}).permute({2, 0, 3, 1, 4}), stacked));
}

TEST_CASE("attention through a named backend computes what the default call does", "[unit][ir][aten][autotune]") {
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t b = 2, h = 3, t = 5, d = 4;
  const std::vector<at::Tensor> inputs = {torch::randn({b, h, t, d}, f64), torch::randn({b, h, t, d}, f64), torch::randn({b, h, t, d}, f64),
                                          torch::randn({b, h, t, d}, f64)};
  for (const double scale : {0.0, 0.3}) {
    for (const bool causal : {true, false}) {
      INFO("scale " << scale << ", causal " << causal);
      Node node;
      node.attrs.scalar = scale;
      node.attrs.causal = causal;
      for (const Op op : {Op::attention, Op::attention_grad}) {
        node.op = op;
        const std::vector<at::Tensor> args(inputs.begin(), inputs.begin() + (op == Op::attention ? 3 : 4));
        const at::Tensor expected = execute_node(node, args, at::kCPU);
        for (const trainc::AttentionBackend backend : trainc::attention_backends(at::kCPU)) {
          const at::Tensor got = execute_node(node, args, at::kCPU, trainc::attention_backend_name(backend));
          CHECK(torch::allclose(got, expected, 1e-10, 1e-12));
          if (op == Op::attention_grad) CHECK(got.permute({1, 3, 0, 2, 4}).is_contiguous());
        }
      }
    }
  }
}

TEST_CASE("on the CPU a compiled program's library calls keep ATen's defaults", "[unit][ir][aten][autotune]") {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  Node attention;
  attention.op = Op::attention;
  attention.attrs.causal = true;
  const std::vector<at::Tensor> qkv = {torch::randn({1, 2, 8, 4}, f32), torch::randn({1, 2, 8, 4}, f32), torch::randn({1, 2, 8, 4}, f32)};
  Node matmul;
  matmul.op = Op::matmul;
  const std::vector<at::Tensor> operands = {torch::randn({3, 4}, f32), torch::randn({4, 5}, f32)};
  int measured = 0;
  trainc::Autotuner tuner(trainc::TuningCache(""), [&](const std::function<void()>& work) {
    ++measured;
    work();
    return 1.0;
  });
  // One attention backend and one BLAS library on the CPU: nothing to measure, nothing to pick.
  CHECK(trainc::choose_library_variant(attention, qkv, at::kCPU, &tuner).empty());
  CHECK(trainc::choose_library_variant(matmul, operands, at::kCPU, &tuner).empty());
  CHECK(trainc::choose_library_variant(attention, qkv, at::kCPU, nullptr).empty());
  CHECK(measured == 0);
  CHECK(trainc::describe_call(attention, qkv) ==
        "attention causal scale 0 | f32[1,2,8,4]/[64,32,4,1] f32[1,2,8,4]/[64,32,4,1] f32[1,2,8,4]/[64,32,4,1]");
  CHECK(trainc::describe_call(matmul, {operands[0], operands[1].t()}) == "matmul | f32[3,4]/[4,1] f32[5,4]/[1,5]");
}
