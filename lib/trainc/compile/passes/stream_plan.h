// defines: StreamPlan, plan_streams
//
// Contract: picks the ATen steps of a schedule that may run on a second stream beside the others:
// those whose results only the program's outputs and other such steps read (a backward's weight
// gradients: their GEMMs and column sums, which no later step of the backward waits for), except,
// with `tail_on_main`, the program's tail: the steps after the main stream's last one stay on it
// (it would be idle until the end; on the second stream they would queue behind its last work). Their
// work then overlaps the chain of steps each layer's input gradient waits on, which on a small
// model leaves much of the GPU idle (runtime/fused_program runs them there when a CUDA graph
// records the program). The second stream's steps are cut into batches: the main stream waits for
// a batch once the next one is complete, before a tail step that reads what the batch computed,
// and for all of them at the program's end, after which the values the batch read may be
// released; a batch closes once its steps' inputs come to `batch_bytes` (counted per read, views
// at their full size), which keeps what is held for them to about two batches' worth.
// Example: d = exp(g); x = matmul(d, v); w = matmul(a, d); dx = tanh(x); return dx, w
// puts w on the second stream (one batch) and x on the main one (a kernel reads it).
#pragma once

#include <cstdint>
#include <vector>

#include "trainc/compile/passes/fusion.h"

namespace trainc {

struct StreamPlan {
  std::vector<int32_t> batch;        // per step: its batch on the second stream, -1: the main stream
  std::vector<int32_t> wait_before;  // per step: the batch the main stream waits for before the step, -1: none
  int32_t batches = 0;               // those not waited for before a step are waited for at the program's end

  bool empty() const { return batches == 0; }
  // The step before which the main stream waits for `b`: the schedule's size for the program's end.
  int32_t join_step(int32_t b) const;
};

StreamPlan plan_streams(const ir::Graph& graph, const Schedule& schedule, int64_t batch_bytes, bool tail_on_main);

}  // namespace trainc
