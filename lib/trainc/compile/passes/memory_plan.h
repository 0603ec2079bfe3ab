// defines: MemoryPlan, plan_memory
//
// Contract: assigns every value a fused kernel stores to a slot of a per-program arena, so that
// values whose lifetimes do not overlap share memory, and the arena is reused by every run of
// the program (no allocation, no page faults for intermediates). A value lives from the step that
// stores it to the last step that reads it or any view or alias of it. Values the program returns
// (and whatever they alias) escape the run: they get fresh memory.
// A step on a second stream (`streams`, passes/stream_plan) reads its inputs until the main stream
// waits for it.
// Example: a = k0(x); b = k1(a); c = k2(b); return c   puts a and c in one slot, b in another.
#pragma once

#include <cstdint>
#include <vector>

#include "trainc/compile/passes/fusion.h"
#include "trainc/compile/passes/stream_plan.h"

namespace trainc {

struct MemoryPlan {
  std::vector<int64_t> slot_bytes;  // the arena: one buffer per slot
  std::vector<int32_t> slot_of;     // per value: its slot, or -1 (fresh memory)
  int64_t planned_bytes = 0;        // what the planned values would take without sharing
  int64_t arena_bytes() const;
};

MemoryPlan plan_memory(const ir::Graph& graph, const Schedule& schedule, const StreamPlan& streams = {});

}  // namespace trainc
