#!/usr/bin/env python3
"""Compares the logged losses of two trainc runs (their metrics.jsonl), step by step: the largest
relative difference from the reference run, the step where it occurs, and whether it is within the
tolerance. Exit status 0 when every common logged step is within it, 1 otherwise.

usage: compare_losses.py REFERENCE/metrics.jsonl OTHER/metrics.jsonl [--tolerance 2e-2]
"""
import argparse
import json
import sys


def losses(path):
    with open(path) as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return {row["step"]: row["loss"] for row in rows if "loss" in row and "step" in row}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reference")
    parser.add_argument("other")
    parser.add_argument("--tolerance", type=float, default=2e-2, help="relative to the reference's loss (default: bf16's 2e-2)")
    args = parser.parse_args()
    reference, other = losses(args.reference), losses(args.other)
    steps = sorted(set(reference) & set(other))
    if not steps:
        print(f"no logged step in common between {args.reference} and {args.other}")
        return 1
    worst = max(steps, key=lambda s: abs(other[s] - reference[s]) / abs(reference[s]))
    difference = abs(other[worst] - reference[worst]) / abs(reference[worst])
    within = difference <= args.tolerance
    print(f"losses over {len(steps)} logged steps ({steps[0]}..{steps[-1]}): largest relative difference {difference:.2e} at step "
          f"{worst} ({reference[worst]:.4f} vs {other[worst]:.4f}), {'within' if within else 'BEYOND'} {args.tolerance:g}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
