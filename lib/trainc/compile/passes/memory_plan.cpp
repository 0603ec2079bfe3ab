#include "trainc/compile/passes/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace trainc {

int64_t MemoryPlan::arena_bytes() const { return std::accumulate(slot_bytes.begin(), slot_bytes.end(), int64_t{0}); }

MemoryPlan plan_memory(const ir::Graph& graph, const Schedule& schedule, const StreamPlan& streams) {
  const auto n = static_cast<std::size_t>(graph.size());
  // The value whose memory each value's tensor uses: views share their base's; an ATen cast or
  // detach may return its input itself, and so does a bitcast of a contiguous one; a concat of
  // views that lie side by side in one buffer returns a view of it (runtime/aten_executor), so when
  // its inputs share a root it keeps that root alive; constants and iota own nothing a kernel stores.
  std::vector<ir::ValueId> root(n, -1);
  for (ir::ValueId id = 0; id < graph.size(); ++id) {
    const ir::Node& node = graph.node(id);
    const auto i = static_cast<std::size_t>(id);
    if (node.op == ir::Op::constant || node.op == ir::Op::iota) continue;
    const auto root_of = [&](ir::ValueId value) { return root[static_cast<std::size_t>(value)]; };
    const auto shares_first_root = [&](ir::ValueId in) { return root_of(in) == root_of(node.inputs[0]); };
    if (is_lazy(graph, schedule, id) && node.op != ir::Op::input) {
      root[i] = root[static_cast<std::size_t>(schedule.accesses[i].base)];
    } else if (schedule.kernel_of[i] < 0 && (node.op == ir::Op::cast || node.op == ir::Op::detach || node.op == ir::Op::bitcast)) {
      root[i] = root[static_cast<std::size_t>(node.inputs[0])];
    } else if (schedule.kernel_of[i] < 0 && node.op == ir::Op::concat && root_of(node.inputs[0]) >= 0 &&
               std::all_of(node.inputs.begin(), node.inputs.end(), shares_first_root)) {
      root[i] = root_of(node.inputs[0]);
    } else {
      root[i] = id;
    }
  }

  constexpr int kEscapes = 1 << 30;
  std::vector<int> last_read(n, -1);
  for (ir::ValueId output : graph.outputs()) {
    const ir::ValueId r = root[static_cast<std::size_t>(output)];
    if (r >= 0) last_read[static_cast<std::size_t>(r)] = kEscapes;
  }
  std::vector<std::vector<ir::ValueId>> stored_at(schedule.steps.size());
  for (std::size_t s = 0; s < schedule.steps.size(); ++s) {
    const ScheduleStep& step = schedule.steps[s];
    std::vector<ir::ValueId> nodes = {step.index};
    if (step.kind == ScheduleStep::Kind::kernel) {
      const FusedKernel& kernel = schedule.kernels[static_cast<std::size_t>(step.index)];
      nodes = kernel.members;
      stored_at[s] = kernel.stores;
    }
    // A step on the second stream reads its inputs until the main stream waits for its batch, which
    // it does before the join step's own work: that step may store into what they read.
    const int32_t batch = streams.batch.empty() ? -1 : streams.batch[s];
    const int read_until = batch >= 0 ? streams.join_step(batch) - 1 : static_cast<int>(s);
    for (ir::ValueId id : nodes) {
      for (ir::ValueId in : graph.node(id).inputs) {
        const ir::ValueId r = root[static_cast<std::size_t>(in)];
        if (r >= 0) last_read[static_cast<std::size_t>(r)] = std::max(last_read[static_cast<std::size_t>(r)], read_until);
      }
    }
  }

  MemoryPlan plan;
  plan.slot_of.assign(n, -1);
  std::vector<int> slot_free_after;  // the last step reading the slot's current value
  for (std::size_t s = 0; s < stored_at.size(); ++s) {
    for (ir::ValueId id : stored_at[s]) {
      const auto i = static_cast<std::size_t>(id);
      if (last_read[i] == kEscapes) continue;
      const int64_t bytes = (graph.type(id).numel() * dtype_bytes(graph.type(id).dtype) + 63) / 64 * 64;
      plan.planned_bytes += bytes;
      // Best fit among the free slots: the smallest that holds it, else the largest, grown.
      int best = -1;
      for (std::size_t k = 0; k < plan.slot_bytes.size(); ++k) {
        if (slot_free_after[k] >= static_cast<int>(s)) continue;
        const bool fits = plan.slot_bytes[k] >= bytes;
        if (best < 0) {
          best = static_cast<int>(k);
          continue;
        }
        const int64_t current = plan.slot_bytes[static_cast<std::size_t>(best)];
        if (fits ? (current < bytes || plan.slot_bytes[k] < current) : (current < bytes && plan.slot_bytes[k] > current)) {
          best = static_cast<int>(k);
        }
      }
      if (best < 0) {
        best = static_cast<int>(plan.slot_bytes.size());
        plan.slot_bytes.push_back(0);
        slot_free_after.push_back(0);
      }
      plan.slot_bytes[static_cast<std::size_t>(best)] = std::max(plan.slot_bytes[static_cast<std::size_t>(best)], bytes);
      slot_free_after[static_cast<std::size_t>(best)] = std::max(last_read[i], static_cast<int>(s));
      plan.slot_of[i] = best;
    }
  }
  return plan;
}

}  // namespace trainc
