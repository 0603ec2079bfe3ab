"""Whether a latency-bound stack of transformer layers runs faster as two halves of its batch side
by side, each half's kernels on its own stream, than as one batch on one stream.

The small GPT's layers (4 layers, width 256, 4 heads, 8 sequences of 256 tokens, bf16) are kernels
of a few microseconds that leave most of the GPU idle: half the rows take nearly as long as all of
them. Two halves on two streams would then finish in little more than one half's time. ATen's ops
stand in for trainc's kernels: the layers without the head, captured in one CUDA graph and
replayed; the forward alone for pieces side by side, the forward and backward (to the input and
every weight) for the whole batch and for half of it. Figures are microseconds per replay, the
median of 5 timings of 200 replays each.
Usage: python3 row_halves.py [layers width heads sequences tokens]
"""
import statistics
import sys

import torch
import torch.nn.functional as F

if len(sys.argv) not in (1, 6):
    sys.exit("usage: python3 row_halves.py [layers width heads sequences tokens]")
layers, width, heads, sequences, tokens = (int(a) for a in sys.argv[1:6]) if len(sys.argv) == 6 else (4, 256, 4, 8, 256)
bf16 = dict(device="cuda", dtype=torch.bfloat16)
torch.manual_seed(0)


def parameter(*shape, scale=0.02):
    return (torch.randn(*shape, **bf16) * scale).requires_grad_()


blocks = [
    dict(ln1=(parameter(width, scale=1.0), parameter(width)), qkv=(parameter(3 * width, width), parameter(3 * width)),
         proj=(parameter(width, width), parameter(width)), ln2=(parameter(width, scale=1.0), parameter(width)),
         fc1=(parameter(4 * width, width), parameter(4 * width)), fc2=(parameter(width, 4 * width), parameter(width)))
    for _ in range(layers)
]
parameters = [t for block in blocks for pair in block.values() for t in pair]


def layer_stack(x):
    n, t, c = x.shape
    for block in blocks:
        h = F.layer_norm(x, (c,), *block["ln1"])
        q, k, v = F.linear(h, *block["qkv"]).split(c, dim=2)
        q, k, v = (u.view(n, t, heads, c // heads).transpose(1, 2) for u in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(n, t, c)
        x = x + F.linear(a, *block["proj"])
        h = F.layer_norm(x, (c,), *block["ln2"])
        x = x + F.linear(F.gelu(F.linear(h, *block["fc1"]), approximate="tanh"), *block["fc2"])
    return x


def training_step(piece):
    """The forward and backward (to the input and every weight) of one piece of the batch."""
    return torch.autograd.grad(layer_stack(piece).float().square().mean(), [piece] + parameters)


def forward_pieces(pieces):
    """The forward of each piece of the batch, piece i on streams[i], joined on the current stream."""
    origin = torch.cuda.current_stream()
    with torch.no_grad():
        for piece, stream in zip(pieces, streams):
            stream.wait_stream(origin)
            with torch.cuda.stream(stream):
                layer_stack(piece)
        for stream in streams[:len(pieces)]:
            origin.wait_stream(stream)


def graphed(work):
    warmup = torch.cuda.Stream()
    warmup.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warmup):
        for _ in range(3):
            work()
    torch.cuda.current_stream().wait_stream(warmup)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work()
    return graph


def microseconds(graph, replays=200):
    times = []
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / replays)
    return statistics.median(times[1:])


streams = [torch.cuda.Stream() for _ in range(4)]
batch = torch.randn(sequences, tokens, width, **bf16)
whole, half = batch.clone().requires_grad_(), batch[: sequences // 2].clone().requires_grad_()
halves, quarters = list(batch.chunk(2)), list(batch.chunk(4))
# Autograd's engine orders a backward's kernels across streams with its own waits, so the pieces
# side by side are timed in the forward only; the backward's case is how long half the rows take.
cases = {
    "forward, whole batch, one stream": lambda: forward_pieces([batch]),
    "forward, half the batch alone": lambda: forward_pieces([halves[0]]),
    "forward, two halves, two streams": lambda: forward_pieces(halves),
    "forward, four quarters, four streams": lambda: forward_pieces(quarters),
    "forward and backward, whole batch": lambda: training_step(whole),
    "forward and backward, half the batch": lambda: training_step(half),
}
print(f"{layers} layers, width {width}, {heads} heads, {sequences} x {tokens} tokens, bf16")
for name, work in cases.items():
    try:
        print(f"{name:40s} {microseconds(graphed(work)):8.1f} us", flush=True)
    except RuntimeError as error:  # one case that cannot be captured leaves the others
        print(f"{name:40s} failed: {error}", flush=True)
