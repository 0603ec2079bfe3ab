#include "trainc/compile/partition/partition.h"

#include <algorithm>
#include <functional>
#include <map>

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

int64_t bytes_of(const Graph& g, ValueId value) { return g.type(value).numel() * ir::dtype_bytes(g.type(value).dtype); }

// Which pointwise forward values are worth saving rather than recomputing, judged by what their
// recomputation would read: the saved values and step inputs at its edge (its frontier), each
// with the bytes it is read for. Decided in the forward's order, so a value's frontier stops at
// the values before it that are saved. A value is saved when
//   - everything it is computed from is a reduction's result or such a value: a per-row
//     statistic (a layer norm's mean and 1/std). Recomputed, it is a kernel of its own over a few
//     kilobytes, since the backward's kernels run over elements and cannot start with a row value;
//     saved, it costs those kilobytes;
//   - or recomputing it reads more than a quarter more bytes than it holds: a residual stream
//     (x + cast(attention's output) read the whole chain of earlier layers' outputs again:
//     GPT-2's backward began with one kernel that read 0.7 GB and wrote 1.2 GB), or a layer
//     norm's bf16 output (the float32 input read again to make it).
// A value that costs about its own size to recompute (an activation of a saved product, x-hat of
// a saved input) is recomputed, as before: keeping it would cost its bytes for no saving.
std::vector<bool> worth_saving(const Graph& g, const std::vector<bool>& backward) {
  constexpr double kReadAllowance = 1.25;  // recomputation may read this many times the value's bytes
  const auto n = static_cast<std::size_t>(g.size());
  std::vector<bool> save(n, false), statistic(n, false);
  std::vector<std::map<ValueId, int64_t>> frontier(n);  // value -> bytes read of it
  const auto at_edge = [&](ValueId id) { frontier[static_cast<std::size_t>(id)] = {{id, bytes_of(g, id)}}; };
  for (ValueId id = 0; id < g.size(); ++id) {
    if (backward[static_cast<std::size_t>(id)]) continue;
    const ir::Node& node = g.node(id);
    const OpKind kind = ir::op_kind(node.op);
    if (kind == OpKind::kConstant) continue;
    if (!recomputable(node.op)) {
      at_edge(id);
      statistic[static_cast<std::size_t>(id)] = kind == OpKind::kReduction;
      continue;
    }
    std::map<ValueId, int64_t>& reads = frontier[static_cast<std::size_t>(id)];
    for (ValueId input : node.inputs) {
      for (const auto& [value, bytes] : frontier[static_cast<std::size_t>(input)]) {
        // A view reads only its own elements of a larger value (a slice), at most all of them.
        const int64_t read = kind == OpKind::kView ? std::min(bytes, bytes_of(g, id)) : bytes;
        int64_t& entry = reads[value];
        entry = std::max(entry, read);
      }
    }
    // Values of the step's inputs alone are left to the rules in `need`: a parameter's cast is
    // saved (saved_casts), the batch's data is kept by the caller anyway.
    const bool of_step_inputs = std::all_of(reads.begin(), reads.end(), [&](const auto& read) {
      return g.node(read.first).op == Op::input;
    });
    if (kind == OpKind::kView || of_step_inputs) continue;
    const bool of_statistics = std::all_of(reads.begin(), reads.end(), [&](const auto& read) {
      return statistic[static_cast<std::size_t>(read.first)];
    });
    int64_t read_bytes = 0;
    for (const auto& read : reads) read_bytes += read.second;
    const double bytes = static_cast<double>(bytes_of(g, id)), read = static_cast<double>(read_bytes);
    // A statistic broadcast to a larger shape (row + column statistics) is cheap to recompute and
    // costly to keep: only statistics about the size of what they are made from are saved.
    if ((of_statistics && bytes <= kReadAllowance * read) || read > kReadAllowance * bytes) {
      save[static_cast<std::size_t>(id)] = true;
      statistic[static_cast<std::size_t>(id)] = of_statistics;
      at_edge(id);
    }
  }
  return save;
}

// Pointwise forward values that an ATen call (a GEMM, attention: not recomputable) reads both in the
// forward and in the backward, directly or through views. The forward writes such a value to
// memory anyway for its reader there; recomputing it for the backward's reader would read its
// inputs and write it again, a whole pass, where keeping it costs only its bytes between the two
// programs. Eager keeps it too (the GEMM saves its operand). GPT-2's MLP activation gelu(h) is one:
// the second linear reads it forward, and its weight gradient gelu(h)^T g backward.
std::vector<bool> operands_of_both_halves(const Graph& g, const std::vector<bool>& backward) {
  const auto n = static_cast<std::size_t>(g.size());
  std::vector<bool> read_forward(n, false), read_backward(n, false), result(n, false);
  for (ValueId id = 0; id < g.size(); ++id) {
    const ir::Node& node = g.node(id);
    // A reduction is no such reader: a kernel may sum a value without storing it.
    if (recomputable(node.op) || node.op == Op::input || ir::op_kind(node.op) == OpKind::kReduction) continue;
    for (ValueId input : node.inputs) {
      while (ir::op_kind(g.node(input).op) == OpKind::kView) input = g.node(input).inputs[0];
      (backward[static_cast<std::size_t>(id)] ? read_backward : read_forward)[static_cast<std::size_t>(input)] = true;
    }
  }
  // Values of the step's inputs alone are left to the caller (data is kept anyway) and to saved_casts.
  std::vector<bool> of_inputs(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const ir::Node& node = g.node(static_cast<ValueId>(i));
    of_inputs[i] = node.op == Op::input || ir::op_kind(node.op) == OpKind::kConstant ||
                   (recomputable(node.op) && std::all_of(node.inputs.begin(), node.inputs.end(),
                                                         [&](ValueId in) { return of_inputs[static_cast<std::size_t>(in)]; }));
    result[i] = !backward[i] && read_forward[i] && read_backward[i] && recomputable(node.op) && !of_inputs[i];
  }
  return result;
}

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
  const std::vector<bool> costly = optimization_enabled(Optimization::recompute_cost) ? worth_saving(g, backward) : std::vector<bool>(n, false);
  const std::vector<bool> operand =
      optimization_enabled(Optimization::saved_operands) ? operands_of_both_halves(g, backward) : std::vector<bool>(n, false);
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
    } else if (recomputable(node.op) && !(save_casts && narrowed_parameter(g, parameter, node)) && !costly[static_cast<std::size_t>(id)] &&
               !operand[static_cast<std::size_t>(id)]) {
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
