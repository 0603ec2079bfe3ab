"""The Hugging Face Trainer peer for trainc's GPU benchmark: the GPT of pytorch_gpt2.py trained by
transformers' Trainer with the TrainingArguments trainc's config mirrors (bf16, fused AdamW,
gradient clipping at 1.0, cosine schedule with 10 warm-up steps), on synthetic tokens.

Timing as pytorch_gpt2.py: the first step alone (compilation included), then intervals of
--interval steps with one synchronization at each end (a callback at step 1 and every
--interval steps after it), median of the intervals after the first. Prints one JSON line.
Usage: python3 hf_trainer_gpt2.py --compile {none,default,reduce-overhead} [--steps 41]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gpt2 import GPT, add_run_arguments  # noqa: E402  the same model, parameter for parameter


class LanguageModel(torch.nn.Module):
    """The GPT with its loss, as Trainer expects: forward(input_ids, labels) -> {"loss": ...}."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids, labels):
        logits = self.gpt(input_ids)
        return {"loss": F.cross_entropy(logits.float().view(-1, logits.size(-1)), labels.view(-1))}


class Windows(torch.utils.data.Dataset):
    def __init__(self, vocab, block, count):
        generator = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(vocab, (count * (block + 1),), generator=generator)
        self.block, self.count = block, count

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        window = self.tokens[i * (self.block + 1):(i + 1) * (self.block + 1)]  # disjoint windows, as the other runs draw
        return {"input_ids": window[:-1], "labels": window[1:]}


class IntervalTimer(TrainerCallback):
    def __init__(self, interval):
        self.interval, self.start, self.marks = interval, None, {}

    def on_step_begin(self, args, state, control, **kwargs):
        if self.start is None:
            torch.cuda.synchronize()
            self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.interval == 1 or self.interval == 1:
            torch.cuda.synchronize()
            self.marks[state.global_step] = time.perf_counter()


def main():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, steps=41)
    args = parser.parse_args()

    torch.manual_seed(42)
    model = LanguageModel(GPT(args.vocab, args.block, args.n_layer, args.n_head, args.n_embd))
    timer = IntervalTimer(args.interval)
    with tempfile.TemporaryDirectory() as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=args.batch, max_steps=args.steps, learning_rate=6e-4,
            weight_decay=0.1, adam_beta2=0.95, max_grad_norm=1.0, warmup_steps=10, lr_scheduler_type="cosine", bf16=True,
            optim="adamw_torch_fused", logging_steps=args.interval, save_strategy="no", report_to=[], disable_tqdm=True,
            torch_compile=args.compile != "none", torch_compile_mode=None if args.compile in ("none", "default") else args.compile)
        trainer = Trainer(model=model, args=training_args, train_dataset=Windows(args.vocab, args.block, args.batch * (args.steps + 1)),
                          callbacks=[timer])
        trainer.train()
    marks = [timer.marks[s] for s in sorted(timer.marks)]
    intervals = [(b - a) / args.interval for a, b in zip(marks, marks[1:])]
    median = statistics.median(intervals[1:] if len(intervals) > 1 else intervals)
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    print(json.dumps({"peer": "hf_trainer", "compile": args.compile, "median_step_ms": 1000 * median,
                      "tokens_per_second": args.batch * args.block / median, "first_step_s": marks[0] - timer.start,
                      "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9, "final_loss": losses[-1] if losses else None}))


if __name__ == "__main__":
    main()
