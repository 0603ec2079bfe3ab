// The passes that rewrite extern ops around what a backward reads (dlogits_in_forward,
// head_gradients_apart, head_weight_grad_to_float, attention_lse_in_forward, attention_bias_sums,
// embedding_grad_add, gelu_epilogue, gelu_grad_epilogue), each checked by running the
// graph before and after it through the ATen executor on fresh random inputs.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <map>

#include "support/ir_builders.h"
#include "trainc/compile/autodiff/autodiff.h"
#include "trainc/compile/capture/capture.h"
#include "trainc/compile/import/import.h"
#include "trainc/compile/passes/attention_bias_sums.h"
#include "trainc/compile/passes/attention_lse_in_forward.h"
#include "trainc/compile/passes/dlogits_in_forward.h"
#include "trainc/compile/passes/embedding_grad_add.h"
#include "trainc/compile/passes/gelu_epilogue.h"
#include "trainc/compile/passes/gelu_grad_epilogue.h"
#include "trainc/compile/passes/head_gradients_apart.h"
#include "trainc/compile/passes/head_weight_grad_to_float.h"
#include "trainc/compile/runtime/aten_executor.h"

using namespace trainc::ir;
using trainc::test::ints;

namespace {

// The ops of `graph`, counted.
std::map<Op, int> op_counts(const Graph& graph) {
  std::map<Op, int> ops;
  for (const Node& node : graph.nodes()) ++ops[node.op];
  return ops;
}

// A head's summed loss over fresh inputs: x f64 [8, 5], w f64 [11, 5], targets i64 [8], smoothing 0.1.
Graph summed_head_loss() {
  Graph forward;
  const ValueId x = forward.add_input("x", {DType::f64, {8, 5}});
  const ValueId w = forward.add_input("w", {DType::f64, {11, 5}});
  const ValueId targets = forward.add_input("targets", {DType::i64, {8}});
  Attributes head;
  head.dtype = DType::f64;
  head.scalar = 0.1;
  Attributes all;
  all.ints = {0};
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::linear_cross_entropy, {x, w, targets}, head)}, all));
  return forward;
}

// Inputs for it, with the loss's gradient.
std::vector<at::Tensor> summed_head_loss_inputs() {
  return {torch::randn({8, 5}, torch::kDouble), torch::randn({11, 5}, torch::kDouble), torch::randint(0, 11, {8}),
          torch::full({}, 0.5, torch::kDouble)};
}

}  // namespace

// A joint graph with a head whose loss is differentiated: after dlogits_in_forward the backward
// reads the forward's gradient (no linear_cross_entropy_grad is left), and the graph computes the
// same loss and gradients.
TEST_CASE("dlogits_in_forward keeps a head's loss and gradients and drops its recomputation", "[unit][ir][aten][passes]") {
  const Graph forward = summed_head_loss();
  const trainc::JointGraph joint = trainc::differentiate(forward, {true, true, false});
  const Graph rewritten = dlogits_in_forward(joint.graph);
  std::map<Op, int> ops = op_counts(rewritten);
  CHECK(ops[Op::linear_cross_entropy] == 0);
  CHECK(ops[Op::linear_cross_entropy_grad] == 0);
  CHECK(ops[Op::linear_cross_entropy_and_dlogits] == 1);
  CHECK(ops[Op::linear_cross_entropy_grad_from_dlogits] == 1);
  CHECK(ops[Op::bitcast] == 1);
  REQUIRE(rewritten.outputs().size() == joint.graph.outputs().size());

  const std::vector<at::Tensor> inputs = summed_head_loss_inputs();
  const std::vector<at::Tensor> expected = execute_with_aten(joint.graph, inputs);
  const std::vector<at::Tensor> got = execute_with_aten(rewritten, inputs);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    CHECK(torch::allclose(got[i], expected[i], 1e-10, 1e-12));
  }
  // Without a gradient for the head, nothing changes.
  CHECK(to_text(dlogits_in_forward(forward)) == to_text(forward));
}

// The same head after dlogits_in_forward: head_gradients_apart makes x's and the weight's
// gradients two steps, each slice reading its own part, and the graph computes the same.
TEST_CASE("head_gradients_apart makes a head's two gradients two steps with the same values", "[unit][ir][aten][passes]") {
  const Graph joint = dlogits_in_forward(trainc::differentiate(summed_head_loss(), {true, true, false}).graph);
  const Graph apart = head_gradients_apart(joint);
  std::vector<int> made;  // each step's HeadGradients
  for (const Node& node : apart.nodes()) {
    if (node.op == Op::linear_cross_entropy_grad_from_dlogits) made.push_back(static_cast<int>(head_gradients(node.attrs)));
  }
  CHECK(made == std::vector<int>{static_cast<int>(HeadGradients::input), static_cast<int>(HeadGradients::weight)});
  const std::vector<at::Tensor> inputs = summed_head_loss_inputs();
  const std::vector<at::Tensor> expected = execute_with_aten(joint, inputs);
  const std::vector<at::Tensor> got = execute_with_aten(apart, inputs);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    CHECK(torch::allclose(got[i], expected[i], 1e-12, 1e-14));
  }
  // A reader that is not a slice inside one part (here the whole result, returned) keeps one step.
  Graph returned = joint;
  for (ValueId id = 0; id < returned.size(); ++id) {
    if (returned.node(id).op == Op::linear_cross_entropy_grad_from_dlogits) returned.mark_output(id);
  }
  CHECK(to_text(head_gradients_apart(returned)) == to_text(returned));
}

// A bf16 head's weight gradient made on its own and widened as the base of a tied embedding's
// embedding_grad_add: head_weight_grad_to_float makes the step write float32 and the embedding's
// rows go into it in place. On the CPU the float32 product is the bf16 one widened, so the values
// are the same bit for bit. A view read twice, or a cast (an untied head), leaves the graph alone.
TEST_CASE("head_weight_grad_to_float makes a head's weight gradient float32 where it is widened", "[unit][ir][aten][passes]") {
  const int64_t rows = 8, width = 8, vocabulary = 50;
  LinearCrossEntropyLayout layout;
  REQUIRE(linear_cross_entropy_layout(rows, width, vocabulary, 2, 4, layout));
  const auto build = [&](bool tied, bool view_read_twice, bool view_returned = false) {
    Graph g;
    const ValueId packed = g.add_input("packed", {DType::bf16, {layout.total}});
    const ValueId x = g.add_input("x", {DType::bf16, {rows, width}});
    const ValueId w = g.add_input("w", {DType::bf16, {vocabulary, width}});
    const ValueId grad = g.add_input("grad", {DType::f32, {rows}});
    const ValueId embedding_rows = g.add_input("rows", {DType::f32, {4, 16, width}});
    const ValueId indices = g.add_input("indices", {DType::i64, {4, 16}});
    Attributes weight_part;
    weight_part.dtype = DType::f32;
    weight_part.ints = {1};
    const ValueId part = g.add(Op::linear_cross_entropy_grad_from_dlogits, {packed, x, w, grad}, weight_part);
    const ValueId table = g.add(Op::reshape, {g.add(Op::slice, {part}, ints({0, 0, vocabulary * width, 1}))}, ints({vocabulary, width}));
    if (view_returned) {
      g.mark_output(table);
    } else if (tied) {
      g.mark_output(g.add(Op::embedding_grad_add, {table, embedding_rows, indices}, ints({vocabulary})));
    } else {
      Attributes widen;
      widen.dtype = DType::f32;
      g.mark_output(g.add(Op::cast, {table}, widen));
    }
    if (view_read_twice) g.mark_output(table);
    return g;
  };
  const std::vector<at::Tensor> inputs = {torch::randn({layout.total}).to(torch::kBFloat16), torch::randn({rows, width}).to(torch::kBFloat16),
                                          torch::randn({vocabulary, width}).to(torch::kBFloat16), torch::randn({rows}),
                                          torch::randn({4, 16, width}), torch::randint(0, vocabulary, {4, 16})};
  const Graph graph = build(true, false);
  const Graph rewritten = head_weight_grad_to_float(graph);
  verify(rewritten);
  for (const Node& node : rewritten.nodes()) {
    if (node.op == Op::linear_cross_entropy_grad_from_dlogits) CHECK(head_gradients(node.attrs) == HeadGradients::weight_float);
    if (node.op == Op::embedding_grad_add) CHECK(embedding_grad_add_in_place(node.attrs));
  }
  const at::Tensor expected = execute_with_aten(graph, inputs)[0];
  const at::Tensor got = execute_with_aten(rewritten, inputs)[0];
  CHECK(got.scalar_type() == torch::kFloat);
  CHECK_FALSE(got.is_view());  // a gradient the step adopts as .grad without a copy
  CHECK(torch::equal(got, expected));
  for (const auto& [tied, view_read_twice] : {std::pair<bool, bool>{true, true}, {false, false}}) {
    const Graph unchanged = build(tied, view_read_twice);
    CHECK(to_text(head_weight_grad_to_float(unchanged)) == to_text(unchanged));
  }
  const Graph returned = build(true, false, /*view_returned=*/true);  // the chain ends in an output
  CHECK(to_text(head_weight_grad_to_float(returned)) == to_text(returned));
}

// A joint graph with a differentiated attention: after attention_lse_in_forward the forward keeps
// the attention's output and reads its log-sum-exp right after it, and the backward reads both (on
// the CPU no kernel keeps a log-sum-exp, so the backward runs the forward again); the graph
// computes the same.
TEST_CASE("attention_lse_in_forward keeps an attention's loss and gradients", "[unit][ir][aten][passes]") {
  Graph forward;
  const TensorType qkv_type{DType::bf16, {2, 3, 5, 8}};
  const ValueId q = forward.add_input("q", qkv_type), k = forward.add_input("k", qkv_type), v = forward.add_input("v", qkv_type);
  Attributes causal;
  causal.causal = true;
  Attributes all;
  all.ints = {0, 1, 2, 3};
  Attributes to_f32;
  to_f32.dtype = DType::f32;
  const ValueId out = forward.add(Op::cast, {forward.add(Op::attention, {q, k, v}, causal)}, to_f32);
  forward.mark_output(forward.add(Op::sum, {forward.add(Op::mul, {out, out})}, all));
  const trainc::JointGraph joint = trainc::differentiate(forward, {true, true, true});
  const Graph rewritten = attention_lse_in_forward(joint.graph);
  std::map<Op, int> ops = op_counts(rewritten);
  CHECK(ops[Op::attention] == 0);
  CHECK(ops[Op::attention_grad] == 0);
  CHECK(ops[Op::attention_and_lse] == 1);
  CHECK(ops[Op::attention_lse] == 1);
  CHECK(ops[Op::attention_grad_from_lse] == 1);
  // The log-sum-exp is read right after the attention, in the forward.
  for (ValueId id = 0; id < rewritten.size(); ++id) {
    if (rewritten.node(id).op == Op::attention_and_lse) CHECK(rewritten.node(id + 1).op == Op::attention_lse);
  }

  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  const std::vector<at::Tensor> inputs = {torch::randn({2, 3, 5, 8}, bf16), torch::randn({2, 3, 5, 8}, bf16), torch::randn({2, 3, 5, 8}, bf16),
                                          torch::full({}, 1.0, torch::kFloat)};
  const std::vector<at::Tensor> expected = execute_with_aten(joint.graph, inputs);
  const std::vector<at::Tensor> got = execute_with_aten(rewritten, inputs);
  REQUIRE(got.size() == expected.size());
  // The same values (on the CPU both run ATen's attention; 1e-6 relative leaves room for another
  // order of float32 sums).
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    CHECK(torch::allclose(got[i].to(torch::kDouble), expected[i].to(torch::kDouble), 1e-6, 1e-9));
  }
  // Float64 attention is left as it is: no fused kernel keeps its statistics.
  Graph wide;
  const TensorType wide_type{DType::f64, {2, 3, 5, 8}};
  const ValueId wq = wide.add_input("q", wide_type), wk = wide.add_input("k", wide_type), wv = wide.add_input("v", wide_type);
  wide.mark_output(wide.add(Op::sum, {wide.add(Op::attention, {wq, wk, wv}, causal)}, all));
  for (const Node& node : attention_lse_in_forward(trainc::differentiate(wide, {true, true, true}).graph).nodes()) {
    CHECK(node.op != Op::attention_and_lse);
  }
}

// The views a fused q-k-v projection's gradient makes of attention's stacked gradients, and the sum
// of that gradient over B * T rows (its bias gradient): attention_bias_sums makes the two one op,
// which computes the same gradient and sums (on the CPU: ATen's stack and sum).
TEST_CASE("attention_bias_sums sums a q-k-v gradient with its stack", "[unit][ir][aten][passes]") {
  const int64_t batch = 2, heads = 2, time = 4, dim = 8;
  const auto build = [&](const std::vector<int64_t>& order, const std::vector<int64_t>& part_shape) {
    Graph g;
    const TensorType type{DType::bf16, {batch, heads, time, dim}};
    const ValueId q = g.add_input("q", type), k = g.add_input("k", type), v = g.add_input("v", type), dy = g.add_input("dy", type);
    Attributes causal;
    causal.causal = true;
    const ValueId kept = g.add(Op::attention_and_lse, {q, k, v}, causal);
    const ValueId stack = g.add(Op::attention_grad_from_lse, {q, k, v, kept, g.add(Op::attention_lse, {kept}), dy}, causal);
    std::vector<ValueId> parts;
    for (int64_t part : order) {
      const ValueId slice = g.add(Op::slice, {stack}, ints({0, part, part + 1, 1}));
      const ValueId dropped = g.add(Op::reshape, {slice}, ints(part_shape));
      const ValueId time_major = g.add(Op::permute, {dropped}, ints({0, 2, 1, 3}));
      parts.push_back(g.add(Op::reshape, {time_major}, ints({batch, time, heads * dim})));
    }
    const ValueId gradient = g.add(Op::concat, parts, ints({2}));
    g.mark_output(gradient);
    g.mark_output(g.add(Op::sum_to_float, {gradient}, ints({0, 1})));
    return g;
  };
  const Graph graph = build({0, 1, 2}, {batch, heads, time, dim});
  const Graph rewritten = attention_bias_sums(graph);
  verify(rewritten);
  std::map<Op, int> ops = op_counts(rewritten);
  CHECK(ops[Op::attention_grad_and_bias_sums] == 1);
  CHECK(ops[Op::attention_grad_from_lse] == 0);
  CHECK(ops[Op::sum_to_float] == 0);

  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < 4; ++i) inputs.push_back(torch::randn({batch, heads, time, dim}, bf16));
  const std::vector<at::Tensor> expected = execute_with_aten(graph, inputs);
  const std::vector<at::Tensor> got = execute_with_aten(rewritten, inputs);
  REQUIRE(got.size() == 2);
  CHECK(torch::equal(got[0], expected[0]));  // the gradient the projection's GEMMs read, bit for bit
  CHECK(got[1].scalar_type() == torch::kFloat);
  CHECK(torch::allclose(got[1], expected[1], 1e-6, 1e-6));  // float32 sums of the same bf16 values
  // Parts in another order, or a part reshaped to another [B, T, H, D] order of its elements, are
  // another matrix: left as they are.
  const Graph reordered = build({1, 0, 2}, {batch, heads, time, dim});
  CHECK(to_text(attention_bias_sums(reordered)) == to_text(reordered));
  const Graph shuffled = build({0, 1, 2}, {batch, time, heads, dim});
  CHECK(to_text(attention_bias_sums(shuffled)) == to_text(shuffled));
}

// A tied table's gradient: the head's (a float32 cast of a bf16 one, as the head's GEMM makes it)
// plus the embedding's. embedding_grad_add makes them one op reading the bf16 gradient, with the
// same sum up to float32 rounding; an embedding gradient read elsewhere too, or a cast read
// elsewhere too, is not folded away.
TEST_CASE("embedding_grad_add adds a tied embedding's gradient into the head's", "[unit][ir][aten][passes]") {
  const int64_t vocabulary = 50, dim = 8;
  const auto build = [&](bool embedding_read_twice, bool cast_read_twice, bool embedding_first) {
    Graph g;
    const ValueId head = g.add_input("head_grad", {DType::bf16, {vocabulary, dim}});
    const ValueId rows = g.add_input("rows", {DType::f32, {4, 16, dim}});
    const ValueId indices = g.add_input("indices", {DType::i64, {4, 16}});
    Attributes widen;
    widen.dtype = DType::f32;
    const ValueId widened = g.add(Op::cast, {head}, widen);
    const ValueId scattered = g.add(Op::embedding_grad, {rows, indices}, ints({vocabulary}));
    g.mark_output(embedding_first ? g.add(Op::add, {scattered, widened}) : g.add(Op::add, {widened, scattered}));
    if (embedding_read_twice) g.mark_output(scattered);
    if (cast_read_twice) g.mark_output(widened);
    return g;
  };
  const std::vector<at::Tensor> inputs = {torch::randn({vocabulary, dim}).to(torch::kBFloat16), torch::randn({4, 16, dim}),
                                          torch::randint(0, vocabulary, {4, 16})};
  for (bool embedding_first : {false, true}) {
    const Graph graph = build(false, false, embedding_first);
    const Graph rewritten = embedding_grad_add(graph);
    verify(rewritten);
    std::map<Op, int> ops = op_counts(rewritten);
    CHECK(ops[Op::embedding_grad_add] == 1);
    CHECK(ops[Op::embedding_grad] == 0);
    CHECK(ops[Op::cast] == 0);
    CHECK(ops[Op::add] == 0);
    const at::Tensor expected = execute_with_aten(graph, inputs)[0];
    const at::Tensor got = execute_with_aten(rewritten, inputs)[0];
    CHECK(got.scalar_type() == torch::kFloat);
    CHECK(torch::allclose(got, expected, 1e-6, 1e-6));
  }
  // The cast read elsewhere stays and is the base; the scattered gradient read elsewhere stays.
  const Graph shared_cast = embedding_grad_add(build(false, true, false));
  CHECK(op_counts(shared_cast)[Op::embedding_grad_add] == 1);
  CHECK(op_counts(shared_cast)[Op::cast] == 1);
  const Graph shared_embedding = build(true, false, false);
  CHECK(to_text(embedding_grad_add(shared_embedding)) == to_text(shared_embedding));
  // A bf16 embedding gradient stays ATen's, which sums each index's rows in float32.
  Graph low;
  const ValueId low_head = low.add_input("head_grad", {DType::bf16, {vocabulary, dim}});
  const ValueId low_rows = low.add_input("rows", {DType::bf16, {4, 16, dim}});
  const ValueId low_indices = low.add_input("indices", {DType::i64, {4, 16}});
  low.mark_output(low.add(Op::add, {low_head, low.add(Op::embedding_grad, {low_rows, low_indices}, ints({vocabulary}))}));
  CHECK(to_text(embedding_grad_add(low)) == to_text(low));
}

// A bf16 linear layer and GELU's tanh approximation, captured and imported as a model's are:
// gelu_epilogue makes the pair one matmul_bias_gelu, whose halves the forward and the backward read,
// and the joint graph computes the same loss and gradients (on the CPU the op runs ATen's product
// and the import's own GELU, so they are equal). The exact GELU and a float32 layer are left alone.
TEST_CASE("gelu_epilogue puts a linear layer's GELU into its GEMM and keeps the loss and gradients", "[unit][ir][aten][passes]") {
  const auto joint_of = [](const std::string& approximate, at::ScalarType dtype) {
    const auto options = torch::TensorOptions().dtype(dtype);
    const std::vector<at::Tensor> tensors = {torch::randn({3, 5, 16}, options), torch::randn({24, 16}, options), torch::randn({24}, options)};
    const std::vector<trainc::StepInput> described = {
        {"x", trainc::StepInputKind::batch, false}, {"w", trainc::StepInputKind::parameter, true}, {"b", trainc::StepInputKind::parameter, true}};
    const trainc::CapturedStep captured = trainc::capture_function(described, tensors, [&] {
      return at::gelu(at::linear(tensors[0], tensors[1], tensors[2]), approximate).to(torch::kFloat).pow(2).sum();
    });
    const trainc::ImportedGraph imported = trainc::import_graph(captured);
    REQUIRE(imported.breaks.empty());
    std::vector<at::Tensor> inputs = tensors;
    inputs.push_back(torch::full({}, 1.0, torch::kFloat));  // the loss's gradient
    return std::make_pair(trainc::differentiate(imported.graph, {false, true, true}), inputs);
  };
  const auto [joint, inputs] = joint_of("tanh", torch::kBFloat16);
  const Graph rewritten = gelu_epilogue(joint.graph);
  INFO(to_text(rewritten));
  std::map<Op, int> ops = op_counts(rewritten);
  CHECK(ops[Op::matmul_bias_gelu] == 1);
  CHECK(ops[Op::matmul_bias] == 0);
  CHECK(op_counts(joint.graph)[Op::mul] > ops[Op::mul]);  // the forward's GELU is not made; what its derivative reads stays
  CHECK(to_text(gelu_epilogue(rewritten)) == to_text(rewritten));  // no GELU under a linear layer is left
  const std::vector<at::Tensor> expected = execute_with_aten(joint.graph, inputs);
  const std::vector<at::Tensor> got = execute_with_aten(rewritten, inputs);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    CHECK(torch::allclose(got[i], expected[i], 1e-12, 1e-14));
  }
  for (const auto& [approximate, dtype] : {std::pair<std::string, at::ScalarType>{"none", torch::kBFloat16}, {"tanh", torch::kFloat}}) {
    INFO("gelu " << approximate << " in " << c10::toString(dtype));
    const Graph other = joint_of(approximate, dtype).first.graph;
    CHECK(to_text(gelu_epilogue(other)) == to_text(other));
  }
}

// An MLP, linear + tanh GELU + linear, differentiated: gelu_grad_epilogue makes the GELU's backward
// one matmul_gelu_grad with the product before it, after gelu_epilogue or on its own, and the joint
// graph computes the same loss and gradients. On the
// CPU the op's derivative is computed in another order than autodiff's, so a bf16 gradient can
// round the other way: within 2e-2 (a few bf16 steps of values of order 1).
TEST_CASE("gelu_grad_epilogue puts a GELU's backward into the GEMM before it", "[unit][ir][aten][passes]") {
  const auto joint_of = [](const std::string& approximate, at::ScalarType dtype) {
    const auto options = torch::TensorOptions().dtype(dtype);
    const std::vector<at::Tensor> tensors = {torch::randn({3, 5, 16}, options), torch::randn({24, 16}, options) * 0.5, torch::randn({24}, options),
                                             torch::randn({16, 24}, options) * 0.5, torch::randn({16}, options)};
    const std::vector<trainc::StepInput> described = {{"x", trainc::StepInputKind::batch, false},
                                                      {"w1", trainc::StepInputKind::parameter, true},
                                                      {"b1", trainc::StepInputKind::parameter, true},
                                                      {"w2", trainc::StepInputKind::parameter, true},
                                                      {"b2", trainc::StepInputKind::parameter, true}};
    const trainc::CapturedStep captured = trainc::capture_function(described, tensors, [&] {
      const at::Tensor hidden = at::gelu(at::linear(tensors[0], tensors[1], tensors[2]), approximate);
      return at::linear(hidden, tensors[3], tensors[4]).to(torch::kFloat).pow(2).sum();
    });
    const trainc::ImportedGraph imported = trainc::import_graph(captured);
    REQUIRE(imported.breaks.empty());
    std::vector<at::Tensor> inputs = tensors;
    inputs.push_back(torch::full({}, 1.0, torch::kFloat));  // the loss's gradient
    return std::make_pair(trainc::differentiate(imported.graph, {false, true, true, true, true}), inputs);
  };
  const auto [joint, inputs] = joint_of("tanh", torch::kBFloat16);
  const std::vector<at::Tensor> expected = execute_with_aten(joint.graph, inputs);
  for (const bool after_forward : {true, false}) {
    INFO((after_forward ? "after gelu_epilogue" : "on its own"));
    const Graph before = after_forward ? gelu_epilogue(joint.graph) : joint.graph;
    const Graph rewritten = gelu_grad_epilogue(before);
    INFO(to_text(rewritten));
    std::map<Op, int> ops = op_counts(rewritten);
    CHECK(ops[Op::matmul_gelu_grad] == 1);
    CHECK(op_counts(before)[Op::matmul] == ops[Op::matmul] + 1);  // the product GELU's backward read
    CHECK(op_counts(before)[Op::mul] > ops[Op::mul] + 8);         // the derivative is not computed
    CHECK(to_text(gelu_grad_epilogue(rewritten)) == to_text(rewritten));
    const std::vector<at::Tensor> got = execute_with_aten(rewritten, inputs);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i);
      CHECK(torch::allclose(got[i].to(torch::kDouble), expected[i].to(torch::kDouble), 2e-2, 2e-2));
    }
  }
  // The exact GELU's backward and a float32 MLP's are left alone.
  for (const auto& [approximate, dtype] : {std::pair<std::string, at::ScalarType>{"none", torch::kBFloat16}, {"tanh", torch::kFloat}}) {
    INFO("gelu " << approximate << " in " << c10::toString(dtype));
    const Graph other = joint_of(approximate, dtype).first.graph;
    CHECK(to_text(gelu_grad_epilogue(other)) == to_text(other));
  }
}

// GELU's tanh derivative times a gradient written out by hand, with `cubic` as the approximation's
// constant (0.044715), so that near misses can be built: the pass takes the expression for what it
// computes, whatever the order of its operations, and leaves a product whose gradient or
// expression something else reads, an expression that is not the derivative, widths the
// epilogue cannot take, and a layer smaller than the tiles asked for: the product's first operand
// a, viewed as [rows, width] ([4, 16], [300, 16], [300, 256] or [3, 100, 256]), makes 1, 3, 6 or 6
// tiles of 128 x 128, where the product makes 1, 3, 3 and 3.
TEST_CASE("gelu_grad_epilogue takes GELU's backward in any form and leaves near misses alone", "[unit][ir][aten][passes]") {
  struct Variant {
    const char* what;
    double cubic;
    int64_t width;
    bool output_gradient, output_root;
    bool rewritten;
    int64_t rows = 4, min_layer_tiles = 0;
    int64_t inner = 16;   // a's width
    int64_t batches = 1;  // a as [batches, rows / batches, inner]
  };
  for (const Variant& v : {Variant{"written out by hand", 0.044715, 24, false, false, true},
                           Variant{"another constant", 0.04, 24, false, false, false},
                           Variant{"a width not a multiple of 8", 0.044715, 20, false, false, false},
                           Variant{"the gradient's cast also an output", 0.044715, 24, true, false, false},
                           Variant{"the float32 derivative also an output", 0.044715, 24, false, true, false},
                           Variant{"a layer of 1 tile where 2 are asked for", 0.044715, 24, false, false, false, 4, 2},
                           Variant{"a layer of 1 tile where 1 is asked for", 0.044715, 24, false, false, true, 4, 1},
                           Variant{"a layer of 3 tiles where 4 are asked for", 0.044715, 24, false, false, false, 300, 4},
                           Variant{"a layer of 3 tiles where 3 are asked for", 0.044715, 24, false, false, true, 300, 3},
                           Variant{"a layer of 6 tiles where 7 are asked for", 0.044715, 24, false, false, false, 300, 7, 256},
                           Variant{"a layer of 6 tiles where 6 are asked for", 0.044715, 24, false, false, true, 300, 6, 256},
                           Variant{"a layer of 6 tiles in three batches where 7 are asked for", 0.044715, 24, false, false, false, 300, 7, 256, 3},
                           Variant{"a layer of 6 tiles in three batches where 6 are asked for", 0.044715, 24, false, false, true, 300, 6, 256, 3}}) {
    INFO(v.what);
    Graph g;
    const auto rows_by = [&](int64_t columns) {
      return v.batches == 1 ? std::vector<int64_t>{v.rows, columns} : std::vector<int64_t>{v.batches, v.rows / v.batches, columns};
    };
    const ValueId a = g.add_input("a", {DType::bf16, rows_by(v.inner)});
    const ValueId w = g.add_input("w", {DType::bf16, {v.inner, v.width}});
    const ValueId y = g.add_input("y", {DType::bf16, rows_by(v.width)});
    const auto constant = [&](double value) {
      Attributes scalar;
      scalar.scalar = value;
      return g.add(Op::constant, {}, scalar);
    };
    const auto cast = [&](ValueId value, DType dtype) {
      Attributes to;
      to.dtype = dtype;
      return g.add(Op::cast, {value}, to);
    };
    const auto mul = [&](ValueId l, ValueId r) { return g.add(Op::mul, {l, r}); };
    const auto add = [&](ValueId l, ValueId r) { return g.add(Op::add, {l, r}); };
    const ValueId gradient = cast(g.add(Op::matmul, {a, w}), DType::f32);
    const ValueId x = cast(y, DType::f32);
    const double c = std::sqrt(2.0 / M_PI);
    const ValueId t = g.add(Op::tanh, {mul(constant(c), add(x, mul(constant(v.cubic), mul(x, mul(x, x)))))});
    const ValueId slope = mul(mul(constant(0.5), x), g.add(Op::sub, {constant(1.0), mul(t, t)}));
    const ValueId derivative = add(mul(add(t, constant(1.0)), constant(0.5)), mul(slope, mul(constant(c), add(constant(1.0), mul(constant(3 * v.cubic), mul(x, x))))));
    const ValueId root = mul(derivative, gradient);
    g.mark_output(cast(root, DType::bf16));
    if (v.output_gradient) g.mark_output(gradient);
    if (v.output_root) g.mark_output(root);
    // Small: fewer 128 x 128 tiles than asked for.
    const auto small_layer = [&](int64_t rows, int64_t width) { return (rows + 127) / 128 * ((width + 127) / 128) < v.min_layer_tiles; };
    const Graph rewritten = gelu_grad_epilogue(g, small_layer);
    CHECK(op_counts(rewritten)[Op::matmul_gelu_grad] == (v.rewritten ? 1 : 0));
    if (!v.rewritten) {
      CHECK(to_text(rewritten) == to_text(g));
      continue;
    }
    CHECK(op_counts(rewritten)[Op::matmul] == 0);
    const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
    const std::vector<at::Tensor> inputs = {torch::randn(rows_by(v.inner), bf16), torch::randn({v.inner, v.width}, bf16) / std::sqrt(v.inner / 16.0),
                                            (torch::randn(rows_by(v.width)) * 2).to(torch::kBFloat16)};
    CHECK(torch::allclose(execute_with_aten(rewritten, inputs)[0].to(torch::kDouble), execute_with_aten(g, inputs)[0].to(torch::kDouble), 2e-2, 2e-2));
  }
}

// A position embedding, every row of its table in order (an arange as long as the table), imports
// as the table itself: no gather in the forward and no scatter of its gradient in the backward, and
// the joint graph's loss and gradients are eager autograd's. An arange shorter than the table stays
// an embedding.
TEST_CASE("an embedding of every row of its table in order is the table itself", "[unit][ir][aten]") {
  for (const int64_t positions : {5, 4}) {
    INFO(positions << " positions of a table of 5");
    const auto options = torch::TensorOptions().dtype(torch::kDouble);
    const std::vector<at::Tensor> tensors = {torch::randint(0, 6, {2, positions}), torch::randn({6, 3}, options), torch::randn({5, 3}, options)};
    const auto loss_of = [positions](const at::Tensor& tokens, const at::Tensor& wte, const at::Tensor& wpe) {
      return (at::embedding(wte, tokens) + at::embedding(wpe, at::arange(positions, tokens.options()))).pow(2).sum();
    };
    const std::vector<trainc::StepInput> described = {{"tokens", trainc::StepInputKind::batch, false},
                                                      {"wte", trainc::StepInputKind::parameter, true},
                                                      {"wpe", trainc::StepInputKind::parameter, true}};
    const trainc::CapturedStep captured =
        trainc::capture_function(described, tensors, [&] { return loss_of(tensors[0], tensors[1], tensors[2]); });
    const trainc::ImportedGraph imported = trainc::import_graph(captured);
    REQUIRE(imported.breaks.empty());
    const trainc::JointGraph joint = trainc::differentiate(imported.graph, {false, true, true});
    INFO(to_text(joint.graph));
    std::map<Op, int> ops = op_counts(joint.graph);
    CHECK(ops[Op::embedding] == (positions == 5 ? 1 : 2));
    CHECK(ops[Op::embedding_grad] == (positions == 5 ? 1 : 2));

    std::vector<at::Tensor> inputs = tensors;
    inputs.push_back(torch::full({}, 1.0, options));  // the loss's gradient
    const std::vector<at::Tensor> got = execute_with_aten(joint.graph, inputs);
    const at::Tensor wte = tensors[1].clone().requires_grad_(true), wpe = tensors[2].clone().requires_grad_(true);
    const at::Tensor loss = loss_of(tensors[0], wte, wpe);
    loss.backward();
    REQUIRE(got.size() == 3);
    CHECK(torch::allclose(got[0], loss.detach(), 1e-12, 1e-12));
    CHECK(torch::allclose(got[1], wte.grad(), 1e-12, 1e-12));
    CHECK(torch::allclose(got[2], wpe.grad(), 1e-12, 1e-12));
  }
}
