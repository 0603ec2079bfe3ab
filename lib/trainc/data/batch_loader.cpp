#include "trainc/data/batch_loader.h"

#include <torch/torch.h>

#include <system_error>

#include "trainc/common/error.h"
#include "trainc/train/step_plan.h"  // batch_count

namespace trainc {

namespace {

// A contiguous copy in pinned host memory. Pinning a view keeps its strides, and ATen copies a host
// tensor that is not contiguous to the GPU through a contiguous clone in pageable memory, which the
// driver stages: a token window's inputs and targets, strided views of one [batch, block + 1]
// gather, would go to the GPU from pageable memory after all.
torch::Tensor pinned_contiguous(const torch::Tensor& tensor) {
  torch::Tensor pinned = torch::empty(tensor.sizes(), tensor.options().pinned_memory(true));
  pinned.copy_(tensor);
  return pinned;
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
                         int64_t first_batch, int64_t num_workers, torch::Device device, bool copy_to_device)
    : dataset_(dataset),
      order_(std::move(order)),
      batch_size_(batch_size),
      num_batches_(batch_count(static_cast<int64_t>(order_.size()), batch_size, drop_last)),
      first_(first_batch),
      next_(first_batch),
      num_workers_(num_workers),
      device_(device),
      copy_to_device_(copy_to_device) {
  workers_.reserve(static_cast<std::size_t>(num_workers_));  // no reallocation once threads run
  try {
    for (int64_t worker = 0; worker < num_workers_; ++worker) workers_.emplace_back([this, worker] { work(worker); });
  } catch (const std::system_error& error) {
    // The destructor does not run for a constructor that throws: stop and join the started workers
    // here, or their std::thread objects would end the process.
    const std::size_t started = workers_.size();
    stop_workers();
    throw UserError("dataloader_num_workers: got " + std::to_string(num_workers) + ", but the system refused to start worker " +
                    std::to_string(started + 1) + " (" + error.what() + "); use fewer workers");
  }
}

void BatchLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

BatchLoader::~BatchLoader() { stop_workers(); }

Batch BatchLoader::assemble(int64_t index) const {
  const auto begin = order_.begin() + index * batch_size_;
  const auto end = order_.begin() + std::min<int64_t>((index + 1) * batch_size_, static_cast<int64_t>(order_.size()));
  Batch batch = dataset_.get(std::vector<int64_t>(begin, end));
  if (device_.is_cuda()) batch = {pinned_contiguous(batch.inputs), pinned_contiguous(batch.targets)};
  return batch;
}

void BatchLoader::work(int64_t worker) {
  // Worker w builds batches first + w, first + w + N, ... staying at most 2 batches per worker ahead.
  for (int64_t index = first_ + worker; index < num_batches_; index += num_workers_) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || index - next_ < 2 * num_workers_; });
      if (stopping_) return;
    }
    try {
      Batch batch = assemble(index);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(index, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

std::optional<Batch> BatchLoader::next() {
  if (next_ >= num_batches_) return std::nullopt;
  Batch batch;
  if (workers_.empty()) {
    batch = assemble(next_);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return failure_ || ready_.count(next_); });
    if (failure_) std::rethrow_exception(failure_);
    batch = std::move(ready_.at(next_));
    ready_.erase(next_);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++next_;
  }
  changed_.notify_all();
  if (device_.is_cuda() && copy_to_device_) {
    batch = {batch.inputs.to(device_, /*non_blocking=*/true), batch.targets.to(device_, /*non_blocking=*/true)};
  }
  return batch;
}

}  // namespace trainc
