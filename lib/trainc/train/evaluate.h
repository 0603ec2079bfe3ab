// defines: evaluate — loss over the held-out split, plus accuracy (classifiers) or perplexity
// (language models), under the run's precision, keyed as Hugging Face's log_history keys them:
// eval_loss, eval_accuracy | eval_perplexity, eval_runtime, eval_samples_per_second.
#pragma once

#include <nlohmann/json.hpp>

#include "trainc/data/dataset.h"
#include "trainc/models/model.h"
#include "trainc/train/precision.h"

namespace trainc {

nlohmann::json evaluate(Model& model, const Dataset& dataset, int64_t batch_size, torch::Device device,
                        const Precision& precision, bool language_model);

}  // namespace trainc
