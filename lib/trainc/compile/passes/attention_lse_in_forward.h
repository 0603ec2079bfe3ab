// defines: attention_lse_in_forward
//
// Contract: in a joint graph, a self-attention whose gradient is taken keeps, from its forward,
// what the fused kernels' backward reads (the output and each row's log-sum-exp), so the backward
// does not run the forward again (GPT-2 on an H200: cuDNN's forward, 0.085 ms a layer). The IR has
// one tensor per value: the output is the kept op's value, and attention_lse reads the
// log-sum-exp the same call kept, right after it in the forward (runtime/aten_executor).
//   attention(q, k, v)                    becomes   output = attention_and_lse(q, k, v)
//                                                   lse = attention_lse(output)
//   attention_grad(q, k, v, grad)         becomes   attention_grad_from_lse(q, k, v, output, lse, grad)
// Which kernels run is decided at each program's first run from the inputs alone
// (ir::lse_pair_backend, compat's lse_attention_backend), the same way in both programs; with none that keeps a log-sum-exp, the backward runs the forward again (the
// kernel ATen picks, called directly, as without the pass) and the kept output costs memory for nothing. So the
// pass takes bf16 and f16 attention only (the fused kernels take no other dtype), and the planner
// runs it for steps on a GPU with a LibTorch that can call those kernels directly.
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph attention_lse_in_forward(const Graph& graph);

}  // namespace trainc::ir
