#include "trainc/compile/passes/slice_grads_to_concat.h"

#include <algorithm>
#include <map>

#include "trainc/compile/passes/rebuild.h"

namespace trainc::ir {
namespace {

// Pieces of a gradient made of disjoint step-1 slices of one dimension.
struct Pieces {
  int64_t dim = 0;
  std::map<int64_t, std::pair<int64_t, ValueId>> by_start;  // start -> (end, the piece's gradient)
};

}  // namespace

Graph slice_grads_to_concat(const Graph& graph) {
  const std::vector<int> uses = use_counts(graph);
  std::map<ValueId, Pieces> pieces;
  return rewrite_nodes(graph, [&](ValueId id, Graph& result, const std::vector<ValueId>& new_id) -> ValueId {
    const Node& node = graph.node(id);
    if (node.op == Op::slice_backward && node.attrs.ints[3] == 1) {
      Pieces p;
      p.dim = node.attrs.ints[0] < 0 ? node.attrs.ints[0] + node.type.rank() : node.attrs.ints[0];
      p.by_start[node.attrs.ints[1]] = {node.attrs.ints[2], node.inputs[0]};
      pieces[id] = p;
    } else if (node.op == Op::add && graph.type(node.inputs[0]) == node.type && graph.type(node.inputs[1]) == node.type) {
      // Only sums whose operands nothing else reads: their pieces are not needed on their own.
      const auto a = pieces.find(node.inputs[0]);
      const auto b = pieces.find(node.inputs[1]);
      if (a != pieces.end() && b != pieces.end() && a->second.dim == b->second.dim && uses[static_cast<std::size_t>(node.inputs[0])] == 1 &&
          uses[static_cast<std::size_t>(node.inputs[1])] == 1) {
        Pieces merged = a->second;
        bool disjoint = true;
        for (const auto& [start, piece] : b->second.by_start) disjoint = disjoint && merged.by_start.emplace(start, piece).second;
        int64_t covered = 0;
        for (const auto& [start, piece] : merged.by_start) {
          if (start < covered) disjoint = false;
          covered = piece.first;
        }
        if (disjoint) pieces[id] = merged;
      }
    }
    // A sum whose pieces tile the whole dimension is their concat.
    const auto found = pieces.find(id);
    if (node.op != Op::add || found == pieces.end()) return -1;
    const Pieces& p = found->second;
    int64_t next = 0;
    std::vector<ValueId> inputs;
    for (const auto& [start, piece] : p.by_start) {
      if (start != next) break;
      next = piece.first;
      inputs.push_back(new_id[static_cast<std::size_t>(piece.second)]);
    }
    if (next != node.type.shape[static_cast<std::size_t>(p.dim)]) return -1;
    Attributes attrs;
    attrs.ints = {p.dim};
    return result.add(Op::concat, inputs, attrs);
  });
}

}  // namespace trainc::ir
