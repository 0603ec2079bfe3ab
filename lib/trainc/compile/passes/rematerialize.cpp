#include "trainc/compile/passes/rematerialize.h"

#include <algorithm>
#include <set>

#include "trainc/compile/passes/fusion.h"

namespace trainc::ir {

Graph rematerialize_pointwise(const Graph& graph) {
  std::vector<Node> nodes = graph.nodes();
  std::vector<std::vector<ValueId>> users(nodes.size());
  for (ValueId id = 0; id < graph.size(); ++id) {
    const std::set<ValueId> distinct(nodes[static_cast<std::size_t>(id)].inputs.begin(), nodes[static_cast<std::size_t>(id)].inputs.end());
    for (ValueId in : distinct) users[static_cast<std::size_t>(in)].push_back(id);
  }
  const std::set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  // Per node, copies included: whether a generated kernel computes it, and the shape of the domain
  // it is computed over (a reduction's: its input's).
  std::vector<bool> computes;
  std::vector<const std::vector<int64_t>*> domain;
  for (const Node& node : graph.nodes()) {
    computes.push_back(kernel_computes(graph, node));
    domain.push_back(op_kind(node.op) == OpKind::kReduction ? &graph.type(node.inputs[0]).shape : &node.type.shape);
  }
  int budget = graph.size();

  // Latest first, so that a value's readers, copies included, are all known when it is visited.
  for (ValueId id = graph.size() - 1; id >= 0 && budget > 0; --id) {
    const Node original = nodes[static_cast<std::size_t>(id)];
    if (outputs.count(id) != 0 || !computes[static_cast<std::size_t>(id)] || op_kind(original.op) == OpKind::kReduction) continue;
    std::vector<ValueId> readers;  // those that get a copy
    bool others = false;           // readers that keep the original
    for (ValueId user : users[static_cast<std::size_t>(id)]) {
      const bool copies = computes[static_cast<std::size_t>(user)] && *domain[static_cast<std::size_t>(user)] == original.type.shape;
      if (copies) readers.push_back(user);
      others = others || !copies;
    }
    if (readers.size() + (others ? 1 : 0) < 2) continue;
    if (!others) readers.erase(readers.begin());  // the first reader keeps the original
    users[static_cast<std::size_t>(id)].erase(
        std::remove_if(users[static_cast<std::size_t>(id)].begin(), users[static_cast<std::size_t>(id)].end(),
                       [&](ValueId user) { return std::find(readers.begin(), readers.end(), user) != readers.end(); }),
        users[static_cast<std::size_t>(id)].end());
    for (ValueId reader : readers) {
      if (budget-- <= 0) {
        users[static_cast<std::size_t>(id)].push_back(reader);
        continue;
      }
      const auto copy = static_cast<ValueId>(nodes.size());
      nodes.push_back(original);
      users.emplace_back();
      computes.push_back(true);
      domain.push_back(domain[static_cast<std::size_t>(id)]);
      for (ValueId& in : nodes[static_cast<std::size_t>(reader)].inputs) {
        if (in == id) in = copy;
      }
      users[static_cast<std::size_t>(copy)].push_back(reader);
      const std::set<ValueId> distinct(original.inputs.begin(), original.inputs.end());
      for (ValueId in : distinct) users[static_cast<std::size_t>(in)].push_back(copy);
    }
  }

  // Copies were appended: order the nodes again so every input comes before its readers (each node
  // after what it reads, in the original order otherwise).
  const std::size_t n = nodes.size();
  std::vector<ValueId> new_id(n, -1);
  std::vector<Node> ordered;
  ordered.reserve(n);
  const auto emit = [&](ValueId root) {
    std::vector<std::pair<ValueId, std::size_t>> stack = {{root, 0}};
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      if (new_id[static_cast<std::size_t>(id)] >= 0) {
        stack.pop_back();
        continue;
      }
      const Node& node = nodes[static_cast<std::size_t>(id)];
      if (next < node.inputs.size()) {
        const ValueId input = node.inputs[next++];
        if (new_id[static_cast<std::size_t>(input)] < 0) stack.push_back({input, 0});
        continue;
      }
      Node copy = node;
      for (ValueId& input : copy.inputs) input = new_id[static_cast<std::size_t>(input)];
      new_id[static_cast<std::size_t>(id)] = static_cast<ValueId>(ordered.size());
      ordered.push_back(std::move(copy));
      stack.pop_back();
    }
  };
  for (ValueId id = 0; id < graph.size(); ++id) emit(id);
  for (auto id = static_cast<ValueId>(graph.size()); id < static_cast<ValueId>(n); ++id) emit(id);
  std::vector<ValueId> new_outputs;
  for (ValueId output : graph.outputs()) new_outputs.push_back(new_id[static_cast<std::size_t>(output)]);
  return Graph::from_nodes(std::move(ordered), std::move(new_outputs));
}

}  // namespace trainc::ir
