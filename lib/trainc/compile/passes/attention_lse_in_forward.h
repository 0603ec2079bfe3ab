// defines: attention_lse_in_forward
//
// Contract: in a joint graph, a self-attention whose gradient is taken keeps, from its forward,
// what the fused kernels' backward reads (the output and each row's log-sum-exp), so the backward
// does not run the forward again (GPT-2 on an H200: cuDNN's forward, 0.085 ms a layer). The IR has
// one tensor per value, so the forward returns one buffer (ir::attention_lse_layout) and the output
// is a view of it; the kept output costs a copy into the buffer, about a sixth of a forward.
//   attention(q, k, v)                    becomes   packed = attention_and_lse(q, k, v)
//                                                   output = permute(reshape(slice(packed), [B, T, H, E]), {0, 2, 1, 3})
//   attention_grad(q, k, v, grad)         becomes   attention_grad_from_lse(q, k, v, packed, grad)
// Which kernels run is decided at each program's first run from the inputs alone
// (ir::lse_pair_backend, compat's lse_attention_backend), the same way in both programs; with none that keeps a log-sum-exp, the backward runs the forward again (the
// kernel ATen picks, called directly, as without the pass) and the copy is spent for nothing. So the
// pass takes bf16 and f16 attention only (the fused kernels take no other dtype), and the planner
// runs it for steps on a GPU with a LibTorch that can call those kernels directly.
#pragma once

#include "trainc/compile/ir/graph.h"

namespace trainc::ir {

Graph attention_lse_in_forward(const Graph& graph);

}  // namespace trainc::ir
