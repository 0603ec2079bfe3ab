#include "trainc/compile/partition/partition.h"

#include <algorithm>
#include <functional>

#include "trainc/compile/optimizations.h"
#include "trainc/compile/passes/dce.h"
#include "trainc/compile/passes/rebuild.h"

namespace trainc {
namespace {

using ir::Graph;
using ir::Op;
using ir::OpKind;
using ir::ValueId;

bool recomputable(Op op) {
  switch (ir::op_kind(op)) {
    case OpKind::kUnary:
    case OpKind::kBinary:
    case OpKind::kTernary:
    case OpKind::kView:
    case OpKind::kConstant:
      return true;
    default:
      return false;
  }
}

// A float32 parameter (an input the step differentiates), or a reshaped, permuted or sliced view
// of one, cast to bf16 or f16: autocast's weights. Not a batch's data, which costs nothing to keep
// in float32, and not an expanded view, which may be far larger than the parameter.
bool narrowed_parameter(const Graph& g, const std::vector<bool>& parameter, const ir::Node& node) {
  if (node.op != Op::cast || !ir::is_half_precision(node.type.dtype)) return false;
  ValueId source = node.inputs[0];
  while (ir::op_kind(g.node(source).op) == OpKind::kView && g.node(source).op != Op::expand) source = g.node(source).inputs[0];
  return g.node(source).op == Op::input && parameter[static_cast<std::size_t>(source)] && g.type(source).dtype == ir::DType::f32;
}

enum class Source { none, step_input, saved, recomputed };

}  // namespace

StepPrograms partition(const JointGraph& joint) {
  const Graph& g = joint.graph;
  const auto n = static_cast<std::size_t>(g.size());
  // The seed is the last input; everything depending on it is backward.
  ValueId seed = -1;
  std::vector<int> input_position(n, -1);
  int inputs = 0;
  for (ValueId id = 0; id < g.size(); ++id) {
    if (g.node(id).op == Op::input) {
      input_position[static_cast<std::size_t>(id)] = inputs++;
      seed = id;
    }
  }
  std::vector<bool> backward(n, false);
  for (ValueId id = 0; id < g.size(); ++id) {
    if (id == seed) backward[static_cast<std::size_t>(id)] = true;
    for (ValueId input : g.node(id).inputs) {
      if (backward[static_cast<std::size_t>(input)]) backward[static_cast<std::size_t>(id)] = true;
    }
  }

  // What the backward reads from the forward side, and how it gets it.
  std::vector<Source> source(n, Source::none);
  const bool save_casts = optimization_enabled(Optimization::saved_casts);
  std::vector<bool> parameter(n, false);
  for (ValueId id = 0; id < g.size(); ++id) {
    const int position = input_position[static_cast<std::size_t>(id)];
    parameter[static_cast<std::size_t>(id)] =
        position >= 0 && std::find(joint.gradient_inputs.begin(), joint.gradient_inputs.end(), position) != joint.gradient_inputs.end();
  }
  std::function<void(ValueId)> need = [&](ValueId id) {
    Source& s = source[static_cast<std::size_t>(id)];
    if (s != Source::none) return;
    const ir::Node& node = g.node(id);
    if (node.op == Op::input) {
      s = Source::step_input;
    } else if (recomputable(node.op) && !(save_casts && narrowed_parameter(g, parameter, node))) {
      s = Source::recomputed;
      for (ValueId input : node.inputs) need(input);
    } else {
      s = Source::saved;
    }
  };
  for (ValueId id = 0; id < g.size(); ++id) {
    if (!backward[static_cast<std::size_t>(id)] || id == seed) continue;
    for (ValueId input : g.node(id).inputs) {
      if (!backward[static_cast<std::size_t>(input)]) need(input);
    }
  }

  StepPrograms programs;
  programs.forward_results = joint.forward_outputs;

  // Forward: the joint graph without its backward half; the saved values become outputs.
  std::vector<bool> keep(n);
  std::vector<ValueId> identity(n);
  for (std::size_t i = 0; i < n; ++i) {
    keep[i] = !backward[i];
    identity[i] = static_cast<ValueId>(i);
  }
  std::vector<ValueId> forward_outputs(g.outputs().begin(), g.outputs().begin() + joint.forward_outputs);
  for (ValueId id = 0; id < g.size(); ++id) {
    if (source[static_cast<std::size_t>(id)] == Source::saved) forward_outputs.push_back(id);
  }
  Graph forward_with_all = keep_nodes(g, keep, identity);
  // keep_nodes renumbers; map the kept ids through a second pass over the same order.
  std::vector<ValueId> renumbered(n, -1);
  ValueId next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (keep[i]) renumbered[i] = next++;
  }
  std::vector<ValueId> outputs;
  for (ValueId id : forward_outputs) outputs.push_back(renumbered[static_cast<std::size_t>(id)]);
  programs.forward = ir::eliminate_dead_code(Graph::from_nodes(forward_with_all.nodes(), outputs));
  programs.saved = static_cast<int>(forward_outputs.size()) - joint.forward_outputs;

  // Backward: inputs first (step inputs, saved values, the seed), then the recomputed forward
  // nodes and the backward nodes in their original order.
  Graph bw;
  std::vector<ValueId> mapped(n, -1);
  for (ValueId id = 0; id < g.size(); ++id) {
    if (source[static_cast<std::size_t>(id)] != Source::step_input) continue;
    mapped[static_cast<std::size_t>(id)] = bw.add_input(g.node(id).name, g.type(id));
    programs.backward_step_inputs.push_back(input_position[static_cast<std::size_t>(id)]);
  }
  for (ValueId id = 0; id < g.size(); ++id) {
    if (source[static_cast<std::size_t>(id)] == Source::saved) mapped[static_cast<std::size_t>(id)] = bw.add_input("saved%" + std::to_string(id), g.type(id));
  }
  mapped[static_cast<std::size_t>(seed)] = bw.add_input(g.node(seed).name, g.type(seed));
  for (ValueId id = 0; id < g.size(); ++id) {
    const bool recompute = source[static_cast<std::size_t>(id)] == Source::recomputed;
    if (!recompute && (!backward[static_cast<std::size_t>(id)] || id == seed)) continue;
    const ir::Node& node = g.node(id);
    std::vector<ValueId> node_inputs;
    for (ValueId input : node.inputs) node_inputs.push_back(mapped[static_cast<std::size_t>(input)]);
    mapped[static_cast<std::size_t>(id)] = bw.add(node.op, node_inputs, node.attrs);
    if (recompute) ++programs.recomputed;
  }
  for (std::size_t i = static_cast<std::size_t>(joint.forward_outputs); i < g.outputs().size(); ++i) {
    bw.mark_output(mapped[static_cast<std::size_t>(g.outputs()[i])]);
  }
  programs.backward = ir::eliminate_dead_code(bw);
  ir::verify(programs.forward);
  ir::verify(programs.backward);
  return programs;
}

}  // namespace trainc
