"""What a memset node costs in a replayed CUDA graph, against a kernel node doing the same.

cuBLAS and cuDNN zero small buffers (workspace counters, accumulators) with cudaMemsetAsync; a
captured step replays each as a memset node. This captures three graphs of N pairs each, every
pair (zero a small buffer; a small kernel that follows it), with the zeroing done by
  memset   a driver memset (a memset node)
  fill     ATen's fill kernel (a kernel node)
  kernel   no zeroing: a second small kernel instead (the floor)
and prints the microseconds each pair takes per replay.
Usage: python3 graph_memset_nodes.py [pairs]
"""
import ctypes
import sys

import torch

pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
driver = ctypes.CDLL("libcuda.so.1")
driver.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
buffers = [torch.ones(256, device="cuda", dtype=torch.int32) for _ in range(pairs)]
values = [torch.zeros(2048, device="cuda") for _ in range(pairs)]


def memset(t):
    rc = driver.cuMemsetD8Async(t.data_ptr(), 0, t.numel() * t.element_size(), torch.cuda.current_stream().cuda_stream)
    assert rc == 0, f"cuMemsetD8Async: {rc}"


def step(kind):
    for zeroed, value in zip(buffers, values):
        if kind == "memset":
            memset(zeroed)
        elif kind == "fill":
            zeroed.zero_()
        else:
            value.add_(1.0)
        value.add_(1.0)


def per_pair_us(kind, replays=200):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(kind)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(kind)
    for _ in range(20):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    if kind != "kernel":
        assert all(int(b.sum()) == 0 for b in buffers), f"{kind}: a buffer was not zeroed"
    return start.elapsed_time(end) * 1000.0 / (replays * pairs)


results = {kind: per_pair_us(kind) for kind in ("memset", "fill", "kernel")}
print(f"graph of {pairs} pairs on {torch.cuda.get_device_name()}: microseconds per pair (zeroing + kernel)")
for kind, us in results.items():
    print(f"  {kind:7s} {us:6.2f}")
print(f"memset node - fill kernel node: {results['memset'] - results['fill']:+.2f} us")
