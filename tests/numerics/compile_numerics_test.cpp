// The planner against eager autograd, one row per aten op of the import table (coverage checked):
// each row's function is traced, imported, differentiated, partitioned and run as aot_eager runs
// it; the loss sum(f(x) * r), with r a fresh random weighting, and the gradient of every floating
// input must match eager's. Fresh random inputs every run, in float64 and float32.
//
// Tolerances (design.md's numerics contract), relative to the largest magnitude of the reference:
// float64 1e-10, float32 1e-5 (1e-4 for rows whose decomposition reorders a sum), bf16 2e-2.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <functional>
#include <set>

#include "trainc/compat/torch_compat.h"
#include "support/numerics.h"
#include "support/kernel_cache.h"
#include "trainc/compile/backends/inductor.h"
#include "trainc/compile/planner.h"

using namespace trainc;
using trainc::test::relative_error;
namespace F = torch::nn::functional;

namespace {

struct OpRow {
  std::string name;                 // the row's label
  std::vector<std::string> covers;  // aten ops of the import table this row exercises
  // Fresh inputs of the dtype; floating ones are differentiated.
  std::function<std::vector<at::Tensor>(at::ScalarType)> inputs;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> fn;
  double float32_tolerance = 1e-5;
  std::vector<int> buffers = {};  // inputs updated in place (batch-norm running statistics)
  std::string imports_as = {};    // an IR op the import must make (a pattern it recognizes)
};

at::Tensor rn(std::vector<int64_t> shape, at::ScalarType dtype) { return torch::randn(shape, torch::TensorOptions().dtype(dtype)); }
at::Tensor positive(std::vector<int64_t> shape, at::ScalarType dtype) { return rn(shape, dtype).abs() + 0.5; }
at::Tensor labels(std::vector<int64_t> shape, int64_t classes) { return torch::randint(0, classes, shape, torch::kLong); }

at::Tensor hand_written_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = q.size(-2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  scores = scores.masked_fill(at::ones({t, t}, q.options().dtype(at::kBool)).triu(1), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v);
}

std::vector<OpRow> rows() {
  using V = const std::vector<at::Tensor>&;
  const auto one = [](std::vector<int64_t> shape) { return [shape](at::ScalarType d) { return std::vector<at::Tensor>{rn(shape, d)}; }; };
  const auto two = [](std::vector<int64_t> a, std::vector<int64_t> b) {
    return [a, b](at::ScalarType d) { return std::vector<at::Tensor>{rn(a, d), rn(b, d)}; };
  };
  std::vector<OpRow> r = {
      {"linear", {"aten::linear"}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 4, 5}, d), rn({3, 5}, d), rn({3}, d)}; },
       [](V x) { return at::linear(x[0], x[1], x[2]); }, 1e-5, {}, "matmul_bias"},
      // The C++ frontend's F::linear over a 3-D input: matmul, then its bias added in place.
      {"F::linear over a 3-D input", {}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 4, 5}, d), rn({3, 5}, d), rn({3}, d)}; },
       [](V x) { return F::linear(x[0], x[1], x[2]); }, 1e-5, {}, "matmul_bias"},
      {"addmm and t", {"aten::addmm", "aten::t"}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({3}, d), rn({4, 5}, d), rn({3, 5}, d)}; },
       [](V x) { return torch::addmm(x[0], x[1], x[2].t(), 0.5, 2.0); }},
      {"mm", {"aten::mm"}, two({4, 5}, {5, 3}), [](V x) { return torch::mm(x[0], x[1]); }},
      {"bmm", {"aten::bmm"}, two({2, 4, 5}, {2, 5, 3}), [](V x) { return torch::bmm(x[0], x[1]); }},
      {"matmul, batched x shared and vector", {"aten::matmul"}, [](at::ScalarType d) {
         return std::vector<at::Tensor>{rn({2, 4, 5}, d), rn({5, 3}, d), rn({3}, d)};
       },
       [](V x) { return torch::matmul(torch::matmul(x[0], x[1]), x[2]); }},
      // A bias added to a 3-D product that nothing else reads (as F::linear adds it): one
      // matmul_bias, the bias in the GEMM's epilogue.
      {"matmul then a bias add", {}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 4, 5}, d), rn({5, 3}, d), rn({3}, d)}; },
       [](V x) { return torch::matmul(x[0], x[1]) + x[2]; }, 1e-5, {}, "matmul_bias"},
      {"add, sub, rsub with alpha and broadcasting", {"aten::add", "aten::sub", "aten::rsub"}, two({3, 1}, {4}),
       [](V x) { return torch::rsub(torch::sub(torch::add(x[0], x[1], 0.5), x[1] * x[1], 2.0), x[0], 3.0) + 1.5; }},
      {"mul, div, neg", {"aten::mul", "aten::div", "aten::neg"}, [](at::ScalarType d) {
         return std::vector<at::Tensor>{rn({3, 4}, d), positive({4}, d)};
       },
       [](V x) { return -(x[0] * x[1] / (x[1] + 1.0)) / 3.0; }},
      {"pow", {"aten::pow"}, [](at::ScalarType d) { return std::vector<at::Tensor>{positive({5}, d), rn({5}, d)}; },
       [](V x) { return torch::pow(x[0], 3) + torch::pow(x[0], x[1]) + torch::pow(2.0, x[1]); }},
      {"exp, log, tanh, erf", {"aten::exp", "aten::log", "aten::tanh", "aten::erf"},
       [](at::ScalarType d) { return std::vector<at::Tensor>{rn({6}, d), positive({6}, d)}; },
       [](V x) { return torch::exp(x[0]) + torch::log(x[1]) + torch::tanh(x[0]) + torch::erf(x[0]); }},
      {"sqrt, rsqrt, reciprocal", {"aten::sqrt", "aten::rsqrt", "aten::reciprocal"},
       [](at::ScalarType d) { return std::vector<at::Tensor>{positive({6}, d)}; },
       [](V x) { return torch::sqrt(x[0]) + torch::rsqrt(x[0]) + torch::reciprocal(x[0]); }},
      {"relu, sigmoid, silu", {"aten::relu", "aten::sigmoid", "aten::silu"}, one({7}),
       [](V x) { return torch::relu(x[0]) + torch::sigmoid(x[0]) + F::silu(x[0]); }},
      {"gelu, exact and tanh", {"aten::gelu"}, one({7}), [](V x) {
         return F::gelu(x[0], F::GELUFuncOptions().approximate("none")) + F::gelu(x[0] * 2, F::GELUFuncOptions().approximate("tanh"));
       }},
      {"maximum, comparisons, where, masked_fill", {"aten::maximum", "aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne", "aten::where", "aten::masked_fill"},
       two({3, 4}, {4}), [](V x) {
         const at::Tensor m = torch::maximum(x[0], x[1]);
         const at::Tensor w = torch::where(x[0] > x[1], m, x[0] * 2) + torch::where(x[0] < 0.1, x[1], 0.5 * x[0]);
         const at::Tensor masks = (x[0] >= 0).logical_and(x[0] <= 1).logical_or(x[1] == 0).logical_or(x[1] != x[1]);
         return w.masked_fill(masks, -1.5);
       }},
      {"softmax and log_softmax", {"aten::softmax", "aten::log_softmax"}, one({3, 5}),
       [](V x) { return torch::softmax(x[0], -1) + torch::log_softmax(x[0], 0); }},
      {"sum, mean, amax", {"aten::sum", "aten::mean", "aten::amax"}, one({3, 4, 5}), [](V x) {
         return x[0].sum(at::IntArrayRef{0, 2}, true) + x[0].mean(at::IntArrayRef{1}, true).mean() + x[0].amax(at::IntArrayRef{1}, true) + x[0].sum();
       }},
      {"layer_norm", {"aten::layer_norm"}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 3, 8}, d), rn({8}, d), rn({8}, d)}; },
       [](V x) { return F::layer_norm(x[0], F::LayerNormFuncOptions({8}).weight(x[1]).bias(x[2])); }, 1e-4},
      {"batch_norm, training: batch statistics and running ones updated", {"aten::batch_norm"},
       [](at::ScalarType d) {
         return std::vector<at::Tensor>{rn({4, 3, 5, 5}, d), rn({3}, d), rn({3}, d), rn({3}, d), positive({3}, d)};
       },
       [](V x) { return F::batch_norm(x[0], x[3], x[4], F::BatchNormFuncOptions().weight(x[1]).bias(x[2]).training(true).momentum(0.2)); },
       1e-4, {3, 4}},
      {"batch_norm, evaluation", {"aten::batch_norm"},
       [](at::ScalarType d) { return std::vector<at::Tensor>{rn({4, 3}, d), rn({3}, d), rn({3}, d), rn({3}, d), positive({3}, d)}; },
       [](V x) { return F::batch_norm(x[0], x[3], x[4], F::BatchNormFuncOptions().weight(x[1]).bias(x[2]).training(false)); }, 1e-5, {3, 4}},
      {"dropout, training and evaluation", {"aten::dropout"}, one({6, 8}),
       [](V x) { return torch::dropout(x[0], 0.3, true) + torch::dropout(x[0], 0.3, false); }},
      {"embedding", {"aten::embedding"}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({10, 4}, d), labels({3, 5}, 10)}; },
       [](V x) { return F::embedding(x[1], x[0]); }},
      {"cross_entropy with ignore_index and label smoothing", {"aten::cross_entropy_loss"},
       [](at::ScalarType d) {
         at::Tensor targets = labels({12}, 7);
         targets.index_put_({torch::tensor({1, 5})}, -100);
         return std::vector<at::Tensor>{rn({12, 7}, d), targets};
       },
       [](V x) {
         return F::cross_entropy(x[0], x[1]) + F::cross_entropy(x[0] * 2, x[1], F::CrossEntropyFuncOptions().label_smoothing(0.1)) +
                F::cross_entropy(x[0], x[1], F::CrossEntropyFuncOptions().reduction(torch::kSum)) * 0.1 +
                F::cross_entropy(x[0], x[1], F::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(0.2)).sum();
       }},
      // A language model's head: the loss of a linear layer's logits imports as one
      // linear_cross_entropy op.
      {"cross_entropy over a linear layer's logits", {"aten::cross_entropy_loss", "aten::linear"},
       [](at::ScalarType d) {
         at::Tensor targets = labels({6}, 7);
         targets.index_put_({torch::tensor({2})}, -100);
         return std::vector<at::Tensor>{rn({2, 3, 5}, d), rn({7, 5}, d), targets};
       },
       [](V x) {
         const at::Tensor logits = F::linear(x[0], x[1]).reshape({-1, 7});
         return F::cross_entropy(logits, x[2]) + F::cross_entropy(logits, x[2], F::CrossEntropyFuncOptions().label_smoothing(0.1)) +
                F::cross_entropy(logits, x[2], F::CrossEntropyFuncOptions().reduction(torch::kSum)) * 0.1 +
                F::cross_entropy(logits, x[2], F::CrossEntropyFuncOptions().reduction(torch::kNone).label_smoothing(0.2)).sum();
       },
       1e-5, {}, "linear_cross_entropy"},
      {"nll_loss", {"aten::nll_loss", "aten::nll_loss_nd"}, [](at::ScalarType d) { return std::vector<at::Tensor>{rn({6, 5}, d), labels({6}, 5)}; },
       [](V x) { return F::nll_loss(torch::log_softmax(x[0], 1), x[1]); }},
      {"mse_loss", {"aten::mse_loss"}, two({3, 4}, {3, 4}),
       [](V x) { return F::mse_loss(x[0], x[1]) + F::mse_loss(x[0], x[1] * 2, F::MSELossFuncOptions().reduction(torch::kSum)); }},
      {"view, reshape, flatten, unsqueeze, squeeze, contiguous", {"aten::view", "aten::reshape", "aten::flatten", "aten::unsqueeze", "aten::squeeze", "aten::contiguous"},
       one({2, 3, 4}), [](V x) {
         return x[0].view({6, 4}).reshape({4, 6}).flatten().unsqueeze(0).unsqueeze(2).squeeze(2).squeeze().contiguous() * 2;
       }},
      {"permute, transpose, expand", {"aten::permute", "aten::transpose", "aten::expand"}, two({2, 3, 1}, {3, 4}),
       [](V x) { return x[0].permute({2, 0, 1}).transpose(0, 2).expand({3, 2, 4}) * x[1].transpose(0, 1).transpose(0, 1).unsqueeze(1); }},
      {"slice, select, split, chunk", {"aten::slice", "aten::select", "aten::split", "aten::split_with_sizes", "aten::chunk"}, one({6, 9}),
       [](V x) {
         const auto parts = x[0].split(3, 1);
         const auto sized = x[0].split_with_sizes({2, 4}, 0);
         const auto chunks = x[0].chunk(3, 1);
         return parts[0] * parts[2] + x[0].slice(1, 1, 8, 3).sum() + x[0].select(0, -2).sum() + sized[1].sum() + chunks[1];
       }},
      {"cat, stack", {"aten::cat", "aten::stack"}, two({2, 3}, {2, 2}),
       [](V x) { return torch::cat({x[0], x[1], x[0]}, 1) * 2 + torch::stack({x[0].slice(1, 0, 2), x[1]}, 0).sum(0).sum(); }},
      {"conv2d with bias, stride and padding", {"aten::_convolution", "aten::conv2d", "aten::convolution"},
       [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 3, 7, 7}, d), rn({4, 3, 3, 3}, d), rn({4}, d)}; },
       [](V x) { return F::conv2d(x[0], x[1], F::Conv2dFuncOptions().bias(x[2]).stride(2).padding(1)); }},
      {"max_pool2d and avg_pool2d", {"aten::max_pool2d", "aten::avg_pool2d"}, one({2, 3, 8, 8}),
       [](V x) { return F::max_pool2d(x[0], F::MaxPool2dFuncOptions(2)) + F::avg_pool2d(x[0], F::AvgPool2dFuncOptions(3).stride(2).padding(1)); }},
      {"the hand-written causal attention pattern", {"aten::ones", "aten::triu", "aten::masked_fill"},
       [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 2, 5, 4}, d), rn({2, 2, 5, 4}, d), rn({2, 2, 5, 3}, d)}; },
       [](V x) { return hand_written_causal_attention(x[0], x[1], x[2]); }},
      {"arange, zeros, full, tril", {"aten::arange", "aten::zeros", "aten::full", "aten::tril"}, one({4, 4}),
       [](V x) {
         const at::Tensor ramp = torch::arange(4, x[0].options()) + torch::arange(1, 9, 2, x[0].options());
         return (x[0] * ramp).tril() + torch::zeros({4, 4}, x[0].options()) + torch::full({4}, 0.5, x[0].options());
       }},
      {"casts", {"aten::to", "aten::type_as"}, two({5}, {5}), [](V x) {
         return (x[0].to(torch::kFloat) * 2).to(x[0].scalar_type()) + x[1].to(torch::kInt64).type_as(x[1]);
       }},
  };
#if TRAINC_TORCH_2
  r.push_back({"scaled_dot_product_attention, causal and not", {"aten::scaled_dot_product_attention"},
               [](at::ScalarType d) { return std::vector<at::Tensor>{rn({2, 2, 5, 4}, d), rn({2, 2, 5, 4}, d), rn({2, 2, 5, 3}, d)}; },
               [](V x) {
                 return at::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true) +
                        at::scaled_dot_product_attention(x[0] * 2, x[1], x[2], {}, 0.0, false);
               }});
#endif
  return r;
}

// Runs one row both ways and checks the loss, every gradient and every updated buffer.
// `inductor`: the step runs as generated kernels instead of op by op through ATen.
void check_row(const OpRow& row, at::ScalarType dtype, double tolerance, bool inductor = false) {
  std::vector<at::Tensor> inputs = row.inputs(dtype);
  const at::Tensor probe = row.fn(inputs);
  const at::Tensor weights = torch::randn(probe.sizes(), probe.options());
  const auto is_buffer = [&](std::size_t i) { return std::count(row.buffers.begin(), row.buffers.end(), static_cast<int>(i)) > 0; };

  // Eager.
  std::vector<at::Tensor> eager;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    eager.push_back(inputs[i].clone());
    if (inputs[i].is_floating_point() && !is_buffer(i)) eager.back().requires_grad_(true);
  }
  torch::manual_seed(11);
  const at::Tensor eager_loss = (row.fn(eager) * weights).sum();
  eager_loss.backward();

  // Compiled, as aot_eager runs a step.
  std::vector<at::Tensor> compiled;
  std::vector<StepInput> described;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    compiled.push_back(inputs[i].clone());
    const bool parameter = inputs[i].is_floating_point() && !is_buffer(i);
    if (parameter) compiled.back().requires_grad_(true);
    described.push_back({"x" + std::to_string(i), is_buffer(i) ? StepInputKind::buffer : parameter ? StepInputKind::parameter : StepInputKind::batch, parameter});
  }
  compiled.push_back(weights);
  described.push_back({"weights", StepInputKind::batch, false});
  std::vector<at::Tensor> traced_values;
  for (const at::Tensor& t : compiled) traced_values.push_back(t.detach().clone());
  const std::vector<at::Tensor> traced_inputs(traced_values.begin(), traced_values.end() - 1);
  CapturedStep captured =
      capture_function(described, traced_values, [&] { return (row.fn(traced_inputs) * traced_values.back()).sum(); });
  const ImportedGraph imported = import_graph(captured);
  INFO(describe_breaks(imported.breaks));
  REQUIRE(imported.breaks.empty());
  if (!row.imports_as.empty()) CHECK_THAT(ir::to_text(imported.graph), Catch::Matchers::Contains(" = " + row.imports_as + "("));
  std::vector<bool> requires_grad;
  for (const StepInput& input : described) requires_grad.push_back(input.requires_grad);
  INFO(ir::to_text(imported.graph));
  const JointGraph joint = differentiate(imported.graph, requires_grad);
  INFO(ir::to_text(joint.graph));
  std::shared_ptr<CompiledStep> step;
  if (inductor) {
    InductorReport report;
    step = compile_inductor_step(partition(joint), imported.updated_buffers, joint.gradient_inputs, test::test_compiler_settings(), at::kCPU, "", report);
  } else {
    step = std::make_shared<CompiledStep>(partition(joint), imported.updated_buffers, joint.gradient_inputs);
  }
  torch::manual_seed(11);
  const at::Tensor loss = step->run(compiled, GradScale(1.0));

  CHECK(relative_error(loss, eager_loss.detach()) <= tolerance);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i);
    if (eager[i].requires_grad()) {
      REQUIRE(compiled[i].grad().defined() == eager[i].grad().defined());
      if (eager[i].grad().defined()) CHECK(relative_error(compiled[i].grad(), eager[i].grad()) <= tolerance);
    } else if (is_buffer(i)) {
      CHECK(relative_error(compiled[i], eager[i]) <= tolerance);
    }
  }
}

}  // namespace

TEST_CASE("every op of the import table: loss and gradients match eager, float64 and float32", "[numerics][compile]") {
  std::set<std::string> covered;
  for (const OpRow& row : rows()) {
    for (const std::string& op : row.covers) covered.insert(op);
    SECTION(row.name) {
      INFO(row.name << " in float64");
      check_row(row, torch::kDouble, 1e-10);
      INFO(row.name << " in float32");
      check_row(row, torch::kFloat, row.float32_tolerance);
    }
  }
  // Every aten op the planner promises in the import table is exercised by some row above.
  for (const std::string op : {"aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::add", "aten::sub",
                               "aten::mul", "aten::div", "aten::neg", "aten::pow", "aten::exp", "aten::log", "aten::tanh",
                               "aten::erf", "aten::sqrt", "aten::rsqrt", "aten::reciprocal", "aten::relu", "aten::gelu",
                               "aten::silu", "aten::sigmoid", "aten::softmax", "aten::log_softmax", "aten::layer_norm",
                               "aten::batch_norm", "aten::dropout", "aten::embedding", "aten::cross_entropy_loss",
                               "aten::nll_loss", "aten::mse_loss", "aten::view", "aten::reshape", "aten::permute",
                               "aten::transpose", "aten::t", "aten::contiguous", "aten::expand", "aten::slice", "aten::select",
                               "aten::cat", "aten::unsqueeze", "aten::squeeze", "aten::masked_fill", "aten::where",
                               "aten::conv2d", "aten::max_pool2d", "aten::avg_pool2d", "aten::to"}) {
    INFO(op);
    CHECK(covered.count(op) == 1);
  }
}

TEST_CASE("every op of the import table under inductor: loss and gradients match eager, float64 and float32", "[numerics][inductor]") {
  for (const OpRow& row : rows()) {
    SECTION(row.name) {
      INFO(row.name << " in float64");
      check_row(row, torch::kDouble, 1e-10, true);
      INFO(row.name << " in float32");
      check_row(row, torch::kFloat, std::max(row.float32_tolerance, 1e-5), true);
    }
  }
}

// autocast bf16 around a linear layer and gelu: the casts autocast inserts must import.
static OpRow autocast_linear_row() {
  return {"autocast linear + gelu", {}, [](at::ScalarType d) {
            return std::vector<at::Tensor>{rn({4, 6}, d), rn({5, 6}, d), rn({5}, d)};
          },
          [](const std::vector<at::Tensor>& x) {
            at::Tensor y;
            {
              AutocastScope autocast(c10::DeviceType::CPU, true, at::kBFloat16);
              y = F::gelu(F::linear(x[0], x[1], x[2]));
            }
            return y.to(torch::kFloat);
          }};
}

// A language model's head under autocast (traced as t, to bf16, matmul) and its float32 loss: one
// linear_cross_entropy op.
static OpRow autocast_head_row() {
  return {"autocast language-model head + cross_entropy", {}, [](at::ScalarType d) {
            at::Tensor targets = labels({6}, 7);
            targets.index_put_({torch::tensor({4})}, -100);
            return std::vector<at::Tensor>{rn({2, 3, 5}, d), rn({7, 5}, d), targets};
          },
          [](const std::vector<at::Tensor>& x) {
            at::Tensor logits;
            {
              AutocastScope autocast(c10::DeviceType::CPU, true, at::kBFloat16);
              logits = F::linear(x[0], x[1]);
            }
            return F::cross_entropy(logits.reshape({-1, 7}).to(torch::kFloat), x[2], F::CrossEntropyFuncOptions().label_smoothing(0.1));
          },
          1e-5, {}, "linear_cross_entropy"};
}

TEST_CASE("bf16 autocast: the casts it inserts import, and a linear layer matches eager within 2e-2", "[numerics][compile]") {
  check_row(autocast_linear_row(), torch::kFloat, 2e-2);
  check_row(autocast_head_row(), torch::kFloat, 2e-2);
}

TEST_CASE("bf16 autocast under inductor: a linear layer matches eager within 2e-2", "[numerics][inductor]") {
  check_row(autocast_linear_row(), torch::kFloat, 2e-2, true);
  check_row(autocast_head_row(), torch::kFloat, 2e-2, true);
}
