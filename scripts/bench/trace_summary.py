#!/usr/bin/env python3
"""Where a traced step's GPU time goes: the kernels, copies and fills of a Chrome trace (trainc's
TRAINC_PROFILE_TRACE, or torch.profiler's export_chrome_trace), totalled by name.

Usage: trace_summary.py TRACE.json STEPS [--top N]
Prints the GPU's busy time per step, then the largest names per step with their count per step."""
import argparse
import collections
import json
import sys

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


# Kinds of GPU work, by the kernel names of the libraries that make them (first match wins).
KINDS = [
    ("GEMMs (cuBLAS)", ("nvjet", "gemm", "cutlass", "sm90_xmma", "cublas")),
    ("attention (cuDNN, flash, memory-efficient)", ("cudnn", "flash", "fmha", "attention")),
    ("trainc generated kernels", ("trainc_kernel",)),
    ("trainc cross-entropy kernels", ("trainc_cross_entropy",)),
    ("multi-tensor (optimizer, clipping)", ("multi_tensor_apply",)),
    ("ATen reductions", ("reduce_kernel",)),
    ("copies, casts and fills", ("copy", "Memcpy", "Memset", "CatArray", "fill")),
    ("triton (torch.compile)", ("triton",)),
]


def kind_of(name):
    for kind, markers in KINDS:
        if any(marker in name for marker in markers):
            return kind
    return "other ATen kernels"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("steps", type=int, help="how many steps the trace holds")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    time_us = collections.Counter()
    count = collections.Counter()
    for event in events:
        if event.get("ph") == "X" and event.get("cat") in GPU_CATEGORIES:
            time_us[event["name"]] += float(event.get("dur", 0))
            count[event["name"]] += 1
    if not time_us:
        sys.exit(f"{args.trace}: no GPU kernels, copies or fills in the trace")
    total_ms = sum(time_us.values()) / args.steps / 1000
    print(f"trace: {total_ms:.3f} ms of GPU kernels, copies and fills per step; by kind:")
    kinds = collections.Counter()
    calls = collections.Counter()
    for name, us in time_us.items():
        kinds[kind_of(name)] += us
        calls[kind_of(name)] += count[name]
    for kind, us in kinds.most_common():
        print(f"  {us / args.steps / 1000:8.3f} ms  {calls[kind] / args.steps:6.1f}x  {kind}")
    print("largest per step:")
    for name, us in time_us.most_common(args.top):
        print(f"  {us / args.steps / 1000:8.3f} ms  {count[name] / args.steps:6.1f}x  {name[:120]}")


if __name__ == "__main__":
    main()
