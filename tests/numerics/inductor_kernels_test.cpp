// Generated kernels against ATen, op by op (on the CPU; the CUDA test binary runs the same on the
// GPU): one graph per dtype holds a row for every op a
// kernel can compute (each pointwise op, both reductions, broadcasts, strided and broadcast reads
// through views, casts), compiled once and run on fresh random inputs; every output must match
// the same graph run through ATen.
// Tolerances, relative to the largest magnitude of the reference: float64 1e-12, float32 1e-5,
// bf16 2e-2 (kernels keep float intermediates where ATen rounds each op to bf16).
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <algorithm>

#include "support/kernel_cache.h"
#include "support/numerics.h"
#include "trainc/compile/backends/inductor.h"
#include "trainc/compile/runtime/aten_executor.h"
#include "trainc/compile/runtime/parameter_casts.h"
#include "trainc/compile/runtime/parameter_shadows.h"

using namespace trainc;
using namespace trainc::ir;
using trainc::test::relative_error;
using trainc::test::test_device;

namespace {

Attributes ints(std::vector<int64_t> values, bool keepdim = false) {
  Attributes attrs;
  attrs.ints = std::move(values);
  attrs.keepdim = keepdim;
  return attrs;
}

// Runs `program` (compiled from `graph`) and ATen on `inputs`: each output, labelled by `rows`,
// within `tolerance` of ATen's relative to its largest magnitude.
void check_against_aten(const Graph& graph, const std::vector<std::string>& rows, FusedProgram& program, const std::vector<at::Tensor>& inputs,
                        const std::string& run, double tolerance) {
  const std::vector<at::Tensor> expected = execute_with_aten(graph, inputs);
  const std::vector<at::Tensor> got = program.run(inputs);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(rows[i] << " in " << run);
    REQUIRE(got[i].sizes() == expected[i].sizes());
    REQUIRE(got[i].scalar_type() == expected[i].scalar_type());
    CHECK(relative_error(got[i].to(torch::kDouble), expected[i].to(torch::kDouble)) <= tolerance);
  }
}

struct OpGraph {
  Graph graph;
  std::vector<std::string> rows;  // one label per output
};

// `rows` rows of `width` columns: 37 keeps the CUDA kernels one element a thread, 40 moves 8 at a
// time; from 1,024 rows on, a CUDA row kernel whose row a warp covers runs a row a warp (warp_rows):
// 1,025 rows leave the last block's warps but one without a row.
OpGraph every_kernel_op(DType dtype, int64_t width, int64_t rows = 6) {
  OpGraph g;
  Graph& graph = g.graph;
  const TensorType full{dtype, {rows, width}};
  const ValueId x = graph.add_input("x", full);
  const ValueId y = graph.add_input("y", full);
  const ValueId positive = graph.add_input("positive", full);
  const ValueId mask = graph.add_input("mask", {DType::b8, {rows, width}});
  const ValueId column = graph.add_input("column", {dtype, {width}});
  const ValueId row = graph.add_input("row", {dtype, {rows, 1}});
  const ValueId square = graph.add_input("square", {dtype, {width, width}});
  const auto out = [&](const std::string& label, ValueId value) {
    graph.mark_output(value);
    g.rows.push_back(label);
  };
  for (Op op : {Op::neg, Op::exp, Op::tanh, Op::erf, Op::relu, Op::sigmoid, Op::detach}) out(op_name(op), graph.add(op, {x}));
  for (Op op : {Op::log, Op::sqrt, Op::rsqrt, Op::reciprocal}) out(op_name(op), graph.add(op, {positive}));
  for (Op op : {Op::add, Op::sub, Op::mul, Op::maximum}) out(op_name(op), graph.add(op, {x, y}));
  out("div", graph.add(Op::div, {x, positive}));
  out("pow", graph.add(Op::pow, {positive, y}));
  Attributes two;
  two.scalar = 2.0;
  two.dtype = dtype;
  out("pow 2", graph.add(Op::pow, {x, graph.add(Op::constant, {}, two)}));
  out("gt as float", graph.add(Op::where, {graph.add(Op::gt, {x, y}), x, y}));
  out("eq as float", graph.add(Op::where, {graph.add(Op::eq, {graph.add(Op::relu, {x}), x}), y, x}));
  out("where", graph.add(Op::where, {mask, x, y}));
  out("broadcast column", graph.add(Op::mul, {x, column}));
  out("broadcast row", graph.add(Op::sub, {x, row}));
  Attributes to_f64, to_i64, to_b8;
  to_f64.dtype = DType::f64;
  to_i64.dtype = DType::i64;
  to_b8.dtype = DType::b8;
  out("cast to f64", graph.add(Op::cast, {x}, to_f64));
  out("cast to i64 and back", graph.add(Op::cast, {graph.add(Op::cast, {graph.add(Op::add, {x, x})}, to_i64)}, [&] {
        Attributes back;
        back.dtype = dtype;
        return back;
      }()));
  out("cast to b8", graph.add(Op::where, {graph.add(Op::cast, {graph.add(Op::relu, {x})}, to_b8), x, y}));
  Attributes iota = ints({width});
  iota.dtype = dtype;
  out("iota", graph.add(Op::mul, {x, graph.add(Op::iota, {}, iota)}));
  out("sum of rows", graph.add(Op::sum, {graph.add(Op::mul, {x, y})}, ints({1})));
  out("amax of rows, keepdim", graph.add(Op::amax, {graph.add(Op::exp, {x})}, ints({-1}, true)));
  // Positive addends: a sum of signed ones can cancel to near zero, where any change of
  // summation order (a GPU block's against ATen's) gives a large relative error.
  out("sum of everything", graph.add(Op::sum, {positive}, ints({0, 1})));
  const ValueId mean = graph.add(Op::sum, {x}, ints({1}, true));
  out("reduction then pointwise", graph.add(Op::mul, {graph.add(Op::sub, {x, mean}), graph.add(Op::exp, {y})}));
  out("sum of a permuted view", graph.add(Op::sum, {graph.add(Op::permute, {square}, ints({1, 0}))}, ints({1})));
  out("transposed plus slice", graph.add(Op::add, {graph.add(Op::permute, {square}, ints({1, 0})), graph.add(Op::slice, {square}, ints({0, 0, width, 1}))}));
  out("expanded row", graph.add(Op::mul, {graph.add(Op::expand, {row}, ints({rows, width})), y}));
  return g;
}

// `tuner`: max-autotune's, which on a GPU runs each kernel under the launch shape it measures
// fastest. Returns the launch shape each kernel ran under (FusedProgram::chosen_launch_shapes).
std::vector<int> check_dtype(DType dtype, double tolerance, int64_t width, std::shared_ptr<Autotuner> tuner = nullptr, int64_t rows = 6) {
  const OpGraph g = every_kernel_op(dtype, width, rows);
  verify(g.graph);
  InductorReport report;
  const auto program = build_fused_program(g.graph, test::test_compiler_settings(), report, test_device(), tuner);
  CHECK(report.kernels > 0);
  CHECK(report.aten_calls == 0);  // every op here, casts into bf16 of computed values included, is a kernel's
  const at::ScalarType type = to_scalar_type(dtype);
  const auto options = torch::TensorOptions().dtype(type).device(test_device());
  const auto rn = [&](std::vector<int64_t> shape) { return torch::randn(shape, options); };
  const auto mask = [&] { return torch::rand({rows, width}, options.dtype(torch::kFloat)) > 0.5; };
  const auto fresh_inputs = [&] {
    return std::vector<at::Tensor>{rn({rows, width}), rn({rows, width}), rn({rows, width}).abs() + 0.5, mask(),
                                   rn({width}),       rn({rows, 1}),     rn({width, width})};
  };
  const auto check_run = [&](const std::vector<at::Tensor>& inputs, const std::string& run) {
    check_against_aten(g.graph, g.rows, *program, inputs, std::string(dtype_name(dtype)) + ", rows of " + std::to_string(width) + ", " + run,
                       tolerance);
  };
  const std::string shape = std::to_string(rows) + " rows, ";
  check_run(fresh_inputs(), shape + "first run");
  // A second run reuses the arena and gives the same results for new inputs.
  check_run(fresh_inputs(), shape + "second run");
  // x as a contiguous view one element into its storage: a kernel that loads 16 bytes at a time
  // must not read it at a misaligned address.
  std::vector<at::Tensor> shifted = fresh_inputs();
  shifted[0] = rn({rows * width + 1}).narrow(0, 1, rows * width).view({rows, width});
  check_run(shifted, shape + "x misaligned");
  return program->chosen_launch_shapes();
}

}  // namespace

TEST_CASE("every op a generated kernel computes matches ATen: float64, float32, bf16", "[numerics][inductor]") {
  for (const int64_t rows : {6, 1025}) {
    for (const int64_t width : {37, 40}) {
      check_dtype(DType::f64, 1e-12, width, nullptr, rows);
      check_dtype(DType::f32, 1e-5, width, nullptr, rows);
      check_dtype(DType::bf16, 2e-2, width, nullptr, rows);
    }
  }
}

// Measurements made up so that the first launch shape measured wins every choice (times that grow),
// or the last one (times that shrink). The narrow shape is always measured first; the wide one
// last unless its code is another's (a reduction block already at 1024 threads). Rows of 1024 give
// reductions a block to halve. On the CPU there is one launch: nothing is measured.
TEST_CASE("generated kernels match ATen under every launch shape max-autotune measures", "[numerics][inductor][autotune]") {
  for (const bool first_wins : {true, false}) {
    INFO((first_wins ? "the narrowest shape wins" : "the widest shape wins"));
    int calls = 0;
    auto tuner = std::make_shared<Autotuner>(TuningCache(""), [&](const std::function<void()>& work) {
      work();
      ++calls;
      return first_wins ? calls : 1.0 / calls;
    });
    std::vector<int> chosen;
    // (Rows of 37 and 40 again over 1,025 rows: a row a warp at the default shape, a block a row
    // under the widest.)
    for (const auto& [width, rows] : {std::pair<int64_t, int64_t>{37, 6}, {40, 6}, {1024, 6}, {37, 1025}, {40, 1025}}) {
      for (const auto& [dtype, tolerance] : {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 2e-2}}) {
        const std::vector<int> shapes = check_dtype(dtype, tolerance, width, tuner, rows);
        chosen.insert(chosen.end(), shapes.begin(), shapes.end());
      }
    }
    const auto ran_under = [&](int shape) { return std::count(chosen.begin(), chosen.end(), shape); };
    if (test_device().is_cuda()) {
      CHECK(ran_under(first_wins ? 0 : 2) > 0);
      CHECK(ran_under(first_wins ? 1 : 0) == 0);
      if (first_wins) CHECK(ran_under(2) == 0);
    } else {
      CHECK(ran_under(-1) == static_cast<std::ptrdiff_t>(chosen.size()));
    }
    const TuningStats stats = tuner->take_stats();
    if (test_device().is_cuda()) {
      CHECK(stats.measured > 0);
    } else {
      CHECK(stats.measured == 0);
    }
  }
}

namespace {

// Sums over leading dimensions of values a kernel computes (parameter gradients): on a GPU they
// are the kernel's column members, whose blocks' partial sums a second kernel adds up; on the CPU
// they stay ATen's. Enough rows that each block of the GPU kernel takes several (a row a warp:
// eight, and over 8,192 rows several a warp).
struct ColumnSumGraph {
  Graph graph;
  std::vector<std::string> rows;
  int sums = 0;
};

ColumnSumGraph column_sums_graph(DType dtype, int64_t width, int64_t rows) {
  ColumnSumGraph g;
  Graph& graph = g.graph;
  const ValueId x = graph.add_input("x", {dtype, {rows, width}});
  const ValueId y = graph.add_input("y", {dtype, {rows, width}});
  const ValueId z = graph.add_input("z", {dtype, {3, rows / 3, width}});
  const auto out = [&](const std::string& label, ValueId value) {
    graph.mark_output(value);
    g.rows.push_back(label);
  };
  // A float32 sum of a float32 value, a float32 sum of a bf16 value (sum_to_float).
  const auto column_sum = [&](ValueId value, std::vector<int64_t> axes) {
    ++g.sums;
    return graph.add(dtype == DType::bf16 ? Op::sum_to_float : Op::sum, {value}, ints(std::move(axes)));
  };
  const ValueId product = graph.add(Op::mul, {x, y});
  out("product", product);
  out("column sums of a pointwise kernel's value", column_sum(product, {0}));
  // x minus its row's mean (not its sum: ATen rounds a bf16 row sum of ~6 to 8 bits, an error each
  // centered value of a row shares, which 3000 rows add up to more than bf16's tolerance).
  Attributes row_length;
  row_length.scalar = static_cast<double>(width);
  row_length.dtype = dtype;
  const ValueId mean = graph.add(Op::div, {graph.add(Op::sum, {x}, ints({1}, true)), graph.add(Op::constant, {}, row_length)});
  const ValueId centered = graph.add(Op::sub, {x, mean});
  out("centered rows", centered);
  out("column sums in a row reduction's kernel", column_sum(graph.add(Op::mul, {centered, y}), {0}));
  out("a second column sum in the same kernel", column_sum(centered, {0}));
  out("column sums of an input a kernel loads", column_sum(x, {0}));
  out("column sums over two leading dimensions", column_sum(graph.add(Op::exp, {z}), {0, 1}));
  return g;
}

void check_column_sums(DType dtype, int64_t width, double tolerance, std::shared_ptr<Autotuner> tuner = nullptr, int64_t rows = 3000) {
  const ColumnSumGraph g = column_sums_graph(dtype, width, rows);
  verify(g.graph);
  InductorReport report;
  const auto program = build_fused_program(g.graph, test::test_compiler_settings(), report, test_device(), tuner);
  // On a GPU every sum is computed inside a kernel; on the CPU each is an ATen call.
  CHECK(report.aten_calls == (test_device().is_cuda() ? 0 : g.sums));
  const auto options = torch::TensorOptions().dtype(to_scalar_type(dtype)).device(test_device());
  for (const std::string run : {"first run", "second run"}) {
    const std::vector<at::Tensor> inputs = {torch::randn({rows, width}, options), torch::randn({rows, width}, options),
                                            torch::randn({3, rows / 3, width}, options)};
    check_against_aten(g.graph, g.rows, *program, inputs,
                       std::string(dtype_name(dtype)) + ", " + std::to_string(rows) + " rows of " + std::to_string(width) + ", " + run, tolerance);
  }
}

}  // namespace

// Tolerances relative to the largest magnitude: float32 1e-5 (sums of 3000 in another order);
// bf16 2e-2 as above (kernels keep float intermediates where ATen rounds each op to bf16).
TEST_CASE("sums over leading dimensions inside generated kernels match ATen", "[numerics][inductor]") {
  // 30 columns: a row a warp, a column a lane (not a multiple of 8: one element a thread), as 40
  // takes a group of 8 a lane; 37 takes a two-warp block a row.
  for (const int64_t width : {40, 37, 30}) {
    check_column_sums(DType::f32, width, 1e-5);
    check_column_sums(DType::bf16, width, 2e-2);
  }
  // 9,000 rows: more than 1,024 blocks of eight, so each warp adds several rows into its sums.
  check_column_sums(DType::f32, 40, 1e-5, nullptr, 9000);
  check_column_sums(DType::bf16, 30, 2e-2, nullptr, 9000);
  // Under max-autotune's launch shapes (the narrowest, then the widest measured fastest): the
  // kernels' blocks change, their finishes and workspace do not.
  for (const bool first_wins : {true, false}) {
    int calls = 0;
    auto tuner = std::make_shared<Autotuner>(TuningCache(""), [&](const std::function<void()>& work) {
      work();
      ++calls;
      return first_wins ? calls : 1.0 / calls;
    });
    check_column_sums(DType::f32, 40, 1e-5, tuner);
    check_column_sums(DType::bf16, 37, 2e-2, tuner);
  }
}

TEST_CASE("casts of float32 inputs into bf16 and f16 run together before the first step and equal ATen's, strides included",
          "[numerics][inductor]") {
  //   w16t = cast(permute(w)) -> matmul(x, w16t)    (autocast's weight, as the GEMM reads it)
  //   cast(b), cast(reshape(w)), cast(v) with v passed as a transposed (non-contiguous) view,
  //   cast(u) into f16 (a second target dtype), and a large cast the program does not return
  Graph graph;
  const ValueId w = graph.add_input("w", {DType::f32, {5, 8}});
  const ValueId b = graph.add_input("b", {DType::f32, {5}});
  const ValueId x = graph.add_input("x", {DType::bf16, {6, 8}});
  const ValueId v = graph.add_input("v", {DType::f32, {8, 5}});
  const ValueId u = graph.add_input("u", {DType::f32, {3, 8}});
  const ValueId big = graph.add_input("big", {DType::f32, {1024, 520}});
  Attributes to_bf16, to_f16;
  to_bf16.dtype = DType::bf16;
  to_f16.dtype = DType::f16;
  const ValueId w16t = graph.add(Op::cast, {graph.add(Op::permute, {w}, ints({1, 0}))}, to_bf16);
  graph.mark_output(graph.add(Op::matmul, {x, w16t}));
  graph.mark_output(w16t);
  graph.mark_output(graph.add(Op::cast, {b}, to_bf16));
  graph.mark_output(graph.add(Op::cast, {graph.add(Op::reshape, {w}, ints({40}))}, to_bf16));
  graph.mark_output(graph.add(Op::cast, {v}, to_bf16));
  graph.mark_output(graph.add(Op::cast, {u}, to_f16));
  const ValueId big16 = graph.add(Op::cast, {big}, to_bf16);  // 1.07 MB, read by the sum only
  graph.mark_output(graph.add(Op::sum, {big16}, ints({1})));
  verify(graph);
  InductorReport report;
  const auto program = build_fused_program(graph, test::test_compiler_settings(), report, test_device());
  const auto options = torch::TensorOptions().device(test_device());
  const auto fresh_inputs = [&] {
    return std::vector<at::Tensor>{torch::randn({5, 8}, options),     torch::randn({5}, options),
                                   torch::randn({6, 8}, options).to(torch::kBFloat16), torch::randn({5, 8}, options).t(),
                                   torch::randn({3, 8}, options),     torch::rand({1024, 520}, options)};
  };
  for (int run = 0; run < 2; ++run) {
    const std::vector<at::Tensor> inputs = fresh_inputs();
    const std::vector<at::Tensor> expected = execute_with_aten(graph, inputs);
    const std::vector<at::Tensor> got = program->run(inputs);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i + 1 < got.size(); ++i) {
      INFO("output " << i << ", run " << run);
      CHECK(got[i].scalar_type() == expected[i].scalar_type());
      CHECK(got[i].strides() == expected[i].strides());
      CHECK(torch::equal(got[i], expected[i]));
    }
    CHECK(relative_error(got.back().to(torch::kDouble), expected.back().to(torch::kDouble)) <= 2e-2);  // a bf16 kernel's sum
  }
  // Which casts are taken: those of an input through permutes and reshapes, returned or small;
  // not the large one the program does not return, nor one of a computed value.
  std::vector<ValueId> aten_values;
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (graph.node(id).op == Op::cast || graph.node(id).op == Op::matmul) aten_values.push_back(id);
  }
  const ParameterCasts casts(graph, aten_values);
  CHECK(casts.size() == 5);
  // Run on their own: every taken cast but the one of a non-contiguous input gets its value.
  std::vector<at::Tensor> values(static_cast<std::size_t>(graph.size()));
  const std::vector<at::Tensor> inputs = fresh_inputs();
  for (const ValueId input : {w, b, x, v, u, big}) values[static_cast<std::size_t>(input)] = inputs[static_cast<std::size_t>(input)];
  const std::vector<ValueId> computed = casts.run(graph, values, test_device());
  CHECK(computed.size() == 4);
  const at::Tensor& transposed = values[static_cast<std::size_t>(w16t)];
  REQUIRE(transposed.defined());
  CHECK(transposed.strides() == inputs[0].t().to(torch::kBFloat16).strides());
  CHECK(torch::equal(transposed, inputs[0].t().to(torch::kBFloat16)));
  CHECK(torch::equal(values[static_cast<std::size_t>(graph.outputs()[5])], inputs[4].to(torch::kHalf)));
  CHECK(!values[static_cast<std::size_t>(graph.outputs()[4])].defined());
  CHECK(!values[static_cast<std::size_t>(big16)].defined());
  Graph computed_cast;
  const ValueId sum = computed_cast.add(Op::add, {computed_cast.add_input("a", {DType::f32, {4}}), computed_cast.add_input("c", {DType::f32, {4}})});
  computed_cast.mark_output(computed_cast.add(Op::cast, {sum}, to_bf16));
  CHECK(ParameterCasts(computed_cast, {computed_cast.outputs()[0]}).size() == 0);
}

TEST_CASE("casts of tracked parameters read their bf16 shadows, cast again only when stale", "[numerics][inductor]") {
  //   cast(permute(w)) -> matmul(x, .), and a head's weight cast(table) -> linear_cross_entropy, whose
  //   shadow lives in a buffer padded to the head's 128 rows (70 rounded up to 64s)
  Graph graph;
  const ValueId w = graph.add_input("w", {DType::f32, {5, 8}});
  const ValueId table = graph.add_input("table", {DType::f32, {70, 8}});
  const ValueId x = graph.add_input("x", {DType::bf16, {6, 8}});
  const ValueId targets = graph.add_input("targets", {DType::i64, {6}});
  Attributes to_bf16, head;
  to_bf16.dtype = DType::bf16;
  head.dtype = DType::f32;
  const ValueId w16t = graph.add(Op::cast, {graph.add(Op::permute, {w}, ints({1, 0}))}, to_bf16);
  const ValueId table16 = graph.add(Op::cast, {table}, to_bf16);
  graph.mark_output(graph.add(Op::matmul, {x, w16t}));
  graph.mark_output(w16t);
  graph.mark_output(table16);
  graph.mark_output(graph.add(Op::linear_cross_entropy, {x, table16, targets}, head));
  verify(graph);
  InductorReport report;
  const auto program = build_fused_program(graph, test::test_compiler_settings(), report, test_device());
  const auto options = torch::TensorOptions().device(test_device());
  const at::Tensor weight = torch::randn({5, 8}, options), table_weight = torch::randn({70, 8}, options);
  ParameterShadows& shadows = ParameterShadows::instance();
  shadows.track({weight, table_weight});
  const auto check_run = [&](const std::string& when) {
    INFO(when);
    const std::vector<at::Tensor> inputs = {weight, table_weight, torch::randn({6, 8}, options).to(torch::kBFloat16),
                                            torch::randint(0, 70, {6}, options.dtype(torch::kLong))};
    const std::vector<at::Tensor> expected = execute_with_aten(graph, inputs);
    const std::vector<at::Tensor> got = program->run(inputs);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i);
      CHECK(got[i].strides() == expected[i].strides());
      CHECK(torch::equal(got[i], expected[i]));
    }
    return got;
  };
  // The first run makes the shadows and casts into them: the returned casts are views of them.
  std::vector<at::Tensor> got = check_run("first run");
  const std::vector<at::Tensor> made = shadows.shadows_to_update({weight, table_weight});
  REQUIRE(made[0].defined());
  REQUIRE(made[1].defined());
  CHECK(got[1].data_ptr() == made[0].data_ptr());
  CHECK(got[2].data_ptr() == made[1].data_ptr());
  const at::Tensor base = shadows.padded_base(made[1], 128);
  REQUIRE(base.defined());
  CHECK(base.sizes() == at::IntArrayRef({128, 8}));
  CHECK(torch::equal(base.narrow(0, 70, 58), torch::zeros({58, 8}, options.dtype(torch::kBFloat16))));
  CHECK_FALSE(shadows.padded_base(made[1], 64).defined());
  CHECK_FALSE(shadows.padded_base(made[1].narrow(0, 0, 69), 128).defined());
  CHECK_FALSE(shadows.padded_base(made[0], 64).defined());
  // A write in place advances the parameter's version: its shadow is cast again.
  {
    torch::NoGradGuard no_grad;
    weight.mul_(-2.0);
    table_weight.add_(0.5);
  }
  check_run("after writes in place");
  // A write its version counter does not see (through .data()) needs mark_stale ...
  weight.data().add_(1.0);
  got = program->run({weight, table_weight, torch::randn({6, 8}, options).to(torch::kBFloat16),
                      torch::randint(0, 70, {6}, options.dtype(torch::kLong))});
  CHECK_FALSE(torch::equal(got[1], weight.t().to(torch::kBFloat16)));  // the shadow as it was: fresh by its record
  shadows.mark_stale({weight});
  check_run("marked stale");
  // ... and an update that writes parameter and shadow together reports it: the shadow is read
  // as written, not cast again (here written different from the parameter, to tell).
  weight.data().add_(1.0);
  made[0].copy_(weight.to(torch::kBFloat16) + 1.0);
  shadows.updated({weight});
  got = program->run({weight, table_weight, torch::randn({6, 8}, options).to(torch::kBFloat16),
                      torch::randint(0, 70, {6}, options.dtype(torch::kLong))});
  CHECK(torch::equal(got[1], (weight.to(torch::kBFloat16) + 1.0).t()));
  // An untracked parameter's cast is its own tensor.
  const at::Tensor other = torch::randn({5, 8}, options);
  CHECK_FALSE(shadows.tracked(other));
  got = program->run({other, table_weight, torch::randn({6, 8}, options).to(torch::kBFloat16),
                      torch::randint(0, 70, {6}, options.dtype(torch::kLong))});
  CHECK(got[1].data_ptr() != made[0].data_ptr());
  CHECK(torch::equal(got[1], other.t().to(torch::kBFloat16)));
  // Nor is an untracked one's (the optimizer that tracked it gone).
  shadows.untrack({table_weight});
  CHECK_FALSE(shadows.tracked(table_weight));
  shadows.mark_stale({weight});  // its shadow as written above differs from it
  got = check_run("table untracked");
  CHECK(got[2].data_ptr() != made[1].data_ptr());
}
