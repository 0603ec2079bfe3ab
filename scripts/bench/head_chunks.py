"""What making the head's logits a chunk of rows at a time saves when each chunk stays in the L2
cache, with ATen's ops standing in for trainc's kernels (an in-place exp_ reads and writes each
bf16 logit once, as the cross-entropy kernel does).

For chunks of r rows (r = all rows: one piece), the forward makes L[c] = x[c] @ W^T and then
reduces it in place, chunk after chunk; the backward reads all of L twice, dx = L @ W and
dW = L^T @ x. Variant "dx in forward" also makes dx[c] = L[c] @ W right after chunk c's reduction,
while L[c] may still be in the cache, leaving only dW to the backward. Each figure is the median
of 30 runs, each after a 256 MB write that empties the L2 cache, as in a training step where the
layers ran in between. Usage: python3 head_chunks.py [tokens width vocabulary]

Then the logits a chunk of vocabulary columns at a time, chunk-major ([chunks, tokens, columns]),
each chunk's GEMM reading all of x and only its own rows of W (a row chunk reads all of W), then
its exp_ in place while the chunk is in the cache; "beside" runs each chunk's exp_ on a second
stream beside the next chunk's GEMM. The backward reads the chunks as batches: dx = sum over
chunks of L[c] @ W[c] (a batched GEMM, then the sum), dW[c] = L[c]^T @ (x scaled by a row scale
of the chunk's: a softmax's per-chunk normalization) as a second batched GEMM. Each variant is
captured once as a CUDA graph and replayed, so the launches cost what they cost in trainc's step.
"float32 backward" is that backward with both batched products written in float32 (bmm's out_dtype),
as a sum of chunks' products needs them (docs/compile.md, "Not in chunks of vocabulary columns").
Last, one chunk's exp_ right after its GEMM against the same exp_ on a chunk evicted from the L2
cache: whether the cache holds a chunk's logits for the kernel that reads them next.
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


def graphed(fn):
    """fn captured as a CUDA graph (after a warm-up on a side stream); returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def column_forward(chunks, beside):
    columns = padded // chunks
    blocks = logits.view(chunks, tokens, columns)
    weight = w.view(chunks, columns, width)
    copier = torch.cuda.Stream()

    def run():
        for c in range(chunks):
            torch.mm(x, weight[c].t(), out=blocks[c])
            if beside:
                made = torch.cuda.Event()
                made.record()
                copier.wait_event(made)
                with torch.cuda.stream(copier):
                    blocks[c].exp_()
            else:
                blocks[c].exp_()
        if beside:
            torch.cuda.current_stream().wait_stream(copier)
    return run


def column_backward(chunks, in_float=False):
    """in_float: the partial products in float32 (bmm's out_dtype), summed in float32 and rounded
    once, as a sum of partial products rounded one by one to bf16 would lose what the one-piece GEMM
    keeps; and the weight's gradient in float32, as trainc writes it (the one-piece backward above
    writes it in bf16: about 6 us less, docs/compile.md)."""
    columns = padded // chunks
    blocks = logits.view(chunks, tokens, columns)
    weight = w.view(chunks, columns, width)
    scales = torch.rand(chunks, tokens, 1, **bf16)
    partial = torch.empty(chunks, tokens, width, device="cuda", dtype=torch.float32 if in_float else torch.bfloat16)
    scaled = torch.empty(chunks, tokens, width, **bf16)
    dw_float = torch.empty(padded, width, device="cuda", dtype=torch.float32)
    dw_blocks = (dw_float if in_float else dw).view(chunks, columns, width)
    dx_float = torch.empty(tokens, width, device="cuda", dtype=torch.float32)

    def run():
        if in_float:
            torch.bmm(blocks, weight, out_dtype=torch.float32, out=partial)
        else:
            torch.bmm(blocks, weight, out=partial)
        partial.mul_(scales)
        if in_float:
            torch.sum(partial, 0, out=dx_float)  # a bf16 out would round each chunk's product first
            dx.copy_(dx_float)
        else:
            torch.sum(partial, 0, out=dx)
        torch.mul(x.unsqueeze(0), scales, out=scaled)
        if in_float:
            torch.bmm(blocks.transpose(1, 2), scaled, out_dtype=torch.float32, out=dw_blocks)
        else:
            torch.bmm(blocks.transpose(1, 2), scaled, out=dw_blocks)
    return run


print(f"head in vocabulary chunks (graphed), {tokens} x {width} x {padded}: ms (forward + backward)")
x.normal_()
rows_f = median_ms(graphed(forward(tokens, False)))
rows_b = median_ms(graphed(backward(False)))
print(f"  one piece             : {rows_f:7.3f} + {rows_b:7.3f} = {rows_f + rows_b:7.3f}")
for rows in (1024, 512, 256):
    f = median_ms(graphed(forward(rows, False)))
    print(f"  {rows:4d} rows a chunk     : {f:7.3f} + {rows_b:7.3f} = {f + rows_b:7.3f}")
for chunks in (2, 4, 8, 16):
    if padded % chunks or (padded // chunks) % 8:  # rows of 16-byte multiples, as cuBLAS wants them
        continue
    b = median_ms(graphed(column_backward(chunks)))
    for beside in (False, True):
        f = median_ms(graphed(column_forward(chunks, beside)))
        print(f"  {chunks:2d} chunks{' beside' if beside else '       '}      : {f:7.3f} + {b:7.3f} = {f + b:7.3f}")
    try:
        b = median_ms(graphed(column_backward(chunks, in_float=True)))
        print(f"  {chunks:2d} chunks, float32 backward: {b:7.3f}")
    except (TypeError, RuntimeError) as error:
        print(f"  {chunks:2d} chunks, float32 backward: not run ({error})")


def one_chunk(chunks, gemm, exp):
    """Chunk 0 alone: its GEMM, its exp_, or both (the exp_ reading what the GEMM just wrote)."""
    columns = padded // chunks
    block = logits.view(chunks, tokens, columns)[0]
    weight = w.view(chunks, columns, width)[0]

    def run():
        if gemm:
            torch.mm(x, weight.t(), out=block)
        if exp:
            block.exp_()
    return run


# Whether a chunk's logits are still in the L2 cache when its exp_ reads them: exp_ after its GEMM
# (both, less the GEMM alone) against exp_ alone on a chunk the flush has evicted. Equal times mean
# the exp_ read its chunk from memory either way. One chunk alone, with nothing beside it: with the
# next chunk's GEMM running beside the exp_, as in "beside" above, its writes compete for the cache.
print(f"one chunk's exp_, {tokens} rows: ms (GEMM, exp_ after the GEMM, exp_ from memory)")
for chunks in (8, 16):
    if padded % chunks or (padded // chunks) % 8:
        continue
    gemm_alone = median_ms(graphed(one_chunk(chunks, True, False)))
    both = median_ms(graphed(one_chunk(chunks, True, True)))
    exp_cold = median_ms(graphed(one_chunk(chunks, False, True)))
    print(f"  {chunks:2d} chunks ({tokens * padded // chunks * 2 / 1e6:5.1f} MB): {gemm_alone:7.3f} {both - gemm_alone:7.3f} {exp_cold:7.3f}")
