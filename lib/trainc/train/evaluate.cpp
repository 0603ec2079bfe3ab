#include "trainc/train/evaluate.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "trainc/compat/torch_compat.h"
#include "trainc/data/batch_loader.h"
#include "trainc/train/loss.h"

namespace trainc {

std::vector<std::string> evaluation_metrics(bool language_model) {
  return {"eval_loss", language_model ? "eval_perplexity" : "eval_accuracy", "eval_runtime", "eval_samples_per_second"};
}

std::string best_metric_key(const std::string& metric) { return metric.rfind("eval_", 0) == 0 ? metric : "eval_" + metric; }

nlohmann::json evaluate(Model& model, const Dataset& dataset, int64_t batch_size, torch::Device device,
                        const Precision& precision, bool language_model) {
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model.set_training(false);
  BatchLoader loader(dataset, dataset.eval_order(), batch_size, /*drop_last=*/false, 0, 0, device);
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  torch::Tensor correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(device));
  int64_t samples = 0;
  while (auto batch = loader.next()) {
    // A scripted forward may turn autograd on (torch.set_grad_enabled(True)), which outlives it:
    // each batch starts without it again, and its logits keep no history across batches.
    torch::NoGradGuard batch_without_autograd;
    torch::Tensor logits;
    {
      AutocastScope autocast(precision.device, precision.autocast, precision.dtype);
      logits = model.forward(batch->inputs).detach();
    }
    const torch::Tensor loss = cross_entropy_loss(logits, batch->targets, 0.0);
    loss_sum += loss.to(torch::kDouble) * batch->size();
    if (!language_model) correct += (logits.argmax(-1) == batch->targets).sum();
    samples += batch->size();
  }
  model.set_training(true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double eval_loss = samples > 0 ? loss_sum.item<double>() / static_cast<double>(samples) : 0.0;
  nlohmann::json metrics = {{"eval_loss", eval_loss}};
  if (language_model) {
    metrics["eval_perplexity"] = std::exp(eval_loss);
  } else {
    metrics["eval_accuracy"] = samples > 0 ? static_cast<double>(correct.item<int64_t>()) / static_cast<double>(samples) : 0.0;
  }
  metrics["eval_runtime"] = seconds;
  metrics["eval_samples_per_second"] = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  return metrics;
}

}  // namespace trainc
