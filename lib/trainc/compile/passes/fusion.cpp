#include "trainc/compile/passes/fusion.h"

#include <algorithm>
#include <optional>
#include <set>

namespace trainc {
namespace {

using ir::Op;
using ir::OpKind;
using ir::ValueId;

// The widest row a column member sums: a row-sized block (at most 1024 threads of 8 columns) then
// keeps two groups of 8 sums per thread, four under max-autotune's halved block.
constexpr int64_t kMaxColumnSumColumns = 16384;
// Fewer rows than this make a kernel with column sums run on too few blocks to spread over a GPU
// (a block takes rows, one or, a warp each, eight; the kernel it joins would otherwise have run a
// block per row or finer).
constexpr int64_t kMinColumnSumRows = 1024;
// A reduction over every dimension runs as a single row, one block: it joins the kernel that makes
// what it reduces only up to this many elements (a loss's mean over its 2,048 rows: the rows
// masked, summed and counted by one launch instead of three).
constexpr int64_t kMaxWholeReductionElements = 16384;
// How many of the newest kernels a column sum of a value no kernel computes looks through for one
// that loads the value, and how many steps it waits for a newer one (then it is placed before the
// next step that is not a pointwise node joining a kernel).
constexpr int kColumnSumLookback = 8;

bool is_pointwise(Op op) {
  const OpKind kind = ir::op_kind(op);
  return kind == OpKind::kUnary || kind == OpKind::kBinary || kind == OpKind::kTernary;
}

// Generated kernels compute in float32, float64, int64 and bool, and read and write bf16. A cast
// into bf16 of a parameter or of a view stays an ATen call: ATen keeps the source's strides, so a
// weight cast for a GEMM reaches it transposed, as eager's does, while a kernel would store it
// contiguous, and the bf16 GEMM then takes a path that rounds differently (twice the error on a
// small addmm, measured) - enough to flip relu masks near zero and move a bf16 mlp's gradients far
// from eager's in about one draw of inputs in eight. A cast of a value a step computes (an
// activation, a gradient) has the layout ATen would give it, so it joins the kernel that makes the
// value, and the float32 original need not be stored at all. Float16 values stay with ATen.
bool kernel_computes(const ir::Graph& graph, const ir::Node& node, bool column_sums) {
  const bool op_ok = is_pointwise(node.op) ||
                     (ir::op_kind(node.op) == OpKind::kReduction && ir::is_floating(node.type.dtype) && trailing_split(graph, node)) ||
                     (column_sums && leading_split(graph, node));
  if (!op_ok || node.type.dtype == ir::DType::f16) return false;
  if (node.op == Op::cast && node.type.dtype == ir::DType::bf16) {
    const ir::Node& source = graph.node(node.inputs[0]);
    if (source.op == Op::input || ir::op_kind(source.op) == OpKind::kView) return false;
  }
  return std::none_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) { return graph.type(in).dtype == ir::DType::f16; });
}

std::vector<int64_t> row_shape(const FusedKernel& kernel, bool keepdim) {
  std::vector<int64_t> shape(kernel.domain.begin(), kernel.domain.begin() + kernel.reduce_from);
  if (keepdim) shape.resize(kernel.domain.size(), 1);
  return shape;
}

struct Grouping {
  const ir::Graph& graph;
  Schedule& schedule;
  std::vector<KernelRole> role_of;

  KernelRole role(ValueId value) const { return role_of[static_cast<std::size_t>(value)]; }
  // Whether an element member of `kernel` reads `value` (not a member) at the kernel's shape: the
  // kernel loads each of its elements anyway.
  bool reads_whole(const FusedKernel& kernel, ValueId value) const {
    for (std::size_t i = 0; i < kernel.members.size(); ++i) {
      const ir::Node& member = graph.node(kernel.members[i]);
      if (kernel.roles[i] == KernelRole::element && member.type.shape == kernel.domain &&
          std::find(member.inputs.begin(), member.inputs.end(), value) != member.inputs.end()) {
        return true;
      }
    }
    return false;
  }
  bool in_kernel(ValueId value, int kernel) const { return schedule.kernel_of[static_cast<std::size_t>(value)] == kernel; }

  // The role `id` would take in `kernel`, or nullopt when it cannot join it.
  std::optional<KernelRole> join_role(int kernel_index, ValueId id) const {
    const FusedKernel& kernel = schedule.kernels[static_cast<std::size_t>(kernel_index)];
    const ir::Node& node = graph.node(id);
    if (const std::optional<int> leading = leading_split(graph, node)) {
      // A column member: a sum over the kernel's rows of an element member over its whole domain.
      const ValueId x = node.inputs[0];
      const bool computed_here = in_kernel(x, kernel_index) && role(x) == KernelRole::element;
      if (!(computed_here || (!in_kernel(x, kernel_index) && reads_whole(kernel, x))) || graph.type(x).shape != kernel.domain) return std::nullopt;
      // Its rows are the kernel's: those its reduction keeps (none for a reduction over every
      // dimension, which no column sum joins), or those of the column sums already in it.
      const bool other_rows = kernel.has_reduction() ? *leading != kernel.reduce_from
                                                     : kernel.column_split != 0 && *leading != kernel.column_split;
      if (*leading >= static_cast<int>(kernel.domain.size()) || other_rows) return std::nullopt;
      // Each thread keeps its columns' sums in registers: a few groups of 8 at most.
      int64_t columns = 1;
      for (std::size_t d = static_cast<std::size_t>(*leading); d < kernel.domain.size(); ++d) columns *= kernel.domain[d];
      if (columns > kMaxColumnSumColumns || graph.type(x).numel() / columns < kMinColumnSumRows) return std::nullopt;
      return KernelRole::column;
    }
    // A column member's value exists only after the kernel (its finish adds the blocks' sums).
    if (std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) { return in_kernel(in, kernel_index) && role(in) == KernelRole::column; })) {
      return std::nullopt;
    }
    if (ir::op_kind(node.op) == OpKind::kReduction) {
      const int split = *trailing_split(graph, node);
      const ValueId x = node.inputs[0];
      // A reduction over everything has a single row, which one block runs: only a small one joins.
      if (split == 0 && graph.type(x).numel() > kMaxWholeReductionElements) return std::nullopt;
      if (graph.type(x).shape != kernel.domain || role(x) != KernelRole::element) return std::nullopt;
      if (kernel.has_reduction() && split != kernel.reduce_from) return std::nullopt;
      if (kernel.column_split != 0 && split != kernel.column_split) return std::nullopt;
      return KernelRole::row;
    }
    const std::vector<int64_t>& shape = node.type.shape;
    const auto inputs_in_kernel_are = [&](auto accept) {
      return std::all_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) { return !in_kernel(in, kernel_index) || accept(in); });
    };
    if (shape == kernel.domain) {
      const std::vector<int64_t> broadcast_row = row_shape(kernel, true);
      if (inputs_in_kernel_are([&](ValueId in) {
            return role(in) == KernelRole::element || graph.type(in).shape == broadcast_row;
          })) {
        return KernelRole::element;
      }
      return std::nullopt;
    }
    if (kernel.has_reduction() && (shape == row_shape(kernel, false) || shape == row_shape(kernel, true)) &&
        inputs_in_kernel_are([&](ValueId in) { return role(in) == KernelRole::row && graph.type(in).shape == shape; })) {
      return KernelRole::row;
    }
    return std::nullopt;
  }
};

// A reduction's axes, negative ones counted from the end.
std::set<int> reduced_axes(const ir::Graph& graph, const ir::Node& node) {
  const auto rank = static_cast<int>(graph.type(node.inputs[0]).rank());
  std::set<int> axes;
  for (int64_t axis : node.attrs.ints) axes.insert(static_cast<int>(axis < 0 ? axis + rank : axis));
  return axes;
}

}  // namespace

std::optional<int> leading_split(const ir::Graph& graph, const ir::Node& node) {
  if ((node.op != Op::sum && node.op != Op::sum_to_float) || node.type.dtype != ir::DType::f32) return std::nullopt;
  const auto rank = static_cast<int>(graph.type(node.inputs[0]).rank());
  const std::set<int> axes = reduced_axes(graph, node);
  const int split = static_cast<int>(axes.size());
  if (axes.empty() || split >= rank || *axes.begin() != 0 || *axes.rbegin() != split - 1) return std::nullopt;
  return split;
}

std::optional<int> trailing_split(const ir::Graph& graph, const ir::Node& node) {
  const auto rank = static_cast<int>(graph.type(node.inputs[0]).rank());
  const std::set<int> axes = reduced_axes(graph, node);
  const int split = rank - static_cast<int>(axes.size());
  if (axes.empty() || *axes.begin() != split) return std::nullopt;
  return split;
}

int Schedule::fused_nodes() const {
  int count = 0;
  for (const FusedKernel& kernel : kernels) count += static_cast<int>(kernel.members.size());
  return count;
}

bool is_lazy(const ir::Graph& graph, const Schedule& schedule, ValueId value) {
  const ir::Node& node = graph.node(value);
  const OpKind kind = ir::op_kind(node.op);
  if (kind == OpKind::kInput || node.op == Op::constant || node.op == Op::iota) return true;
  return kind == OpKind::kView && schedule.accesses[static_cast<std::size_t>(value)].base != value;
}

Schedule schedule_kernels(const ir::Graph& graph, const std::vector<bool>& copies, bool column_sums) {
  const auto n = static_cast<std::size_t>(graph.size());
  Schedule schedule;
  schedule.accesses = codegen::strided_accesses(graph);
  schedule.kernel_of.assign(n, -1);
  Grouping grouping{graph, schedule, std::vector<KernelRole>(n, KernelRole::element)};

  // Steps run in the order they are made. A node joins a kernel only if everything else it reads
  // comes from older steps, so every step reads only what earlier steps made: no cycles, and a
  // kernel can run where it was made however many members join it later.
  std::vector<int> newest_source(n, -1);  // per value: the newest step its tensor comes from
  std::vector<int> kernel_step;           // per kernel: the step it runs as

  // `id` joins kernel `k` if it can take a role there and everything else it reads is older than
  // the kernel's step.
  const auto join = [&](int k, ValueId id) {
    const ir::Node& node = graph.node(id);
    const std::optional<KernelRole> role = grouping.join_role(k, id);
    if (!role) return false;
    const int step = kernel_step[static_cast<std::size_t>(k)];
    const bool older = std::all_of(node.inputs.begin(), node.inputs.end(), [&](ValueId other) {
      return grouping.in_kernel(other, k) || newest_source[static_cast<std::size_t>(other)] < step;
    });
    if (!older) return false;
    FusedKernel& kernel = schedule.kernels[static_cast<std::size_t>(k)];
    if (*role == KernelRole::column) {
      kernel.column_split = *leading_split(graph, node);
    } else if (ir::op_kind(node.op) == OpKind::kReduction) {
      kernel.reduce_from = *trailing_split(graph, node);
    }
    kernel.members.push_back(id);
    kernel.roles.push_back(*role);
    grouping.role_of[static_cast<std::size_t>(id)] = *role;
    schedule.kernel_of[static_cast<std::size_t>(id)] = k;
    newest_source[static_cast<std::size_t>(id)] = step;
    return true;
  };
  const auto add_aten_step = [&](ValueId id) {
    newest_source[static_cast<std::size_t>(id)] = static_cast<int>(schedule.steps.size());
    schedule.steps.push_back({ScheduleStep::Kind::aten, id});
  };
  // Column sums of a value no kernel has loaded yet, each with the step count when it was met.
  // Autodiff emits a layer norm's bias gradient, sum(g), before the kernel that loads g; such a sum
  // waits for that kernel and joins it. It becomes an ATen call (runtime/column_sums) before its
  // first reader, or once kColumnSumLookback steps have passed without a kernel taking it, so the
  // value it sums is not kept alive much longer than it would have been. A sum placed for its age
  // goes just before the next other ATen call or new kernel: placed right after a kernel, it would
  // keep the nodes that follow from joining that kernel as the newest step.
  std::vector<std::pair<ValueId, int>> waiting_sums;
  const auto aged = [&](const std::pair<ValueId, int>& waiting) {
    return static_cast<int>(schedule.steps.size()) - waiting.second >= kColumnSumLookback;
  };
  const auto place_waiting_sums = [&](auto must_place) {
    for (auto it = waiting_sums.begin(); it != waiting_sums.end();) {
      if (must_place(*it)) {
        add_aten_step(it->first);
        it = waiting_sums.erase(it);
      } else {
        ++it;
      }
    }
  };

  for (ValueId id = 0; id < graph.size(); ++id) {
    const ir::Node& node = graph.node(id);
    place_waiting_sums([&](const std::pair<ValueId, int>& waiting) {
      return std::find(node.inputs.begin(), node.inputs.end(), waiting.first) != node.inputs.end();
    });
    int& source = newest_source[static_cast<std::size_t>(id)];
    if (is_lazy(graph, schedule, id)) {
      for (ValueId in : node.inputs) source = std::max(source, newest_source[static_cast<std::size_t>(in)]);
      continue;
    }
    const bool column_sum = column_sums && leading_split(graph, node).has_value();
    if (kernel_computes(graph, node, column_sums)) {
      for (ValueId in : node.inputs) {
        const int k = schedule.kernel_of[static_cast<std::size_t>(in)];
        if (k >= 0 && join(k, id)) break;
      }
      // A column sum of a value no kernel computes (a product's output) joins the newest of the
      // last few kernels that load it whole (a layer norm's backward reads its output's gradient).
      for (int k = static_cast<int>(schedule.kernels.size()) - 1, tried = 0; source < 0 && column_sum && k >= 0 && tried < kColumnSumLookback;
           --k, ++tried) {
        if (schedule.kernel_of[static_cast<std::size_t>(node.inputs[0])] < 0 &&
            grouping.reads_whole(schedule.kernels[static_cast<std::size_t>(k)], node.inputs[0])) {
          join(k, id);
        }
      }
      // The newest step, when it is a kernel, takes a pointwise node that could not join a kernel
      // it reads, if the kernel starts with copies made by rematerialize_loads (the node is one of
      // the kernel's they were made for), or if the node reads no kernel's value at all: a value
      // recomputed from saved ones (x - mean in a layer norm's backward, between the two sums that
      // read it) is then computed where it is read instead of by a kernel of its own.
      if (source < 0 && !column_sum && ir::op_kind(node.op) != OpKind::kReduction && !schedule.steps.empty() &&
          schedule.steps.back().kind == ScheduleStep::Kind::kernel) {
        const int newest = schedule.steps.back().index;
        const bool made_for_copies =
            !copies.empty() && copies[static_cast<std::size_t>(schedule.kernels[static_cast<std::size_t>(newest)].members.front())];
        const bool reads_no_kernel = std::none_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) {
          return schedule.kernel_of[static_cast<std::size_t>(in)] >= 0;
        });
        if (made_for_copies || reads_no_kernel) join(newest, id);
      }
      if (source < 0 && column_sum) {
        // A column sum joins the kernel of what it sums, or waits for one that loads it.
        waiting_sums.emplace_back(id, static_cast<int>(schedule.steps.size()));
        continue;
      }
      if (source < 0) {
        place_waiting_sums(aged);
        FusedKernel kernel;
        const bool reduction = ir::op_kind(node.op) == OpKind::kReduction;
        kernel.domain = reduction ? graph.type(node.inputs[0]).shape : node.type.shape;
        kernel.reduce_from = reduction ? *trailing_split(graph, node) : static_cast<int>(kernel.domain.size());
        const KernelRole role = reduction ? KernelRole::row : KernelRole::element;
        kernel.members = {id};
        kernel.roles = {role};
        grouping.role_of[static_cast<std::size_t>(id)] = role;
        schedule.kernel_of[static_cast<std::size_t>(id)] = static_cast<int32_t>(schedule.kernels.size());
        source = static_cast<int>(schedule.steps.size());
        kernel_step.push_back(source);
        schedule.steps.push_back({ScheduleStep::Kind::kernel, static_cast<int32_t>(schedule.kernels.size())});
        schedule.kernels.push_back(std::move(kernel));
      }
      // The kernel `id` went to may now load what a waiting column sum adds up.
      const int k = schedule.kernel_of[static_cast<std::size_t>(id)];
      if (k >= 0 && grouping.role(id) == KernelRole::element) {
        for (auto it = waiting_sums.begin(); it != waiting_sums.end();) {
          const ValueId summed = graph.node(it->first).inputs[0];
          if (std::find(node.inputs.begin(), node.inputs.end(), summed) != node.inputs.end() && join(k, it->first)) {
            it = waiting_sums.erase(it);
          } else {
            ++it;
          }
        }
      }
    } else {
      place_waiting_sums(aged);
      add_aten_step(id);
    }
  }
  place_waiting_sums([](const std::pair<ValueId, int>&) { return true; });

  // Stores: kernel members read outside their kernel or returned by the program.
  std::vector<bool> read_outside(n, false);
  for (ValueId output : graph.outputs()) read_outside[static_cast<std::size_t>(output)] = true;
  for (ValueId id = 0; id < graph.size(); ++id) {
    for (ValueId in : graph.node(id).inputs) {
      const int k = schedule.kernel_of[static_cast<std::size_t>(in)];
      if (k >= 0 && schedule.kernel_of[static_cast<std::size_t>(id)] != k) read_outside[static_cast<std::size_t>(in)] = true;
    }
  }
  for (FusedKernel& kernel : schedule.kernels) {
    for (ValueId member : kernel.members) {
      if (read_outside[static_cast<std::size_t>(member)]) kernel.stores.push_back(member);
    }
  }

  return schedule;
}

}  // namespace trainc
