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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("steps", type=int, help="how many steps the trace holds")
    parser.add_argument("--top", type=int, default=25)
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
    print(f"trace: {total_ms:.3f} ms of GPU kernels, copies and fills per step; largest per step:")
    for name, us in time_us.most_common(args.top):
        print(f"  {us / args.steps / 1000:8.3f} ms  {count[name] / args.steps:6.1f}x  {name[:120]}")


if __name__ == "__main__":
    main()
