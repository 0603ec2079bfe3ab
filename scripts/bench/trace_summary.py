#!/usr/bin/env python3
"""Where a traced step's GPU time goes: the kernels, copies and fills of a Chrome trace (trainc's
TRAINC_PROFILE_TRACE, or torch.profiler's export_chrome_trace), totalled by name.

Usage: trace_summary.py TRACE.json STEPS [--top N] [--sources FILE.cu ...] [--sequence]
Prints the GPU's busy time per step, then the largest names per step with their count per step.
With --sources (the generated CUDA that --dump-dir writes), each generated kernel's line also
gives what it does and the bandwidth it reached: the bytes its header comment says it moves over
its time per call. With --sequence, it also lists one whole step's GPU events in the order they
started, each with its stream, its start from the step's start, its duration and the gap since the
previous event on its stream: the step's path, kernel by kernel. Copies, casts, fills and ATen's other kernels are also listed by the CPU op that launched them (the
profiler links each GPU event to it; a replayed CUDA graph's events link to the replay only)."""
import argparse
import collections
import json
import os
import re
import sys

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


# Kinds of GPU work, by the kernel names of the libraries that make them (first match wins).
KINDS = [
    ("GEMMs (cuBLAS)", ("nvjet", "gemm", "cutlass", "sm90_xmma", "cublas")),
    ("attention (cuDNN, flash, memory-efficient)", ("cudnn", "flash", "fmha", "attention")),
    ("trainc generated kernels", ("trainc_kernel",)),
    ("trainc cross-entropy kernels", ("trainc_cross_entropy",)),
    ("multi-tensor (optimizer, clipping)", ("multi_tensor_apply", "trainc_adamw")),
    ("ATen reductions", ("reduce_kernel",)),
    ("copies, casts and fills", ("copy", "Memcpy", "Memset", "CatArray", "fill")),
    ("triton (torch.compile)", ("triton",)),
]


def short(name, width=160):
    """A kernel's name without the namespaces that make ATen's templates unreadable."""
    for noise in ("void ", "at::native::", "(anonymous namespace)::", "c10::", "std::"):
        name = name.replace(noise, "")
    return name[:width]


def kind_of(name):
    for kind, markers in KINDS:
        if any(marker in name for marker in markers):
            return kind
    return "other ATen kernels"


def kernel_headers(paths):
    """symbol -> (description, bytes moved) from the generated sources' '// kernel N: ...' lines."""
    headers = {}
    defined_in = {}
    for path in paths:
        if not os.path.exists(path):  # an unmatched glob: a backend that generates no CUDA
            continue
        description = None
        for line in open(path):
            if line.startswith("// kernel "):
                description = line[len("// kernel "):].strip()
            elif description and "__global__" in line:
                symbol = re.search(r"(trainc_kernel_\w+)\(", line)
                moved = re.search(r"reads ([0-9.]+) MB, writes ([0-9.]+) MB", description)
                if symbol:
                    name = symbol.group(1)
                    if name in defined_in and headers[name][0] != description:
                        # Each compile of a run numbers its kernels from 0: a trace merges them.
                        print(f"note: {name} is defined in {defined_in[name]} and {path}; the first is described",
                              file=sys.stderr)
                        description = None
                        continue
                    defined_in[name] = path
                    headers[name] = (description, (float(moved[1]) + float(moved[2])) * 1e6 if moved else None)
                description = None
    return headers


def timeline(events, steps, cpu_op_of, top):
    """The GPU's idle time: the traced steps' span against the union of its events, and the gaps
    between consecutive events by size, the largest named by the events on either side. A step
    slower than its GPU work shows its cause here: gaps of a few microseconds between many small
    launches, or long ones where the GPU waits for the host."""
    gpu = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e) for e in events
                  if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES), key=lambda event: event[:2])
    if not gpu:
        return
    span = gpu[-1][1] - gpu[0][0]
    gaps = []
    busy_until = gpu[0][1]
    previous = gpu[0][2]
    for start, end, event in gpu[1:]:
        if start > busy_until:
            gaps.append((start - busy_until, previous, event))
        if end >= busy_until:
            busy_until, previous = end, event
    idle = sum(gap for gap, _, _ in gaps)
    print(f"timeline: {span / steps / 1000:.3f} ms a step from the first GPU event to the last, "
          f"{(span - idle) / steps / 1000:.3f} ms busy, {idle / steps / 1000:.3f} ms idle in {len(gaps) / steps:.0f} gaps")
    bounds = [(0, 2), (2, 5), (5, 20), (20, 100), (100, float("inf"))]
    for low, high in bounds:
        inside = [gap for gap, _, _ in gaps if low <= gap < high]
        print(f"  gaps of {low}-{high} us: {len(inside) / steps:6.1f} a step, {sum(inside) / steps / 1000:.3f} ms")
    print("largest gaps (before -> after, the CPU op that launched what came after):")
    for gap, before, after in sorted(gaps, key=lambda g: -g[0])[:top]:
        op = cpu_op_of.get(after.get("args", {}).get("External id"), "?")
        print(f"  {gap:8.1f} us  {short(before['name'], 50)} -> {short(after['name'], 50)}  [{op[:50]}]")


def sequence(events, headers):
    """One step's GPU events in start order, from the end of the first AdamW kernel to the end of
    the next (the step's update closes it), each with its stream and the idle time on that stream
    before it."""
    gpu = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e) for e in events
                  if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES), key=lambda event: event[:2])
    ends = [end for _, end, event in gpu if "adamw" in event["name"].lower()]
    if len(ends) < 2:
        print("sequence: fewer than two AdamW kernels in the trace; no step to list")
        return
    first, last = ends[0], next(end for end in ends if end > ends[0] + 1.0)
    print(f"sequence: one step, {last - first:.1f} us from an AdamW kernel's end to the next's "
          "(start and gap in us; stream; duration in us; kernel)")
    stream_end = {}
    for start, end, event in gpu:
        if start < first - 0.01 or end > last + 0.01:
            continue
        stream = event.get("tid", "?")
        gap = start - stream_end.get(stream, first)
        stream_end[stream] = end
        name = event["name"]
        label = short(name, 70)
        if name in headers:
            label += "  [" + headers[name][0].split(": ", 1)[-1][:90] + "]"
        print(f"  {start - first:8.1f} {gap:6.1f}  s{stream!s:<4} {end - start:7.1f}  {label}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("steps", type=int, help="how many steps the trace holds")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sources", nargs="*", default=[], help="generated .cu files (--dump-dir) naming trainc's kernels")
    parser.add_argument("--sequence", action="store_true", help="list one step's GPU events in the order they started")
    args = parser.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    time_us = collections.Counter()
    count = collections.Counter()
    cpu_op_of = {}  # External id -> the CPU op (aten::..., trainc's own scopes) it names
    for event in events:
        if event.get("ph") == "X" and event.get("cat") == "cpu_op" and "External id" in event.get("args", {}):
            cpu_op_of[event["args"]["External id"]] = event["name"]
    launched_by = collections.Counter()  # (kind of copy or fill, CPU op) -> time
    launched_count = collections.Counter()
    launched_bytes = collections.Counter()
    for event in events:
        if event.get("ph") == "X" and event.get("cat") in GPU_CATEGORIES:
            time_us[event["name"]] += float(event.get("dur", 0))
            count[event["name"]] += 1
            if kind_of(event["name"]) in ("copies, casts and fills", "other ATen kernels"):
                link = event.get("args", {})
                key = (short(event["name"], 60), cpu_op_of.get(link.get("External id"), "?"))
                launched_by[key] += float(event.get("dur", 0))
                launched_count[key] += 1
                launched_bytes[key] += int(link.get("bytes", 0) or 0)
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
    headers = kernel_headers(args.sources)
    if headers:
        # Generated kernels doing the same work (one per layer) summed: where the kernels' time goes.
        work_us = collections.Counter()
        work_calls = collections.Counter()
        work_bytes = collections.Counter()
        for name, us in time_us.items():
            if name in headers:
                description, moved = headers[name]
                work = description.split(": ", 1)[-1]
                work_us[work] += us
                work_calls[work] += count[name]
                work_bytes[work] += (moved or 0) * count[name]
        print("generated kernels by work (same domain and ops summed):")
        for work, us in work_us.most_common(args.top):
            bandwidth = work_bytes[work] / (us * 1e-6) / 1e12 if us > 0 else 0.0
            print(f"  {us / args.steps / 1000:8.3f} ms  {work_calls[work] / args.steps:6.1f}x  "
                  f"{bandwidth:5.2f} TB/s  {work[:220]}")
    if launched_by:
        print("copies, casts, fills and other ATen kernels by the CPU op that launched them:")
        for (name, op), us in launched_by.most_common(args.top):
            moved = launched_bytes[(name, op)] / launched_count[(name, op)] / 1e6
            print(f"  {us / args.steps / 1000:8.3f} ms  {launched_count[(name, op)] / args.steps:6.1f}x  "
                  f"{op[:60]:<60}  {name}" + (f"  ({moved:.2f} MB each)" if moved else ""))
    timeline(events, args.steps, cpu_op_of, min(args.top, 25))
    print("largest per step:")
    for name, us in time_us.most_common(args.top):
        line = f"  {us / args.steps / 1000:8.3f} ms  {count[name] / args.steps:6.1f}x  {short(name)}"
        if name in headers:
            description, moved = headers[name]
            if moved and us > 0:
                line += f"  {moved / (us / count[name] * 1e-6) / 1e12:5.2f} TB/s"
            line += f"  [{description[:200]}]"
        print(line)
    if args.sequence:
        sequence(events, headers)


if __name__ == "__main__":
    main()
