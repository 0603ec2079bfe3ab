#include "trainc/compile/passes/attention_lse_in_forward.h"

#include <map>

#include "trainc/compile/passes/keep_for_backward.h"

namespace trainc::ir {

Graph attention_lse_in_forward(const Graph& graph) {
  KeepForBackward rule;
  rule.forward_op = Op::attention;
  rule.gradient_op = Op::attention_grad;
  rule.keeping_op = Op::attention_and_lse;
  rule.reading_op = Op::attention_grad_from_lse;
  // Only bf16 and f16 attention: the fused kernels that keep a log-sum-exp take no other dtype.
  rule.applies = [](const Graph& g, const Node& attention) { return is_half_precision(g.type(attention.inputs[0]).dtype); };
  // The output is the kept op's value; its log-sum-exp is read from it right after, in the forward.
  std::map<ValueId, ValueId> lse_of;  // kept output -> its attention_lse
  rule.forward_value = [&lse_of](Graph& result, ValueId kept, const Node&) {
    lse_of[kept] = result.add(Op::attention_lse, {kept});
    return kept;
  };
  // (q, k, v, grad) -> (q, k, v, output, log-sum-exp, grad)
  rule.reading_inputs = [&lse_of](ValueId kept, const std::vector<ValueId>& in) {
    const auto lse = lse_of.find(kept);
    if (lse == lse_of.end()) throw IrError("attention_lse_in_forward: an attention's gradient comes before its forward");
    return std::vector<ValueId>{in[0], in[1], in[2], kept, lse->second, in[3]};
  };
  return keep_for_backward(graph, rule);
}

}  // namespace trainc::ir
