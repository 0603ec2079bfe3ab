#include "trainc/train/checkpoint.h"

#include <ATen/Context.h>
#include <fcntl.h>
#include <torch/cuda.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <type_traits>

#include "trainc/common/checksum.h"
#include "trainc/common/error.h"
#include "trainc/compat/torch_compat.h"
#include "trainc/train/capturable_optimizer.h"

namespace trainc {
namespace fs = std::filesystem;
namespace {

constexpr const char kInfoFile[] = "trainc_checkpoint.json";

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// False when the path's data did not reach the disk: some write errors (NFS, quotas) surface
// only here. A file system that cannot sync a file at all (EINVAL) is not such an error.
bool sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  ::close(fd);
  return synced;
}

// Each writer returns its file's checksum, which trainc_checkpoint.json records; `shown` is the
// path its messages name (the file's place in the finished checkpoint).
std::string write_text(const fs::path& path, const std::string& text, const fs::path& shown) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) throw UserError(shown.string() + ": cannot write (disk full or no permission?)", kExitFailure);
  Checksum checksum;
  checksum.update(text.data(), text.size());
  return checksum.hex();
}

// LibTorch's archive writer throws when a write comes up short, and its destructor then writes
// the archive's end, throws again and ends the process. So writes that fail are taken as done
// (nothing more is written) and reported once the archive is finished.
std::string save_archive(torch::serialize::OutputArchive& archive, const fs::path& path, const fs::path& shown) {
  std::ofstream file(path, std::ios::binary);
  bool failed = !file;
  Checksum checksum;
  archive.save_to([&](const void* data, size_t size) -> size_t {
    if (!failed) failed = !file.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    checksum.update(data, size);
    return size;
  });
  file.close();
  if (failed || !file) throw UserError(shown.string() + ": cannot write (disk full or no permission?)", kExitFailure);
  return checksum.hex();
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  if (!file) throw UserError(path.string() + ": missing; not a complete trainc checkpoint");
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    throw UserError(path.string() + ": not valid JSON (truncated?): " + error.what());
  }
}

// A file whose bytes are not the ones saved (a flipped bit, a file copied over another) is refused:
// LibTorch reads most such damage without a word. Checkpoints without checksums (an older trainc's)
// are read as they are; one whose checksums lack the file, or are not strings, has a damaged manifest.
// `info`: the checkpoint's trainc_checkpoint.json (check_format's).
void verify_checksum(const nlohmann::json& info, const fs::path& path) {
  const auto checksums = info.find("checksums");
  if (checksums == info.end()) return;
  const std::string name = path.filename().string();
  const auto expected = checksums->is_object() ? checksums->find(name) : checksums->end();
  if (expected == checksums->end() || !expected->is_string()) {
    throw UserError((path.parent_path() / kInfoFile).string() + ": damaged: \"checksums\" holds no checksum of " + name);
  }
  if (!fs::exists(path)) throw UserError(path.string() + ": missing; not a complete trainc checkpoint");
  if (file_checksum(path.string()) != expected->get<std::string>()) {
    throw UserError(path.string() + ": damaged: its contents do not match the checksum saved with it in " + kInfoFile);
  }
}

void load_archive(torch::serialize::InputArchive& archive, const nlohmann::json& info, const fs::path& path) {
  if (!fs::exists(path)) throw UserError(path.string() + ": missing; not a complete trainc checkpoint");
  verify_checksum(info, path);
  try {
    archive.load_from(path.string());
  } catch (const c10::Error& error) {
    throw UserError(path.string() + ": cannot read (truncated or not written by trainc): " +
                    first_line(error.what_without_backtrace()));
  }
}

// A field of trainc_checkpoint.json of the JSON type `expected` names, or `fallback` when absent.
template <typename T>
T info_field(const nlohmann::json& info, const char* key, T fallback, const fs::path& file) {
  const auto found = info.find(key);
  if (found == info.end()) return fallback;
  bool fits = false;
  const char* expected = "";
  if constexpr (std::is_same_v<T, bool>) {
    fits = found->is_boolean();
    expected = "true or false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    fits = found->is_string();
    expected = "a string";
  } else {
    fits = found->is_number_integer() && found->template get<int64_t>() >= 0 &&
           found->template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    expected = "a whole number";
  }
  if (!fits) throw UserError(file.string() + ": damaged: " + key + " is " + found->dump() + ", expected " + expected);
  return found->template get<T>();
}

// The checkpoint's trainc_checkpoint.json, once its format is one this trainc reads.
nlohmann::json check_format(const fs::path& dir) {
  const fs::path file = dir / kInfoFile;
  nlohmann::json info = read_json(file);
  if (!info.is_object()) throw UserError(file.string() + ": not a trainc checkpoint (expected a JSON object)");
  const std::string format = info_field<std::string>(info, "format", "", file);
  if (format != kCheckpointFormatName) throw UserError(file.string() + ": not a trainc checkpoint (format \"" + format + "\")");
  const int version = info_field<int>(info, "format_version", 0, file);
  if (version != kCheckpointFormatVersion) {
    throw UserError(file.string() + ": checkpoint format version " + std::to_string(version) + ", this trainc reads version " +
                    std::to_string(kCheckpointFormatVersion));
  }
  info_field<bool>(info, "save_only_model", false, file);  // the fields read later, checked here once
  info_field<std::string>(info, "optim", "", file);
  return info;
}

// LibTorch's load takes the saved moments as they are: those of another model's shapes (the
// files' checksums intact) would load, and the first step would fail with ATen's words.
void check_optimizer_state_shapes(torch::optim::Optimizer& optimizer, const fs::path& path) {
  auto& states = optimizer.state();
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& parameter : group.params()) {
      const auto found = states.find(optimizer_state_key(parameter));
      if (found == states.end()) continue;
      std::vector<std::pair<std::string, at::Tensor>> moments;
      if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(found->second.get())) {
        moments = {{"exp_avg", adamw->exp_avg()}, {"exp_avg_sq", adamw->exp_avg_sq()}, {"max_exp_avg_sq", adamw->max_exp_avg_sq()}};
      } else if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(found->second.get())) {
        moments = {{"momentum_buffer", sgd->momentum_buffer()}};
      }
      for (const auto& [name, moment] : moments) {
        if (moment.defined() && moment.sizes() != parameter.sizes()) {
          throw UserError(path.string() + ": optimizer state " + name + " of shape " + c10::str(moment.sizes()) +
                          " for a parameter of shape " + c10::str(parameter.sizes()) +
                          " (the checkpoint's optimizer state is for a different model?)");
        }
      }
    }
  }
}

std::vector<c10::Device> generator_devices() {
  std::vector<c10::Device> devices = {c10::Device(c10::kCPU)};
  for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
    devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
  }
  return devices;
}

}  // namespace

int64_t checkpoint_step(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  const std::string prefix = "checkpoint-";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  // A step past int64 is no checkpoint trainc wrote: the directory is the user's, as checkpoint-abc is.
  int64_t step = 0;
  for (const char digit : digits) {
    if (step > (std::numeric_limits<int64_t>::max() - (digit - '0')) / 10) return -1;
    step = step * 10 + (digit - '0');
  }
  return step;
}

std::string save_checkpoint(const std::string& output_dir, Model& model, torch::optim::Optimizer* optimizer, const std::string& optim,
                            const TrainerState& state, const std::string& config_yaml,
                            const std::vector<torch::Tensor>& rank_cpu_rng_states) {
  const fs::path final_dir = fs::path(output_dir) / ("checkpoint-" + std::to_string(state.global_step));
  const fs::path temp_dir = fs::path(output_dir) / (".tmp-checkpoint-" + std::to_string(state.global_step) + "-" +
                                                   std::to_string(::getpid()));
  fs::remove_all(temp_dir);
  fs::create_directories(temp_dir);

  // A save that fails (a full disk) leaves no partial directory behind; the last checkpoint stays.
  try {
    torch::serialize::OutputArchive weights;
    for (const auto& [name, tensor] : model.named_parameters()) weights.write(name, tensor.detach().cpu());
    for (const auto& [name, tensor] : model.named_buffers()) weights.write(name, tensor.cpu(), /*is_buffer=*/true);
    nlohmann::json checksums = nlohmann::json::object();
    checksums["model.pt"] = save_archive(weights, temp_dir / "model.pt", final_dir / "model.pt");
    if (optimizer != nullptr) {
      torch::serialize::OutputArchive optimizer_archive;
      // A capturable optimizer counts its steps on the device; the checkpoint holds them as eager's do.
      if (auto* on_device = dynamic_cast<DeviceStateOptimizer*>(optimizer)) on_device->store_device_state();
      optimizer->save(optimizer_archive);
      checksums["optimizer.pt"] = save_archive(optimizer_archive, temp_dir / "optimizer.pt", final_dir / "optimizer.pt");
    }
    torch::serialize::OutputArchive rng;
    for (const c10::Device& device : generator_devices()) {
      rng.write(device.str(), at::globalContext().defaultGenerator(device).get_state());
    }
    checksums["rng_state.pt"] = save_archive(rng, temp_dir / "rng_state.pt", final_dir / "rng_state.pt");
    for (std::size_t rank = 1; rank < rank_cpu_rng_states.size(); ++rank) {
      torch::serialize::OutputArchive rank_rng;
      rank_rng.write("cpu", rank_cpu_rng_states[rank]);
      const std::string name = "rng_state_" + std::to_string(rank) + ".pt";
      checksums[name] = save_archive(rank_rng, temp_dir / name, final_dir / name);
    }
    checksums["trainer_state.json"] =
        write_text(temp_dir / "trainer_state.json", state.to_json().dump(2) + "\n", final_dir / "trainer_state.json");
    if (state.loss_scale) {
      checksums["scaler.json"] = write_text(temp_dir / "scaler.json", state.loss_scale->to_json().dump(2) + "\n", final_dir / "scaler.json");
    }
    checksums["run_config.yaml"] = write_text(temp_dir / "run_config.yaml", config_yaml, final_dir / "run_config.yaml");
    const nlohmann::json info = {{"format", kCheckpointFormatName},
                                 {"format_version", kCheckpointFormatVersion},
                                 {"trainc_version", TRAINC_VERSION},
                                 {"torch_version", kTorchVersionText},
                                 {"save_only_model", optimizer == nullptr},
                                 {"optim", optim},
                                 {"checksums", checksums}};
    write_text(temp_dir / kInfoFile, info.dump(2) + "\n", final_dir / kInfoFile);  // written last: its presence marks a complete checkpoint
    for (const auto& entry : fs::directory_iterator(temp_dir)) {
      if (!sync_path(entry.path())) {
        throw UserError((final_dir / entry.path().filename()).string() + ": cannot write (the data did not reach the disk)", kExitFailure);
      }
    }
    sync_path(temp_dir);  // the directory's entries: best effort, as for the renames below
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp_dir, ignored);
    throw;
  }

  if (fs::exists(final_dir)) {  // the same step saved again (a resumed run): swap, then drop the old one
    const fs::path old_dir = fs::path(output_dir) / (".deleting-" + final_dir.filename().string() + "-" + std::to_string(::getpid()));
    fs::rename(final_dir, old_dir);
    fs::rename(temp_dir, final_dir);
    fs::remove_all(old_dir);
  } else {
    fs::rename(temp_dir, final_dir);
  }
  sync_path(output_dir);  // the renames: best effort, the checkpoint is complete either way
  return final_dir.string();
}

void load_model_weights(const std::string& checkpoint_dir, Model& model) {
  const fs::path dir(checkpoint_dir);
  const nlohmann::json info = check_format(dir);
  const fs::path path = dir / "model.pt";
  torch::serialize::InputArchive archive;
  load_archive(archive, info, path);
  torch::NoGradGuard no_grad;
  // The model's tensors, parameters then buffers, and the names the checkpoint holds them under:
  // the model's own, or, for a checkpoint that lacks some of them but holds every one of the
  // model's alternative names, those (an MLP saved with dropout's setting the other way round).
  std::vector<NamedTensor> tensors = model.named_parameters();
  const std::size_t parameter_count = tensors.size();
  for (NamedTensor& buffer : model.named_buffers()) tensors.push_back(std::move(buffer));
  std::vector<std::string> own, alternative;
  for (const auto& [name, tensor] : tensors) {
    own.push_back(name);
    alternative.push_back(model.alternative_checkpoint_name(name));
  }
  const std::vector<std::string> keys = archive.keys();
  const std::set<std::string> stored(keys.begin(), keys.end());
  const auto holds_all = [&stored](const std::vector<std::string>& names) {
    return std::all_of(names.begin(), names.end(), [&stored](const std::string& name) { return stored.count(name) > 0; });
  };
  const bool renamed = !holds_all(own) && holds_all(alternative);
  const std::vector<std::string>& stored_names = renamed ? alternative : own;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, target] = tensors[i];
    torch::Tensor tensor;
    if (!archive.try_read(stored_names[i], tensor, /*is_buffer=*/i >= parameter_count)) {
      throw UserError(path.string() + ": no tensor '" + name + "' (the checkpoint is for a different model?)");
    }
    if (tensor.sizes() != target.sizes()) {
      // Under the alternative names the model's own is named too: the checkpoint's may be another
      // module's in the model.
      throw UserError(path.string() + ": tensor '" + stored_names[i] + "'" +
                      (renamed ? " (read as the model's '" + name + "': the checkpoint numbers its layers as the other model.dropout setting does)" : "") +
                      " has shape " + c10::str(tensor.sizes()) + ", the model expects " + c10::str(target.sizes()));
    }
    const_cast<torch::Tensor&>(target).copy_(tensor);
  }
  // Tensors the model lacks: a checkpoint of a larger model (more layers, a bias) would otherwise
  // load, and fail later on the optimizer's state, which names the wrong cause.
  const std::set<std::string> expected(stored_names.begin(), stored_names.end());
  for (const std::string& name : keys) {
    if (!expected.count(name)) {
      throw UserError(path.string() + ": tensor '" + name + "' is not in the model" +
                      (renamed ? " as read under the other model.dropout setting's layer numbers" : "") +
                      " (the checkpoint is for a different model?)");
    }
  }
}

TrainerState load_training_state(const std::string& checkpoint_dir, torch::optim::Optimizer& optimizer, const std::string& optim,
                                 int rank) {
  const fs::path dir(checkpoint_dir);
  const nlohmann::json info = check_format(dir);
  if (info.value("save_only_model", false)) {  // its type was checked by check_format
    throw UserError(checkpoint_dir + ": saved with save_only_model (weights only); it cannot be resumed from");
  }
  // The AdamW variants keep the same state; SGD keeps none of theirs.
  auto state_kind = [](const std::string& name) { return name.rfind("adamw", 0) == 0 ? "AdamW" : name; };
  const std::string saved_optim = info.value("optim", "");
  if (!saved_optim.empty() && std::string(state_kind(saved_optim)) != state_kind(optim)) {
    throw UserError(checkpoint_dir + ": saved with optim " + saved_optim + ", whose state does not fit this run's optim " + optim +
                    "; resume with optim " + saved_optim + " (or start a new run)");
  }
  torch::serialize::InputArchive optimizer_archive;
  load_archive(optimizer_archive, info, dir / "optimizer.pt");
  try {
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& error) {
    throw UserError((dir / "optimizer.pt").string() + ": does not fit this model's optimizer: " +
                    first_line(error.what_without_backtrace()));
  }
  check_optimizer_state_shapes(optimizer, dir / "optimizer.pt");
  torch::serialize::InputArchive rng;
  load_archive(rng, info, dir / "rng_state.pt");
  for (const c10::Device& device : generator_devices()) {
    torch::Tensor state;
    if (!rng.try_read(device.str(), state)) continue;
    at::Generator generator = at::globalContext().defaultGenerator(device);  // a handle to the shared generator
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  const fs::path rank_rng_path = dir / ("rng_state_" + std::to_string(rank) + ".pt");
  if (rank > 0 && fs::exists(rank_rng_path)) {
    torch::serialize::InputArchive rank_rng;
    load_archive(rank_rng, info, rank_rng_path);
    torch::Tensor state;
    if (rank_rng.try_read("cpu", state)) {
      at::Generator generator = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
  }
  verify_checksum(info, dir / "run_config.yaml");  // not read back, but part of what was saved
  verify_checksum(info, dir / "trainer_state.json");
  TrainerState state = TrainerState::from_json(read_json(dir / "trainer_state.json"), (dir / "trainer_state.json").string());
  // A checkpoint of a run that neither scaled its loss nor skipped a step has none; one whose
  // checksums name it must have it.
  const fs::path scaler = dir / "scaler.json";
  const auto checksums = info.find("checksums");
  if (fs::exists(scaler) || (checksums != info.end() && checksums->is_object() && checksums->contains("scaler.json"))) {
    verify_checksum(info, scaler);
    state.loss_scale = LossScaleState::from_json(read_json(scaler), scaler.string());
    if (state.loss_scale->skipped_steps > state.global_step) {
      throw UserError(scaler.string() + ": skipped_steps is " + std::to_string(state.loss_scale->skipped_steps) +
                      ", more than the checkpoint's global_step " + std::to_string(state.global_step));
    }
  }
  return state;
}

std::optional<std::string> newest_checkpoint(const std::string& output_dir, std::vector<std::string>* skipped) {
  std::optional<std::string> newest;
  int64_t newest_step = -1;
  if (!fs::is_directory(output_dir)) return newest;
  std::vector<std::pair<int64_t, std::string>> incomplete;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const int64_t step = checkpoint_step(entry.path().string());
    if (step < 0) continue;
    if (!fs::exists(entry.path() / kInfoFile)) {
      incomplete.emplace_back(step, entry.path().string());
    } else if (step > newest_step) {
      newest_step = step;
      newest = entry.path().string();
    }
  }
  if (skipped != nullptr) {
    std::sort(incomplete.begin(), incomplete.end());
    for (const auto& [step, path] : incomplete) {
      if (step > newest_step) skipped->push_back(path);
    }
  }
  return newest;
}

void remove_stale_checkpoint_files(const std::string& output_dir) {
  if (!fs::is_directory(output_dir)) return;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-checkpoint-", 0) == 0 || name.rfind(".deleting-checkpoint-", 0) == 0) fs::remove_all(entry.path());
  }
}

void remove_checkpoint(const std::string& checkpoint_dir) {
  // Renamed first, so that a kill in the middle of deleting never leaves a partial checkpoint-N.
  const fs::path dir(checkpoint_dir);
  const fs::path doomed = dir.parent_path() / (".deleting-" + dir.filename().string() + "-" + std::to_string(::getpid()));
  fs::rename(dir, doomed);
  fs::remove_all(doomed);
}

void rotate_checkpoints(const std::string& output_dir, int64_t limit, const std::optional<std::string>& best_checkpoint) {
  std::vector<std::pair<int64_t, fs::path>> checkpoints;
  for (const auto& entry : fs::directory_iterator(output_dir)) {
    const int64_t step = checkpoint_step(entry.path().string());
    if (step >= 0) checkpoints.emplace_back(step, entry.path());
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  // Every checkpoint is in output_dir, so its name identifies it, however the path was spelled
  // (relative to another working directory, say).
  auto is_best = [&](const fs::path& path) { return best_checkpoint && path.filename() == fs::path(*best_checkpoint).filename(); };
  auto remaining = static_cast<int64_t>(checkpoints.size());
  for (std::size_t i = 0; i + 1 < checkpoints.size() && remaining > limit; ++i) {
    if (is_best(checkpoints[i].second)) continue;
    remove_checkpoint(checkpoints[i].second.string());
    --remaining;
  }
}

}  // namespace trainc
