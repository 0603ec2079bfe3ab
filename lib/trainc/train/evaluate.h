// defines: evaluate, evaluation_metrics, best_metric_key — loss over the held-out split, plus accuracy (classifiers) or perplexity
// (language models), under the run's precision, keyed as Hugging Face's log_history keys them:
// eval_loss, eval_accuracy | eval_perplexity, eval_runtime, eval_samples_per_second.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "trainc/data/dataset.h"
#include "trainc/models/model.h"
#include "trainc/train/precision.h"

namespace trainc {

// The keys evaluate reports, in its order: known before a run starts, so that a metric_for_best_model
// it never reports is refused before anything is trained or replaced.
std::vector<std::string> evaluation_metrics(bool language_model);

// metric_for_best_model as evaluation keys it: Hugging Face's rule, "accuracy" means eval_accuracy.
std::string best_metric_key(const std::string& metric);

nlohmann::json evaluate(Model& model, const Dataset& dataset, int64_t batch_size, torch::Device device,
                        const Precision& precision, bool language_model);

}  // namespace trainc
