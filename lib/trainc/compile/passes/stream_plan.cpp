#include "trainc/compile/passes/stream_plan.h"

#include <algorithm>
#include <set>

#include "trainc/common/error.h"

namespace trainc {
namespace {

using ir::ValueId;

// The steps that compute what `value` is made of: its own step, or for a lazy value (a view, a
// constant) the steps of the values it is made from.
void computing_steps(const ir::Graph& graph, const Schedule& schedule, const std::vector<int32_t>& step_of, ValueId value,
                     std::set<int32_t>& steps) {
  const int32_t step = step_of[static_cast<std::size_t>(value)];
  if (step >= 0) {
    steps.insert(step);
    return;
  }
  if (!is_lazy(graph, schedule, value)) return;
  for (ValueId in : graph.node(value).inputs) computing_steps(graph, schedule, step_of, in, steps);
}

}  // namespace

int32_t StreamPlan::join_step(int32_t b) const {
  // Waiting for a batch waits for the ones before it: the stream runs them in order.
  for (std::size_t s = 0; s < wait_before.size(); ++s) {
    if (wait_before[s] >= b) return static_cast<int32_t>(s);
  }
  return static_cast<int32_t>(wait_before.size());
}

StreamPlan plan_streams(const ir::Graph& graph, const Schedule& schedule, int64_t batch_bytes, bool tail_on_main) {
  const std::size_t steps = schedule.steps.size();
  std::vector<int32_t> step_of(static_cast<std::size_t>(graph.size()), -1);
  std::vector<std::vector<ValueId>> reads(steps);  // per step: the values it reads from outside itself
  for (std::size_t s = 0; s < steps; ++s) {
    const ScheduleStep& step = schedule.steps[s];
    if (step.kind == ScheduleStep::Kind::aten) {
      step_of[static_cast<std::size_t>(step.index)] = static_cast<int32_t>(s);
      reads[s] = graph.node(step.index).inputs;
      continue;
    }
    const FusedKernel& kernel = schedule.kernels[static_cast<std::size_t>(step.index)];
    for (ValueId member : kernel.members) step_of[static_cast<std::size_t>(member)] = static_cast<int32_t>(s);
    for (ValueId member : kernel.members) {
      for (ValueId in : graph.node(member).inputs) {
        if (schedule.kernel_of[static_cast<std::size_t>(in)] != step.index) reads[s].push_back(in);
      }
    }
  }
  // Per step: the earlier steps that compute what it reads, and the later steps that read what it computes.
  std::vector<std::set<int32_t>> sources(steps), readers(steps);
  for (std::size_t s = 0; s < steps; ++s) {
    for (ValueId in : reads[s]) computing_steps(graph, schedule, step_of, in, sources[s]);
    sources[s].erase(static_cast<int32_t>(s));
    for (int32_t source : sources[s]) readers[static_cast<std::size_t>(source)].insert(static_cast<int32_t>(s));
  }

  // From the last step back: an ATen step goes to the second stream when every step reading it
  // does (the program's outputs are read after the last join). Random draws stay in order.
  std::vector<bool> side(steps, false);
  for (std::size_t s = steps; s-- > 0;) {
    const ScheduleStep& step = schedule.steps[s];
    if (step.kind != ScheduleStep::Kind::aten || ir::op_kind(graph.node(step.index).op) == ir::OpKind::kRandom) continue;
    side[s] = std::all_of(readers[s].begin(), readers[s].end(), [&](int32_t r) { return side[static_cast<std::size_t>(r)]; });
  }
  // The program's tail, the steps after the main stream's last one: the main stream has nothing
  // left to overlap them with and would only wait at the end, while on the second stream they
  // would queue behind its earlier work (a layer's weight-gradient GEMM) and, like every step
  // there, after all the main stream queued before them. On the main stream each starts no later.
  if (tail_on_main) {
    std::size_t tail = 0;
    for (std::size_t s = 0; s < steps; ++s) {
      if (!side[s]) tail = s + 1;
    }
    std::fill(side.begin() + static_cast<std::ptrdiff_t>(tail), side.end(), false);
  }

  StreamPlan plan;
  plan.batch.assign(steps, -1);
  plan.wait_before.assign(steps, -1);
  int64_t bytes = 0;
  bool open = false;       // the newest batch has steps
  int32_t closed = -1;     // the newest batch complete
  int32_t waiting = -1;    // a batch the main stream is to wait for at its next step
  int32_t waited = -1;     // the newest batch it has waited for (and so for those before it)
  std::size_t side_end = 0;  // after the second stream's last step
  for (std::size_t s = 0; s < steps; ++s) {
    if (side[s]) side_end = s + 1;
  }
  for (std::size_t s = 0; s < steps; ++s) {
    if (!side[s]) {
      // A tail step may read what the second stream computes: it waits for that batch first. Only
      // the tail does, after every second-stream step, so the batch is queued whole by then.
      for (int32_t source : sources[s]) {
        const int32_t batch = plan.batch[static_cast<std::size_t>(source)];
        TRAINC_CHECK(batch < 0 || s >= side_end, "stream_plan: a main-stream step reads a second-stream value before that stream's last step");
        waiting = std::max(waiting, batch);
      }
      if (waiting > waited) {
        plan.wait_before[s] = waiting;
        waited = waiting;
      }
      waiting = -1;
      continue;
    }
    plan.batch[s] = plan.batches;
    open = true;
    for (ValueId in : graph.node(schedule.steps[s].index).inputs) {
      bytes += graph.type(in).numel() * ir::dtype_bytes(graph.type(in).dtype);
    }
    if (bytes >= batch_bytes) {
      // This batch is complete: the main stream waits for the one before it from its next step on
      // (not for this one, whose work was just queued).
      if (closed >= 0) waiting = closed;
      closed = plan.batches++;
      bytes = 0;
      open = false;
    }
  }
  if (open) ++plan.batches;  // waited for at the end
  return plan;
}

}  // namespace trainc
