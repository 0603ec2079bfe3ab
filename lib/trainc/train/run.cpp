#include "trainc/train/run.h"

#include "trainc/train/trainer.h"

namespace trainc {

int run_training(const RunConfig& config, const std::string& config_source, const std::vector<std::string>& warnings,
                 const RunOptions& options) {
  Trainer trainer(config, config_source, warnings, options);
  return trainer.train();
}

int run_explain(const RunConfig& config, const std::string& config_source, const RunOptions& options) {
  Trainer trainer(config, config_source, {}, options);
  return trainer.explain();
}

}  // namespace trainc
