// Trainer::explain — `trainc explain`: the run set up as for training, then the compile plan of
// its first batch printed instead of training (captured ops, graph breaks, the backend, the
// programs), with --dump-dir writing the graphs. A backend that cannot run here, a model that
// cannot have the CUDA graphs torch_compile_fullgraph demands, or a step that would run eagerly
// with a loss no trained parameter reaches, still shows the plan, then exits 2 with the reason.
#include <chrono>
#include <iostream>

#include "trainc/common/error.h"
#include "trainc/common/format.h"
#include "trainc/compile/capture/capture.h"
#include "trainc/compile/runtime/guards.h"
#include "trainc/data/batch_loader.h"
#include "trainc/train/trainer.h"

namespace trainc {

int Trainer::explain() {
  config_.args.torch_compile = true;  // explain plans a compiled step whatever the config says
  std::string backend_line;
  try {
    setup();
    backend_line = backend_->describe();
  } catch (const UserError& error) {
    // The backend cannot run here, or not with this model (torch_compile_fullgraph where the model
    // cannot have CUDA graphs): show the plan all the same, then exit 2 with the reason.
    const bool refused = dynamic_cast<const GraphsRefused*>(&error) != nullptr;
    if (!refused && (backend_ || std::string(error.what()).find("torch_compile") == std::string::npos)) throw;
    backend_line = std::string(refused ? "refused: " : "unavailable: ") + error.what();
    backend_.reset();
    model_.reset();
    data_ = DataSplits();
    parameters_.clear();
    config_.args.torch_compile = false;
    setup();
  }
  BatchLoader loader(*data_.train, data_.train->epoch_order(data_seed_, 0), args_.per_device_train_batch_size,
                     args_.dataloader_drop_last, 0, 0, device_);
  const std::optional<Batch> batch = loader.next();
  if (!batch) throw UserError("explain: the training data yields no batch");
  const auto start = std::chrono::steady_clock::now();
  const CompilePlan plan = plan_step(*model_, loss_fn_, batch->inputs, batch->targets);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!options_.dump_dir.empty()) dump_plan(plan, options_.dump_dir, "compile-1");
  const std::string text = explain_plan(plan, backend_line, backend_ ? backend_->warnings : std::vector<std::string>{},
                                        backend_ && backend_->backend == "inductor");
  std::cout << "config       " << config_source_ << "\n"
            << "model        " << model_->describe() << "\n"
            << "batch        " << input_signature(batch->inputs, batch->targets) << "\n"
            << text << "planning     " << format_number(seconds, 3) << " s\n";
  if (!options_.dump_dir.empty()) std::cout << "dumped       " << options_.dump_dir << "\n";
  if (!backend_) {
    // The plan went to stdout; the reason for exit 2 goes where every error goes.
    std::cerr << "trainc: error: " << backend_line.substr(backend_line.find(": ") + 2) << "\n";
    return kExitUsage;
  }
  // A step with graph breaks runs eagerly (torch_compile_fullgraph refuses it first), and training
  // refuses it at the first step when its loss reaches no trained parameter; plan_step checks a
  // complete plan itself. One eager forward tells; explain writes nothing after it, so the random
  // draws and buffers it moves do not matter.
  if (!plan.complete() && !args_.torch_compile_fullgraph && !loss_fn_(batch->inputs, batch->targets).requires_grad()) {
    std::cerr << "trainc: error: " << no_gradient_path_message(model_->describe()) << "\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace trainc
