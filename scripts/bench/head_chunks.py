"""What making the head's logits a chunk of rows at a time saves when each chunk stays in the L2
cache, with ATen's ops standing in for trainc's kernels (an in-place exp_ reads and writes each
bf16 logit once, as the cross-entropy kernel does).

For chunks of r rows (r = all rows: one piece), the forward makes L[c] = x[c] @ W^T and then
reduces it in place, chunk after chunk; the backward reads all of L twice, dx = L @ W and
dW = L^T @ x. Variant "dx in forward" also makes dx[c] = L[c] @ W right after chunk c's reduction,
while L[c] may still be in the cache, leaving only dW to the backward. Each figure is the median
of 30 runs, each after a 256 MB write that empties the L2 cache, as in a training step where the
layers ran in between. Usage: python3 head_chunks.py [tokens width vocabulary]
"""
import statistics
import sys

import torch

tokens, width, vocabulary = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (2048, 256, 50257)
padded = (vocabulary + 63) // 64 * 64
bf16 = dict(device="cuda", dtype=torch.bfloat16)
x = torch.randn(tokens, width, **bf16)
w = torch.randn(padded, width, **bf16) * 0.02
logits = torch.empty(tokens, padded, **bf16)
dx = torch.empty(tokens, width, **bf16)
dw = torch.empty(padded, width, **bf16)
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def median_ms(fn, repeats=30):
    times = []
    for i in range(repeats + 2):
        flush.fill_(i)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= 2:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def forward(rows, dx_too):
    def run():
        for start in range(0, tokens, rows):
            chunk = logits[start:start + rows]
            torch.mm(x[start:start + rows], w.t(), out=chunk)
            chunk.exp_()
            if dx_too:
                torch.mm(chunk, w, out=dx[start:start + rows])
    return run


def backward(dx_too):
    def run():
        if not dx_too:
            torch.mm(logits, w, out=dx)
        torch.mm(logits.t(), x, out=dw)
    return run


print(f"head chunks, {tokens} x {width} x {padded}, bf16, {torch.cuda.get_device_name()}, "
      f"L2 {torch.cuda.get_device_properties(0).L2_cache_size >> 20} MB: ms (forward + backward)")
for dx_too in (False, True):
    for rows in (tokens, 1024, 512, 256, 128, 64):
        if rows > tokens:
            continue
        x.normal_()
        f = median_ms(forward(rows, dx_too))
        b = median_ms(backward(dx_too))
        print(f"  {'dx in forward' if dx_too else 'plain':13s} rows {rows:5d}: {f:7.3f} + {b:7.3f} = {f + b:7.3f}")
