#include "trainc/compile/passes/rematerialize.h"

#include <algorithm>
#include <map>
#include <set>

#include "trainc/compile/passes/dce.h"

namespace trainc {

using ir::Node;
using ir::OpKind;
using ir::ValueId;

namespace {

// The members of `kernel` that `value` is computed from (itself included), when all are element
// members, none a reduction, and there are at most kMaxCopiedNodes of them; empty otherwise.
std::set<ValueId> cheap_cone(const ir::Graph& graph, const Schedule& schedule, int kernel, ValueId value) {
  const FusedKernel& k = schedule.kernels[static_cast<std::size_t>(kernel)];
  std::map<ValueId, KernelRole> role;
  for (std::size_t i = 0; i < k.members.size(); ++i) role[k.members[i]] = k.roles[i];
  std::set<ValueId> cone;
  std::vector<ValueId> stack = {value};
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (schedule.kernel_of[static_cast<std::size_t>(v)] != kernel || !cone.insert(v).second) continue;
    if (role.at(v) != KernelRole::element || ir::op_kind(graph.node(v).op) == OpKind::kReduction ||
        static_cast<int>(cone.size()) > kMaxCopiedNodes) {
      return {};
    }
    for (ValueId in : graph.node(v).inputs) stack.push_back(in);
  }
  return cone;
}

}  // namespace

Rematerialized rematerialize_loads(const ir::Graph& graph, const Schedule& schedule) {
  const auto n = static_cast<std::size_t>(graph.size());
  std::vector<std::vector<ValueId>> readers(n);
  for (ValueId id = 0; id < graph.size(); ++id) {
    for (ValueId in : std::set<ValueId>(graph.node(id).inputs.begin(), graph.node(id).inputs.end())) {
      readers[static_cast<std::size_t>(in)].push_back(id);
    }
  }
  const std::set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  const auto kernel_of = [&](ValueId v) { return schedule.kernel_of[static_cast<std::size_t>(v)]; };

  // Per reader kernel: the members of other kernels to copy in front of it.
  std::map<int, std::set<ValueId>> to_copy;
  Rematerialized result;
  for (int k = 0; k < static_cast<int>(schedule.kernels.size()); ++k) {
    const FusedKernel& kernel = schedule.kernels[static_cast<std::size_t>(k)];
    for (ValueId stored : kernel.stores) {
      if (outputs.count(stored) != 0) continue;
      std::set<int> reader_kernels;
      bool copyable = true;
      for (ValueId reader : readers[static_cast<std::size_t>(stored)]) {
        const int r = kernel_of(reader);
        if (r == k) continue;
        const FusedKernel* other = r >= 0 ? &schedule.kernels[static_cast<std::size_t>(r)] : nullptr;
        copyable = copyable && other != nullptr && !other->has_reduction() && other->domain == kernel.domain;
        reader_kernels.insert(r);
      }
      if (!copyable || reader_kernels.empty()) continue;
      const std::set<ValueId> cone = cheap_cone(graph, schedule, k, stored);
      if (cone.empty()) continue;
      // The copies go just before the reader kernel's first member, so what they read must be older.
      const bool in_order = std::all_of(reader_kernels.begin(), reader_kernels.end(), [&](int r) {
        const ValueId first = schedule.kernels[static_cast<std::size_t>(r)].members.front();
        return std::all_of(cone.begin(), cone.end(), [&](ValueId c) {
          const Node& node = graph.node(c);
          return std::all_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) { return cone.count(in) != 0 || in < first; });
        });
      });
      if (!in_order) continue;
      for (int r : reader_kernels) to_copy[r].insert(cone.begin(), cone.end());
      ++result.copied_values;
    }
  }

  // The new node order: each reader kernel's copies (in their original order) just before its first member.
  std::map<ValueId, int> copies_before;  // first member -> reader kernel
  for (const auto& [r, cone] : to_copy) copies_before[schedule.kernels[static_cast<std::size_t>(r)].members.front()] = r;
  std::vector<ValueId> new_id(n, -1);
  std::vector<Node> nodes;
  std::map<int, std::map<ValueId, ValueId>> copy_of;  // reader kernel -> original -> copy's new id
  for (ValueId id = 0; id < graph.size(); ++id) {
    if (const auto before = copies_before.find(id); before != copies_before.end()) {
      std::map<ValueId, ValueId>& copies = copy_of[before->second];
      for (ValueId original : to_copy[before->second]) {
        Node copy = graph.node(original);
        for (ValueId& in : copy.inputs) in = copies.count(in) != 0 ? copies[in] : new_id[static_cast<std::size_t>(in)];
        copies[original] = static_cast<ValueId>(nodes.size());
        nodes.push_back(std::move(copy));
        result.copies.push_back(true);
      }
    }
    Node node = graph.node(id);
    const int k = kernel_of(id);
    const auto copies = copy_of.find(k);
    for (ValueId& in : node.inputs) {
      const bool copied = copies != copy_of.end() && copies->second.count(in) != 0 && kernel_of(in) != k;
      in = copied ? copies->second.at(in) : new_id[static_cast<std::size_t>(in)];
    }
    new_id[static_cast<std::size_t>(id)] = static_cast<ValueId>(nodes.size());
    nodes.push_back(std::move(node));
    result.copies.push_back(false);
  }
  std::vector<ValueId> new_outputs;
  for (ValueId output : graph.outputs()) new_outputs.push_back(new_id[static_cast<std::size_t>(output)]);
  const ir::Graph rewired = ir::Graph::from_nodes(std::move(nodes), std::move(new_outputs));

  // Originals that only the reader kernels read are now read by nothing: drop them, so their
  // kernel does not compute them (or run at all) for no one.
  const std::vector<bool> live = ir::live_nodes(rewired);
  result.graph = ir::eliminate_dead_code(rewired);
  std::vector<bool> kept_copies;
  for (std::size_t id = 0; id < live.size(); ++id) {
    if (live[id]) kept_copies.push_back(result.copies[id]);
  }
  result.copies = std::move(kept_copies);
  return result;
}

}  // namespace trainc
