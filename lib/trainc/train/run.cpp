#include "trainc/train/run.h"

#include "trainc/train/trainer.h"

namespace trainc {

int run_training(const RunConfig& config, const std::string& config_source, const std::vector<std::string>& warnings) {
  Trainer trainer(config, config_source, warnings);
  return trainer.train();
}

}  // namespace trainc
