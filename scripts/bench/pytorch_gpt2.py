"""The PyTorch peer for trainc's GPU benchmark: a plain PyTorch training loop on the same GPT
(the layout of lib/trainc/models/gpt.cpp: pre-LayerNorm blocks, tanh GELU, tied head), the same
batch and precision: bf16 autocast, fused AdamW, gradient clipping at 1.0, synthetic tokens.

Prints one JSON line: median step time over --interval-step intervals after the first one, tokens/s, first-step time and peak
GPU memory. Usage: python3 pytorch_gpt2.py --compile {none,default,reduce-overhead} [--steps 40] [--interval 10]
(and --batch, --block, --n-layer, --n-head, --n-embd, --vocab for other sizes)

Started by torchrun (WORLD_SIZE > 1), it trains data-parallel with DistributedDataParallel over NCCL, each rank on its own
GPU with --batch samples a step; rank 0 prints, tokens/s counting every rank's tokens.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.attn_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


def add_run_arguments(parser, steps):
    """What every peer takes: the compile mode, the steps and their timing intervals, the batch and the model's size."""
    parser.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead"])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--interval", type=int, default=10, help="steps between synchronizations")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--n-layer", type=int, default=12)
    parser.add_argument("--n-head", type=int, default=12)
    parser.add_argument("--n-embd", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=50257)


def profile(step, batch, steps=5, trace=None):
    """How long the GPU computes per step (the sum of its kernels' durations, returned in ms) and
    where: the floor a step reaches once launch overhead is gone (CUDA graphs). With trace, also saves the profile as a
    Chrome trace, which scripts/bench/trace_summary.py reads as it reads trainc's."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler
    # GPU activity only: with the CPU's ops too, key_averages below would count each launching op's
    # kernels a second time. trace_summary.py then names no kernel's launcher ("?").
    with profiler(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step(*batch())
        torch.cuda.synchronize()
    if trace:
        prof.export_chrome_trace(trace)
    events = prof.key_averages()
    attribute = "device_time_total" if hasattr(events[0], "device_time_total") else "cuda_time_total"
    kernels = sorted(((getattr(e, attribute), e.count, e.key) for e in events if getattr(e, attribute) > 0), reverse=True)
    total = sum(t for t, _, _ in kernels) / steps / 1000
    print(f"profile: {total:.3f} ms of GPU kernels per step; largest per step:", file=sys.stderr)
    for time_us, count, name in kernels[:25]:
        print(f"  {time_us / steps / 1000:8.3f} ms  {count // steps:4d}x  {name[:110]}", file=sys.stderr)
    return total


def main():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, steps=40)
    parser.add_argument("--profile", action="store_true", help="then profile 5 steps: GPU kernel time per step, top kernels (stderr)")
    parser.add_argument("--trace", help="with --profile, also save the 5 profiled steps as a Chrome trace to this file")
    args = parser.parse_args()
    if args.trace and not args.profile:
        parser.error("--trace saves the profiled steps: give --profile too")

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = "cuda"
    if world > 1:
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(device)
        dist.init_process_group("nccl")
    torch.manual_seed(42)
    model = GPT(args.vocab, args.block, args.n_layer, args.n_head, args.n_embd).to(device)
    torch.manual_seed(42 + rank)  # each rank its own batches
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), fused=True)
    if world > 1:  # after the optimizer took the parameters, which DDP keeps
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.device(device).index])
    tokens = torch.randint(args.vocab, (1024 * args.block + 1,))

    def train_step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    step = train_step if args.compile == "none" else torch.compile(train_step, mode=args.compile)

    def batch():
        starts = torch.randint(len(tokens) - args.block - 1, (args.batch,))
        window = torch.stack([tokens[s:s + args.block + 1] for s in starts.tolist()]).pin_memory()
        return window[:, :-1].to(device, non_blocking=True), window[:, 1:].to(device, non_blocking=True)

    # The first step alone (compilation included), then intervals of --interval steps timed with one
    # synchronization at each end: no per-step host sync, as trainc logs every 10 steps.
    start = time.perf_counter()
    loss = step(*batch())
    torch.cuda.synchronize()
    first_step = time.perf_counter() - start
    intervals = []
    done = 1
    while done < args.steps:
        count = min(args.interval, args.steps - done)
        start = time.perf_counter()
        for _ in range(count):
            loss = step(*batch())
        torch.cuda.synchronize()
        intervals.append((time.perf_counter() - start) / count)
        done += count
    median = statistics.median(intervals[1:] if len(intervals) > 1 else intervals)  # steps 12 onwards
    kernels_ms = None  # the GPU's kernel time a step, with --profile: what the step would take with no host time
    if args.profile:
        kernels_ms = profile(step, batch, trace=args.trace if rank == 0 else None)  # one file, from one process
    final_loss = loss.item()
    if rank == 0:
        print(json.dumps({"peer": "pytorch" if world == 1 else f"pytorch DDP x{world}", "compile": args.compile,
                          "median_step_ms": 1000 * median, "tokens_per_second": world * args.batch * args.block / median,
                          "first_step_s": first_step, "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
                          "final_loss": final_loss, "gpu_kernels_ms": kernels_ms}))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
