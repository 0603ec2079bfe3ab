// defines: BatchLoader
//
// Cuts one epoch's sample order into batches and hands them out in order. With num_workers > 0,
// worker threads assemble batches ahead of the training thread (at most 2 per worker ahead);
// batch i is always the same samples, whoever builds it, so prefetching never changes a run.
// On CUDA, batches are made contiguous in pinned memory (by the workers, or without workers by the
// training thread), so that a copy to the GPU goes straight from them; they are copied to the GPU
// asynchronously, or handed out pinned (copy_to_device false) to a consumer that copies them where
// it needs them (StepGraphs' input buffers).
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "trainc/data/dataset.h"

namespace trainc {

class BatchLoader {
 public:
  BatchLoader(const Dataset& dataset, std::vector<int64_t> order, int64_t batch_size, bool drop_last,
              int64_t first_batch, int64_t num_workers, torch::Device device, bool copy_to_device = true);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::optional<Batch> next();  // none after the last batch
  // Batch `index` as the workers make it: on a GPU, in pinned host memory, which next() copies
  // from without waiting.
  Batch assemble(int64_t index) const;

 private:
  void work(int64_t worker);
  void stop_workers();  // tells the workers to stop and joins them

  const Dataset& dataset_;
  std::vector<int64_t> order_;
  int64_t batch_size_;
  int64_t num_batches_;
  int64_t first_;  // the first batch handed out (later ones when resuming mid-epoch)
  int64_t next_;   // the next batch next() hands out; guarded by mutex_ once workers run
  int64_t num_workers_;
  torch::Device device_;
  bool copy_to_device_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace trainc
