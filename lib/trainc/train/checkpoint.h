// defines: save_checkpoint, load_model_weights, load_training_state, newest_checkpoint,
//          rotate_checkpoints, checkpoint_step
//
// output_dir/checkpoint-<step>/ holds:
//   trainc_checkpoint.json  format name and version, trainc and LibTorch versions
//   model.pt                parameters and buffers by name
//   optimizer.pt            optimizer state (absent with save_only_model)
//   rng_state.pt            LibTorch generator states (CPU, and each GPU)
//   rng_state_<rank>.pt     in a data-parallel run, the CPU generator state of each other rank
//   trainer_state.json      Hugging Face's trainer state: global_step, epoch, log_history, best_*
//   scaler.json             fp16's loss scale, its growth tracker and the steps skipped (when the state has one)
//   run_config.yaml         the resolved config of the run
// A checkpoint is written into a temporary directory and renamed into place, so a crash or a
// kill during a save leaves the previous checkpoints intact and never a half-written one.
#pragma once

#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

#include "trainc/models/model.h"
#include "trainc/train/trainer_state.h"

namespace trainc {

// Returns the checkpoint directory. `optimizer` may be null (save_only_model); `optim` is its
// config name, recorded so that a resume with another optimizer is refused by name.
// `rank_cpu_rng_states`: in a data-parallel run, every rank's CPU generator state, by rank (rank
// 0's is rng_state.pt's).
std::string save_checkpoint(const std::string& output_dir, Model& model, torch::optim::Optimizer* optimizer, const std::string& optim,
                            const TrainerState& state, const std::string& config_yaml,
                            const std::vector<torch::Tensor>& rank_cpu_rng_states = {});

// UserError naming the file and tensor when the checkpoint does not fit the model.
void load_model_weights(const std::string& checkpoint_dir, Model& model);

// Optimizer state, RNG states and trainer state, for an exact resume. `optim`: the run's optimizer,
// whose state must be the kind the checkpoint holds. `rank`: a data-parallel rank restores its own
// CPU generator state when the checkpoint has one for it.
TrainerState load_training_state(const std::string& checkpoint_dir, torch::optim::Optimizer& optimizer, const std::string& optim,
                                 int rank = 0);

// The checkpoint-<N> directory with the largest N that is complete, if any. `skipped`, if given,
// receives the checkpoint-<N> directories past it that are incomplete (a save cut short).
std::optional<std::string> newest_checkpoint(const std::string& output_dir, std::vector<std::string>* skipped = nullptr);

// Deletes the oldest checkpoints beyond `limit`, never the best one nor the newest.
void rotate_checkpoints(const std::string& output_dir, int64_t limit, const std::optional<std::string>& best_checkpoint);

// Temporary directories left by a run that was killed while saving or deleting a checkpoint.
void remove_stale_checkpoint_files(const std::string& output_dir);

// Deletes one checkpoint directory (renamed away first, so it never stays half-deleted).
void remove_checkpoint(const std::string& checkpoint_dir);

// N for ".../checkpoint-N", or -1 (also when N does not fit int64: no checkpoint trainc wrote).
int64_t checkpoint_step(const std::string& path);

}  // namespace trainc
