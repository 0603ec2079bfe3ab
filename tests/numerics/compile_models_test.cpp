// Every zoo model under the aot_eager and inductor backends against eager: the loss, every parameter gradient
// and the updated buffers of one step (dropout on, same generator seed), fresh random weights and
// batches each run. Float32 1e-5 relative to the largest magnitude (1e-4 for models with
// normalization, whose decomposed sums add in another order); bf16 autocast 2e-2 from eager, or
// within 2e-2 of the float32 gradient beyond twice eager's own bf16 distance from it (bf16
// rounding differences amplified by long sums and relu kinks). Float32 gradients that differ are
// compared again with the batch's values moved off a max-pool near-tie (check_float32). Also the
// runtime's guard: a new input signature compiles again, up to the limit, then runs eagerly.
// The CUDA test binary runs the inductor case again on the GPU (support/numerics.h), with dropout
// off: CUDA's fused dropout draws its masks in another order than the compiled step's bernoulli,
// so the two runs would not see the same masks.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>

#include "trainc/compat/torch_compat.h"
#include "support/kernel_cache.h"
#include "support/numerics.h"
#include "trainc/compile/planner.h"
#include "trainc/models/model.h"
#include "trainc/train/loss.h"

using namespace trainc;
using trainc::test::relative_error;
using trainc::test::test_device;
using trainc::test::test_seed;

namespace {

struct ZooCase {
  std::string name;
  ModelConfig config;
  ModelInputs inputs;
  std::function<std::pair<torch::Tensor, torch::Tensor>()> batch;
  double tolerance;
};

std::vector<ZooCase> zoo() {
  ModelConfig mlp;
  mlp.name = "mlp";
  mlp.input_size = 12;
  mlp.hidden_sizes = {16, 8};
  mlp.num_classes = 5;
  mlp.dropout = 0.2;
  ModelConfig cnn;
  cnn.name = "cnn";
  cnn.channels = {4, 8};
  cnn.num_classes = 10;
  cnn.dropout = 0.2;
  ModelConfig gpt;
  gpt.name = "gpt";
  gpt.n_layer = 2;
  gpt.n_head = 2;
  gpt.n_embd = 16;
  gpt.block_size = 8;
  gpt.vocab_size = 50;
  gpt.dropout = 0.1;
  if (test_device().is_cuda()) mlp.dropout = cnn.dropout = gpt.dropout = 0.0;
  return {
      {"mlp", mlp, {false, {12}}, [] { return std::make_pair(torch::randn({6, 12}), torch::randint(0, 5, {6})); }, 1e-5},
      {"cnn", cnn, {false, {1, 28, 28}}, [] { return std::make_pair(torch::randn({4, 1, 28, 28}), torch::randint(0, 10, {4})); }, 1e-4},
      {"gpt", gpt, {true, {8}}, [] { return std::make_pair(torch::randint(0, 50, {3, 8}), torch::randint(0, 50, {3, 8})); }, 1e-4},
  };
}

LossFunction loss_of(Model& model, bool bf16) {
  return [&model, bf16](const torch::Tensor& inputs, const torch::Tensor& targets) {
    torch::Tensor logits;
    {
      AutocastScope autocast(test_device().type(), bf16, at::kBFloat16);
      logits = model.forward(inputs);
    }
    return cross_entropy_loss(logits, targets, 0.1);
  };
}

// One step compiled against the same step eagerly. Returns whether every float32 gradient is
// within `tolerance` of eager's; with `check_float32_gradients`, they are also checked here. With
// a `perturbation`, each input of the batch (floating) moves by that times a normal draw of its own.
bool check_model(const ZooCase& c, bool bf16, double tolerance, const std::string& backend, uint64_t seed, double perturbation = 0.0,
                 bool check_float32_gradients = true) {
  INFO("seed " << seed << " (TRAINC_TEST_SEED replays it)" << (perturbation > 0 ? ", the batch perturbed" : ""));
  torch::manual_seed(seed + 2);
  auto [cpu_inputs, cpu_targets] = c.batch();
  if (perturbation > 0) {
    torch::manual_seed(seed + 3);
    cpu_inputs = cpu_inputs + perturbation * torch::randn_like(cpu_inputs);
  }
  const torch::Tensor inputs = cpu_inputs.to(test_device()), targets = cpu_targets.to(test_device());
  torch::manual_seed(seed);
  auto eager = make_model(c.config, c.inputs, false);
  torch::manual_seed(seed);
  auto compiled = make_model(c.config, c.inputs, false);
  eager->to(test_device());
  compiled->to(test_device());
  eager->set_training(true);
  compiled->set_training(true);

  torch::manual_seed(seed + 1);
  const torch::Tensor eager_loss = loss_of(*eager, bf16)(inputs, targets);
  eager_loss.backward();
  // bf16: the same step in float32, to measure how far eager's own bf16 gradients are from it.
  std::vector<torch::Tensor> float32_grads;
  if (bf16) {
    torch::manual_seed(seed);
    auto reference = make_model(c.config, c.inputs, false);
    reference->to(test_device());
    reference->set_training(true);
    torch::manual_seed(seed + 1);
    loss_of(*reference, false)(inputs, targets).backward();
    for (const auto& parameter : reference->named_parameters()) float32_grads.push_back(parameter.second.grad());
  }

  std::vector<CompileEvent> events;
  CompileOptions options;
  options.backend = backend;
  if (backend == "inductor") options.compiler = test::test_compiler_settings();
  StepCompiler compiler(*compiled, loss_of(*compiled, bf16), options, [&](const CompileEvent& e) { events.push_back(e); },
                        [](const std::string& warning) { FAIL(warning); });
  torch::manual_seed(seed + 1);
  const torch::Tensor loss = compiler.run(inputs, targets, GradScale(1.0));
  REQUIRE(events.size() == 1);
  CHECK(events[0].outcome == "compiled");

  CHECK(relative_error(loss, eager_loss.detach()) <= tolerance);
  const auto eager_parameters = eager->named_parameters();
  const auto compiled_parameters = compiled->named_parameters();
  bool float32_gradients_match = true;
  for (std::size_t i = 0; i < eager_parameters.size(); ++i) {
    INFO(eager_parameters[i].first);
    REQUIRE(compiled_parameters[i].second.grad().defined());
    const auto& got = compiled_parameters[i].second.grad();
    const auto& expected = eager_parameters[i].second.grad();
    const double error = relative_error(got, expected);
    if (!bf16) {
      float32_gradients_match = float32_gradients_match && error <= tolerance;
      if (check_float32_gradients) CHECK(error <= tolerance);
      continue;
    }
    // Within 2e-2 of eager's bf16 gradient; or, where bf16 rounding is amplified beyond that (a
    // long sum with cancellation, a relu kink crossed by a rounding difference), within 2e-2 of the
    // float32 gradient beyond twice eager's own bf16 distance from it.
    const double eager_distance = test::normwise_relative_error(expected, float32_grads[i]);
    const double compiled_distance = test::normwise_relative_error(got, float32_grads[i]);
    INFO("bf16: " << error << " from eager; from float32: compiled " << compiled_distance << ", eager " << eager_distance);
    CHECK((error <= tolerance || compiled_distance <= 2 * eager_distance + tolerance));
  }
  const auto eager_buffers = eager->named_buffers();
  const auto compiled_buffers = compiled->named_buffers();
  for (std::size_t i = 0; i < eager_buffers.size(); ++i) {
    INFO(eager_buffers[i].first);
    CHECK(relative_error(compiled_buffers[i].second.to(torch::kDouble), eager_buffers[i].second.to(torch::kDouble)) <= tolerance);
  }
  return float32_gradients_match;
}

// float32: a max-pool window whose two largest values lie within rounding of each other can take
// its argmax differently under the compiled step's rounding (batch norm decomposed), and send the
// gradient to another input patch: another subgradient, not a wrong one (seed 344708930 did so
// for the cnn's first convolution, whose gradient then differed by 2e-2 where eager's was 2e-6
// from float64). Gradients that differ are compared again with each input moved by about 2^-10
// (a scale would not do: batch norm takes it out), which moves such a tie's gap a thousand times
// past rounding; a gradient computed wrongly differs there too. Integer inputs (token ids) have
// no such tie to move off, and are compared once.
void check_float32(const ZooCase& c, const std::string& backend) {
  const uint64_t seed = test_seed();
  torch::manual_seed(seed + 2);
  const bool floating_inputs = c.batch().first.is_floating_point();
  if (check_model(c, false, c.tolerance, backend, seed, 0.0, /*check_float32_gradients=*/!floating_inputs) || !floating_inputs) return;
  WARN(c.name << " float32, seed " << seed << ": gradients differ; compared again with the batch perturbed by 2^-10");
  check_model(c, false, c.tolerance, backend, seed, std::ldexp(1.0, -10));
}

}  // namespace

TEST_CASE("every zoo model under aot_eager: loss, gradients and buffers match eager", "[numerics][compile]") {
  for (const ZooCase& c : zoo()) {
    SECTION(c.name + " float32") { check_float32(c, "aot_eager"); }
    SECTION(c.name + " bf16 autocast") { check_model(c, true, 2e-2, "aot_eager", test_seed()); }
  }
}

TEST_CASE("every zoo model under inductor: loss, gradients and buffers match eager", "[numerics][inductor]") {
  for (const ZooCase& c : zoo()) {
    SECTION(c.name + " float32") { check_float32(c, "inductor"); }
    SECTION(c.name + " bf16 autocast") { check_model(c, true, 2e-2, "inductor", test_seed()); }
  }
}

TEST_CASE("a new input signature compiles again, up to the limit, then runs eagerly", "[numerics][compile]") {
  ModelConfig config;
  config.name = "mlp";
  config.input_size = 4;
  config.hidden_sizes = {8};
  config.num_classes = 3;
  auto model = make_model(config, {false, {4}}, false);
  std::vector<CompileEvent> events;
  std::vector<std::string> warnings;
  CompileOptions options;
  options.recompile_limit = 2;
  StepCompiler compiler(*model, loss_of(*model, false), options, [&](const CompileEvent& e) { events.push_back(e); },
                        [&](const std::string& warning) { warnings.push_back(warning); });
  for (int64_t batch : {8, 8, 5, 8, 3, 3}) compiler.run(torch::randn({batch, 4}), torch::randint(0, 3, {batch}), GradScale(1.0));
  REQUIRE(events.size() == 2);
  CHECK(events[0].reason == "first step");
  CHECK_THAT(events[1].reason, Catch::Matchers::Contains("new input signature") && Catch::Matchers::Contains("Float[8, 4]"));
  CHECK_THAT(events[1].signature, Catch::Matchers::Contains("Float[5, 4]"));
  REQUIRE(warnings.size() == 1);  // once, although two batches ran past the limit
  CHECK_THAT(warnings[0], Catch::Matchers::Contains("the limit") && Catch::Matchers::Contains("Float[3, 4]"));
  // The eager fallback still trains: gradients accumulated over all six batches.
  for (const auto& [name, parameter] : model->named_parameters()) CHECK(parameter.grad().defined());
}
