// defines: DataParallel
//
// The collectives a data-parallel run needs, on LibTorch's c10d: a TCPStore rendezvous at
// MASTER_ADDR:MASTER_PORT (rank 0 hosts it) and a process group: ProcessGroupGloo on the CPU,
// ProcessGroupNCCL on GPUs (each rank on its own). Gradients are averaged in
// buckets of about 25 MB (one flat all-reduce per bucket, as DistributedDataParallel's default
// bucket size), during the last micro-batch's backward: a bucket's all-reduce starts as soon as
// autograd has accumulated all of its gradients, in bucket order on every rank (parameters in
// reverse, roughly the order backward reaches them). Accumulation micro-steps communicate
// nothing. A collective that fails or outlives ddp_timeout (a rank died or hangs) ends the run
// with exit 1 and a message naming the ranks on this host that are gone: over gloo as a
// UserError; over NCCL by printing it and ending the process at once, since unwinding would reach
// the process group's destructor, which waits for the collective that never completes. Over NCCL
// the gradients' all-reduce is asynchronous to the host, so it is the next step's agreement on
// whether to stop (through the store: the dead rank never arrives) that waits out ddp_timeout and
// reports.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "trainc/distributed/world.h"

namespace trainc {

class DataParallel {
 public:
  // backend: "gloo" with `device` the CPU, or "nccl" with `device` this rank's GPU. Throws a
  // UserError for one this build lacks (naming those it has) or one that does not fit the device.
  static void check_backend(const std::string& backend, c10::Device device);
  // `parameters`: the model's trainable parameters, whose gradients every step averages.
  DataParallel(const World& world, const std::string& backend, c10::Device device, std::chrono::seconds timeout,
               std::vector<at::Tensor> parameters);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's values into every rank's tensors (the model at start, so every replica begins equal).
  void broadcast(std::vector<at::Tensor>& tensors);
  // Call before the last micro-batch's backward: from then on autograd starts each bucket's
  // all-reduce when its gradients are complete.
  void expect_gradients();
  // After that backward: all-reduces the buckets autograd did not complete (all of them for a
  // compiled step, whose backward is a program, not autograd, and for a step that ran as a CUDA
  // graph, when expect_gradients was not called), waits, and replaces every defined .grad by its
  // mean over the ranks. On NCCL the wait is the current stream's, not the host's.
  void finish_gradients();
  // The mean over the ranks of a 0-dim tensor (the logged loss).
  at::Tensor mean(const at::Tensor& value);
  // Every rank's copy of a CPU tensor of one shape, by rank.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  // The signal any rank received (0: none), so that one rank's signal stops them all at the same
  // step. Agreed through the rendezvous store, not a collective: the host waits for the other
  // ranks' hosts to reach the same call, never for the GPU, so the steps queued on it keep running.
  int agree_on_signal(int signal_number);
  void barrier();
  // After the last collective of a run that went well: waits for every rank, then shuts the
  // process group down (NCCL's communicators are destroyed in order).
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainc
