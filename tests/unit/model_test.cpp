// Models, loss, optimizer groups and datasets against eager LibTorch computed another way, and
// the ATen ops a model's forward runs where those decide its speed.
#include <catch2/catch.hpp>

#include <torch/csrc/jit/ir/ir.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/command.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/compile/capture/capture.h"
#include "trainc/data/batch_loader.h"
#include "trainc/data/dataset.h"
#include "trainc/models/model.h"
#include "trainc/models/torchscript_model.h"
#include "trainc/train/evaluate.h"
#include "trainc/train/foreach_adamw.h"
#include "trainc/train/grad_clip.h"
#include "trainc/train/loss.h"
#include "trainc/train/optimizer.h"

using namespace trainc;

namespace {

ModelConfig small_gpt(double dropout) {
  ModelConfig config;
  config.name = "gpt";
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = 8;
  config.vocab_size = 50;
  config.dropout = dropout;
  return config;
}

// Loss and gradients of one forward/backward, with the model built from `seed`.
std::pair<torch::Tensor, std::vector<torch::Tensor>> loss_and_grads(const ModelConfig& config, bool checkpointing,
                                                                     const torch::Tensor& tokens, uint64_t seed) {
  torch::manual_seed(seed);
  auto model = make_model(config, {true, {config.block_size}}, checkpointing);
  model->set_training(true);
  torch::manual_seed(seed + 1);  // the same dropout masks in both runs
  const torch::Tensor logits = model->forward(tokens.slice(1, 0, config.block_size));
  const torch::Tensor loss = cross_entropy_loss(logits, tokens.slice(1, 1, config.block_size + 1), 0.0);
  loss.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& item : model->named_parameters()) grads.push_back(item.second.grad().clone());
  return {loss.detach(), grads};
}

// The TorchScript file of `net_source`, a Python module defining torch.nn.Module `Net` (ending in
// a newline), scripted and saved by the system's PyTorch into `dir`.
std::string scripted_net(test::ScratchDir& dir, const std::string& name, const std::string& net_source) {
  const std::string path = dir.file(name + ".pt");
  const std::string script = dir.write(name + ".py", net_source + "torch.jit.save(torch.jit.script(Net()), '" + path + "')\n");
  const test::CommandResult made = test::run_command(std::string(TRAINC_SYSTEM_PYTHON) + " " + script);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  return path;
}

}  // namespace

TEST_CASE("gradient checkpointing gives eager's loss and gradients (float32, 1e-5)", "[unit][model]") {
  const ModelConfig config = small_gpt(0.2);
  const torch::Tensor tokens = torch::randint(config.vocab_size, {3, config.block_size + 1}, torch::kLong);
  const auto [loss, grads] = loss_and_grads(config, false, tokens, 11);
  const auto [loss_recomputed, grads_recomputed] = loss_and_grads(config, true, tokens, 11);
  CHECK(torch::allclose(loss, loss_recomputed, 1e-5, 1e-6));
  REQUIRE(grads.size() == grads_recomputed.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(grads[i], grads_recomputed[i], 1e-5, 1e-6));
  }
}

TEST_CASE("gpt: tied head, causal attention and the parameter count of GPT-2 124M", "[unit][model]") {
  ModelConfig config = small_gpt(0.0);
  torch::manual_seed(0);
  auto model = make_model(config, {true, {config.block_size}}, false);
  model->set_training(false);
  // Causality: changing a later token never changes earlier logits.
  torch::Tensor tokens = torch::randint(config.vocab_size, {1, config.block_size}, torch::kLong);
  const torch::Tensor before = model->forward(tokens);
  tokens[0][config.block_size - 1] = (tokens[0][config.block_size - 1].item<int64_t>() + 1) % config.vocab_size;
  const torch::Tensor after = model->forward(tokens);
  using torch::indexing::Slice;
  CHECK(torch::allclose(before.index({Slice(), Slice(0, -1)}), after.index({Slice(), Slice(0, -1)})));
  CHECK_FALSE(torch::allclose(before.index({Slice(), -1}), after.index({Slice(), -1})));

  ModelConfig gpt2;
  gpt2.name = "gpt";
  torch::NoGradGuard no_grad;
  auto big = make_model(gpt2, {true, {1024}}, false);
  CHECK(big->parameter_count() == 124439808);  // GPT-2 small with a tied head
}

TEST_CASE("gpt: each block's linear layers add their bias inside ATen's linear, autocast casting it with the rest", "[unit][model]") {
  // As Python's nn.Linear does. The C++ frontend's F::linear runs matmul and then `+=` its bias over
  // a 3-D input: under autocast a float32 bias added in place into the low-precision product, by a
  // kernel of its own (on a GPU, GPT-2's 48 of them took 6 ms of its eager step).
  for (const bool bias : {true, false}) {
    INFO("model.bias " << bias);
    ModelConfig config = small_gpt(0.0);
    config.bias = bias;
    torch::manual_seed(0);
    auto model = make_model(config, {true, {config.block_size}}, false);
    model->set_training(true);
    const torch::Tensor tokens = torch::randint(config.vocab_size, {2, config.block_size + 1}, torch::kLong);
    const LossFunction loss_fn = [&](const at::Tensor& inputs, const at::Tensor& targets) {
      AutocastScope autocast(c10::DeviceType::CPU, true, at::kBFloat16);
      return cross_entropy_loss(model->forward(inputs), targets, 0.0);
    };
    const CapturedStep captured = capture_loss(*model, loss_fn, tokens.slice(1, 0, config.block_size), tokens.slice(1, 1));
    int linears = 0, in_place_adds = 0;
    for (const torch::jit::Node* node : captured.graph->nodes()) {
      const std::string kind = node->kind().toQualString();
      if (kind == "aten::add_") ++in_place_adds;
      if (kind != "aten::linear") continue;
      ++linears;
      const c10::TypePtr& bias_type = node->inputs().at(2)->type();
      if (bias) {
        const auto tensor = bias_type->cast<c10::TensorType>();
        REQUIRE(tensor);
        CHECK(tensor->scalarType() == at::kBFloat16);  // cast by autocast, as the input and weight are
      } else {
        CHECK(bias_type->kind() == c10::TypeKind::NoneType);
      }
    }
    CHECK(linears == 4 * config.n_layer);  // attention's in and out, the MLP's two
    CHECK(in_place_adds == 0);
  }
}

TEST_CASE("an MLP's tensors with and without dropout name each other, Linear for Linear", "[unit][model]") {
  // A dropout module follows each activation only when dropout is positive, so the two settings
  // number the Linears apart; both list their parameters in the same order, which pairs them.
  for (const std::vector<int64_t>& hidden : {std::vector<int64_t>{}, {16}, {16, 8}, {16, 16, 16}}) {
    INFO("hidden_sizes " << c10::IntArrayRef(hidden));
    ModelConfig config;
    config.name = "mlp";
    config.input_size = 8;
    config.hidden_sizes = hidden;
    config.num_classes = 3;
    config.dropout = 0.0;
    const auto without = make_model(config, {false, {8}}, false);
    config.dropout = 0.1;
    const auto with = make_model(config, {false, {8}}, false);
    const std::vector<NamedTensor> plain = without->named_parameters(), dropped = with->named_parameters();
    REQUIRE(plain.size() == 2 * (hidden.size() + 1));
    REQUIRE(dropped.size() == plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      CHECK(plain[i].second.sizes() == dropped[i].second.sizes());
      CHECK(without->alternative_checkpoint_name(plain[i].first) == dropped[i].first);
      CHECK(with->alternative_checkpoint_name(dropped[i].first) == plain[i].first);
    }
    CHECK(with->alternative_checkpoint_name("head.weight") == "head.weight");  // not a layer's: as it is
  }
}

TEST_CASE("cross-entropy with label smoothing matches the formula", "[unit][loss]") {
  const torch::Tensor logits = torch::randn({6, 5}, torch::kDouble);
  const torch::Tensor targets = torch::randint(5, {6}, torch::kLong);
  const double smoothing = 0.1;
  const torch::Tensor log_probs = torch::log_softmax(logits, 1);
  const torch::Tensor nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1);
  const torch::Tensor uniform = -log_probs.mean(1);
  const torch::Tensor expected = ((1 - smoothing) * nll + smoothing * uniform).mean();
  CHECK(cross_entropy_loss(logits.to(torch::kFloat), targets, smoothing).item<double>() ==
        Approx(expected.item<double>()).epsilon(1e-5));
}

TEST_CASE("weight decay skips biases and normalization weights", "[unit][optimizer]") {
  TrainingArguments args;
  args.weight_decay = 0.1;
  auto model = make_model(small_gpt(0.0), {true, {8}}, false);
  auto optimizer = make_optimizer(args, *model);
  REQUIRE(optimizer->param_groups().size() == 2);
  const auto& decay = static_cast<const torch::optim::AdamWOptions&>(optimizer->param_groups()[0].options());
  const auto& no_decay = static_cast<const torch::optim::AdamWOptions&>(optimizer->param_groups()[1].options());
  CHECK(decay.weight_decay() == 0.1);
  CHECK(no_decay.weight_decay() == 0.0);
  for (const auto& p : optimizer->param_groups()[0].params()) CHECK(p.dim() >= 2);
  for (const auto& p : optimizer->param_groups()[1].params()) CHECK(p.dim() < 2);
  set_learning_rate(*optimizer, 0.5);
  CHECK(optimizer->param_groups()[1].options().get_lr() == 0.5);
}

TEST_CASE("token windows: targets are inputs shifted by one and epochs are seeded", "[unit][data]") {
  const torch::Tensor tokens = torch::arange(100, torch::kLong);
  TokenWindowDataset dataset(tokens, 8);
  CHECK(dataset.size() == 12);
  const Batch batch = dataset.get({0, 40});
  CHECK(torch::equal(batch.inputs[1], torch::arange(40, 48, torch::kLong)));
  CHECK(torch::equal(batch.targets[1], torch::arange(41, 49, torch::kLong)));
  CHECK(dataset.epoch_order(1, 0) == dataset.epoch_order(1, 0));
  CHECK(dataset.epoch_order(1, 0) != dataset.epoch_order(1, 1));
  CHECK(dataset.epoch_order(1, 0) != dataset.epoch_order(2, 0));
  for (int64_t start : dataset.epoch_order(3, 5)) CHECK((start >= 0 && start <= 100 - 9));
}

TEST_CASE("prefetching workers hand out the same batches in the same order", "[unit][data]") {
  TensorDataset dataset(torch::randn({37, 3}), torch::arange(37, torch::kLong));
  const std::vector<int64_t> order = dataset.epoch_order(5, 0);
  for (bool drop_last : {false, true}) {
    BatchLoader plain(dataset, order, 4, drop_last, 1, 0, torch::kCPU);
    BatchLoader prefetched(dataset, order, 4, drop_last, 1, 3, torch::kCPU);
    int64_t batches = 0;
    while (auto expected = plain.next()) {
      auto got = prefetched.next();
      REQUIRE(got.has_value());
      CHECK(torch::equal(expected->targets, got->targets));
      ++batches;
    }
    CHECK_FALSE(prefetched.next().has_value());
    CHECK(batches == (drop_last ? 8 : 9));  // batch 0 skipped, as a resumed epoch does
  }
}

TEST_CASE("the multi-tensor AdamW matches LibTorch's AdamW over 100 steps (float32, 1e-5)", "[unit][optimizer]") {
  torch::manual_seed(3);
  std::vector<torch::Tensor> reference_params = {torch::randn({7, 5}), torch::randn({5}), torch::randn({3, 2, 2})};
  std::vector<torch::Tensor> foreach_params;
  for (auto& p : reference_params) {
    foreach_params.push_back(p.clone().requires_grad_(true));
    p.requires_grad_(true);
  }
  auto options = [] { return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1); };
  torch::optim::AdamW reference(reference_params, options());
  // optim adamw_torch_fused: on the CPU the same foreach update (the fused kernel is a GPU's; the
  // CUDA tests check it).
  const bool fused = GENERATE(false, true);
  INFO("fused " << fused);
  ForeachAdamW foreach_adamw(foreach_params, options(), fused);
  for (int step = 0; step < 100; ++step) {
    for (std::size_t i = 0; i < reference_params.size(); ++i) {
      const torch::Tensor grad = torch::randn_like(reference_params[i]);
      reference_params[i].mutable_grad() = grad.clone();
      if (i != 1 || step % 3 != 0) foreach_params[i].mutable_grad() = grad.clone();  // sometimes no gradient
      else foreach_params[i].mutable_grad() = torch::Tensor();
      if (i == 1 && step % 3 == 0) reference_params[i].mutable_grad() = torch::Tensor();
    }
    reference.step();
    foreach_adamw.step();
  }
  for (std::size_t i = 0; i < reference_params.size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(reference_params[i], foreach_params[i], 1e-5, 1e-6));
  }
}

TEST_CASE("clipping on the device matches LibTorch's clip_grad_norm_", "[unit][optimizer]") {
  for (double max_norm : {0.5, 100.0}) {
    std::vector<torch::Tensor> a = {torch::randn({4, 3}, torch::requires_grad()), torch::randn({6}, torch::requires_grad())};
    std::vector<torch::Tensor> b;
    for (auto& p : a) {
      p.mutable_grad() = torch::randn_like(p) * 3;
      b.push_back(p.detach().clone().requires_grad_(true));
      b.back().mutable_grad() = p.grad().clone();
    }
    const double expected = torch::nn::utils::clip_grad_norm_(a, max_norm);
    const torch::Tensor norm = clip_grad_norm(b, max_norm);
    CHECK(norm.item<double>() == Approx(expected).epsilon(1e-5));
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-6));
  }
}

TEST_CASE("evaluation reports exactly the metrics that a run checks metric_for_best_model against", "[model]") {
  // The start-of-run check reads evaluation_metrics; a key added to evaluate alone would refuse a valid metric.
  for (const bool language_model : {false, true}) {
    ModelConfig config = small_gpt(0.0);
    torch::Tensor inputs, targets;
    if (language_model) {
      inputs = torch::randint(0, config.vocab_size, {6, config.block_size}, torch::kLong);
      targets = torch::randint(0, config.vocab_size, {6, config.block_size}, torch::kLong);
    } else {
      config = ModelConfig{};
      config.input_size = 4;
      config.hidden_sizes = {8};
      config.num_classes = 3;
      inputs = torch::randn({6, 4});
      targets = torch::randint(0, 3, {6}, torch::kLong);
    }
    auto model = make_model(config, {language_model, {inputs.size(1)}}, false);
    const TensorDataset data(inputs, targets);
    const nlohmann::json metrics = evaluate(*model, data, 4, torch::kCPU, Precision{}, language_model);
    std::vector<std::string> keys;
    for (const auto& item : metrics.items()) keys.push_back(item.key());
    std::vector<std::string> expected = evaluation_metrics(language_model);
    std::sort(keys.begin(), keys.end());
    std::sort(expected.begin(), expected.end());
    CHECK(keys == expected);
  }
}

TEST_CASE("evaluation starts each batch without autograd though a scripted forward turns it on", "[unit][model]") {
  // Turned on inside forward, autograd outlives the call: without a guard per batch, batches 2 and
  // 3 would enter forward with it on (the buffer counts them).
  test::ScratchDir dir;
  const std::string path = scripted_net(
      dir, "grad_on",
      "import torch\n"
      "class Net(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.proj = torch.nn.Linear(4, 3)\n"
      "        self.register_buffer('entered_with_grad', torch.zeros((), dtype=torch.long))\n"
      "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
      "        if torch.is_grad_enabled():\n"
      "            self.entered_with_grad += 1\n"
      "        torch.set_grad_enabled(True)\n"
      "        return self.proj(x)\n");
  TorchScriptModel model(path, /*language_model=*/false, 3);
  const TensorDataset data(torch::randn({10, 4}), torch::randint(0, 3, {10}, torch::kLong));
  const auto buffers = model.named_buffers();
  const auto counter = std::find_if(buffers.begin(), buffers.end(), [](const auto& named) { return named.first == "entered_with_grad"; });
  REQUIRE(counter != buffers.end());
  {
    torch::NoGradGuard caller;  // a mode the forward does not leave behind, to see it restored
    const nlohmann::json metrics = evaluate(model, data, 4, torch::kCPU, Precision{}, /*language_model=*/false);  // 3 batches
    CHECK(std::isfinite(metrics["eval_loss"].get<double>()));
    CHECK(counter->second.item<int64_t>() == 0);
    CHECK_FALSE(torch::GradMode::is_enabled());
  }
  (void)model.forward(torch::randn({2, 4}));  // with autograd on: the buffer counts
  CHECK(counter->second.item<int64_t>() == 1);
}

TEST_CASE("a scripted forward's waits for the GPU are found by kind, with their lines", "[unit][model]") {
  // A CUDA graph's capture cannot record a wait: the trainer declines the graphs for these. A
  // branch that training does not take (`if not self.training:`) is not the step's.
  test::ScratchDir dir;
  const std::string path = scripted_net(
      dir, "waits",
      "import torch\n"
      "class Net(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.proj = torch.nn.Linear(5, 3)\n"
      "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
      "        y = self.proj(x)\n"
      "        n = torch.nonzero(x > 0).sum() + torch.masked_select(x, x > 0).sum()\n"  // line 8
      "        u = torch.unique(x).sum() + torch.where(x > 0)[0].sum()\n"                // line 9
      "        c = x.cpu().sum() + x.to('cpu').sum() + x.to(torch.device('cpu')).sum()\n"  // line 10
      "        k = x.to(y.device).sum() + x.to(torch.float64).sum()\n"  // line 11: no copy to the host
      "        r = torch.repeat_interleave(x, torch.ones(5, dtype=torch.long), dim=1).sum()\n"  // line 12
      "        r = r + x.repeat_interleave(2, dim=1).sum()\n"  // line 13: repeats known on the host
      "        r = r + torch.repeat_interleave(x, torch.ones(5, dtype=torch.long), dim=1, output_size=5).sum()\n"  // 14: sized
      "        if not self.training:\n"
      "            r = r + torch.nonzero(x).sum() + x.cpu().sum() + float(x.sum())\n"  // line 16: evaluation only
      "        return y + 0.0 * (n + u + c.to(y.device) + k + r)\n");
  TorchScriptModel model(path, /*language_model=*/false, 3);
  const auto listed = [](const std::vector<ScriptedOp>& ops) {
    std::vector<std::string> lines;
    for (const ScriptedOp& op : ops) lines.push_back(op.op + " " + op.place.substr(op.place.rfind('/') + 1));
    return lines;
  };
  model.set_training(true);
  CHECK(listed(model.value_sized_results()) == std::vector<std::string>{"aten::nonzero waits.py:8", "aten::masked_select waits.py:8",
                                                                       "aten::_unique2 waits.py:9", "aten::where waits.py:9",
                                                                       "aten::repeat_interleave waits.py:12"});
  CHECK(listed(model.host_copies()) == std::vector<std::string>{"aten::cpu waits.py:10", "aten::to waits.py:10"});
  CHECK(model.host_value_reads().empty());
  CHECK(model.grad_mode_switches().empty());
  model.set_training(false);  // the evaluation branch is the forward's now
  CHECK(listed(model.value_sized_results()).back() == "aten::nonzero waits.py:16");
  CHECK(listed(model.host_copies()).back() == "aten::cpu waits.py:16");
  CHECK(listed(model.host_value_reads()) == std::vector<std::string>{"aten::Float waits.py:16"});
  // The zoo models have none.
  ModelConfig gpt = small_gpt(0.0);
  auto zoo = make_model(gpt, {true, {gpt.block_size}}, false);
  CHECK(zoo->value_sized_results().empty());
  CHECK(zoo->host_copies().empty());
}
