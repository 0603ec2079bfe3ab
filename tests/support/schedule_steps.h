// defines: steps_of — a schedule as text, for tests of the fusion's choices
#pragma once

#include <string>
#include <vector>

#include "trainc/compile/passes/fusion.h"

namespace trainc::test {

// The kernels as lists of op names, in step order, with ATen calls as "aten:<op>".
inline std::vector<std::string> steps_of(const ir::Graph& graph, const Schedule& schedule) {
  std::vector<std::string> steps;
  for (const ScheduleStep& step : schedule.steps) {
    if (step.kind == ScheduleStep::Kind::aten) {
      steps.push_back(std::string("aten:") + ir::op_name(graph.node(step.index).op));
      continue;
    }
    std::string kernel;
    for (ir::ValueId member : schedule.kernels[static_cast<std::size_t>(step.index)].members) {
      kernel += (kernel.empty() ? "" : " ") + std::string(ir::op_name(graph.node(member).op));
    }
    steps.push_back(kernel);
  }
  return steps;
}

}  // namespace trainc::test
