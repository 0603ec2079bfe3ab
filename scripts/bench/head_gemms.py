"""The language-model head's three GEMMs with the vocabulary padded, against unpadded shapes in
buffers with a padded row stride.

GPT-2's 50,257 words make a contiguous [tokens, 50257] bf16 matrix's rows 2 bytes off 16-byte
alignment, and cuBLAS then falls back to slow kernels; runtime/linear_cross_entropy therefore pads
the weight to 50,304 rows (a 77 MB copy, made in the forward and again in the backward). This
times, for each GEMM, the padded form against the unpadded product written into (or read from) a
buffer whose rows are 50,304 long, which keeps every leading dimension aligned without a copy:
  logits = x @ W^T        [N, V] into rows of P
  dx     = D @ W          D [N, V] read from rows of P
  dW     = D^T @ x        [V, C] (padded: [P, C])
Usage: python3 head_gemms.py [tokens width vocabulary]
"""
import sys

import torch

tokens, width, vocabulary = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (16384, 768, 50257)
padded = (vocabulary + 63) // 64 * 64
bf16 = dict(device="cuda", dtype=torch.bfloat16)
x = torch.randn(tokens, width, **bf16)
w = torch.randn(vocabulary, width, **bf16) * 0.02
w_padded = torch.zeros(padded, width, **bf16)
w_padded[:vocabulary] = w
logits = torch.empty(tokens, padded, **bf16)
d = torch.randn(tokens, padded, **bf16) * 1e-3
dx = torch.empty(tokens, width, **bf16)
dw_padded = torch.empty(padded, width, **bf16)
dw = torch.empty(vocabulary, width, **bf16)


def timed(fn, repeats=50):
    for _ in range(5):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


cases = {
    "logits": (lambda: torch.mm(x, w_padded.t(), out=logits), lambda: torch.mm(x, w.t(), out=logits[:, :vocabulary])),
    "dx": (lambda: torch.mm(d, w_padded, out=dx), lambda: torch.mm(d[:, :vocabulary], w, out=dx)),
    "dW": (lambda: torch.mm(d.t(), x, out=dw_padded), lambda: torch.mm(d[:, :vocabulary].t(), x, out=dw)),
    "pad copy": (lambda: w_padded[:vocabulary].copy_(w), None),
}
# The same products either way, up to a bf16 rounding (another kernel may sum in another order).
torch.mm(x, w.t(), out=logits[:, :vocabulary])
reference = (x @ w_padded.t())[:, :vocabulary].float()
difference = (logits[:, :vocabulary].float() - reference).abs().max().item() / reference.abs().max().item()
assert difference < 2e-2, f"unpadded logits differ by {difference:.3g} of the largest"
print(f"head GEMMs, {tokens} x {width} x {vocabulary} (padded {padded}), bf16, {torch.cuda.get_device_name()}: ms")
total_padded = total_unpadded = 0.0
for name, (padded_fn, unpadded_fn) in cases.items():
    a = timed(padded_fn)
    b = timed(unpadded_fn) if unpadded_fn else 0.0
    total_padded += a * (2 if name == "pad copy" else 1)  # the copy is made in the forward and the backward
    total_unpadded += b
    print(f"  {name:8s} padded {a:7.3f}   unpadded {b:7.3f}")
print(f"  step     padded {total_padded:7.3f}   unpadded {total_unpadded:7.3f}")
