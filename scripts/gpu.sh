#!/usr/bin/env bash
# On the GPU machine (source .device-deps/env.sh first): build trainc against the PyTorch wheel's
# LibTorch, run the tests labelled `cuda`, then the benchmark side by side with the PyTorch peers
# (scripts/bench/pytorch_gpt2.py, a plain PyTorch loop; scripts/bench/hf_trainer_gpt2.py, Hugging
# Face's Trainer) on the same GPU, and print a short table last. Logs go to $OUT (default /tmp/trainc-gpu).
#
# Cases (TRAINC_GPU_CASES, default "gpt2 small"):
#   gpt2   GPT-2 124M (12 layers, 768 wide, vocab 50257), batch 16 x 1024 tokens, bf16; 41 steps,
#          one synchronization every 10 steps
#   small  the launch-bound case: 4 layers, 256 wide, 4 heads, block 256, batch 8 x 256 tokens,
#          bf16; 501 steps, one synchronization every 50 steps
#   loss   the gpt2 case for 200 steps, trainc eager and inductor: the largest relative difference
#          of their logged losses (scripts/bench/compare_losses.py, within bf16's 2e-2)
#   ddp    data-parallel scaling (needs 2 GPUs): the gpt2 case on 1 GPU and on 2 (batch 16 x 1024
#          per GPU), trainc eager and cudagraphs against the PyTorch loop and the same loop under
#          DistributedDataParallel started by torchrun
# Each run's figure is the median step time over those intervals after the first one. The small
# case's PyTorch loop is profiled after it is timed: the table gives its GPU kernels' time a step
# against its step, which tells a host-bound peer from one at its kernels' time.
# Runs per case: TRAINC_GPU_BACKENDS (trainc: eager cudagraphs inductor reduce-overhead aot_eager
# max-autotune max-autotune-no-cudagraphs max-autotune-again, and without-NAME: reduce-overhead with
# the optimization NAME switched off, TRAINC_DISABLE_OPTIMIZATIONS=NAME (compile/optimizations.h),
# or NAME fused_adamw: the foreach AdamW instead of the fused one; max-autotune-without-NAME: the
# same in max-autotune (for gemm_algorithms, a max-autotune choice); env-VAR=VALUE,VAR=VALUE:
# reduce-overhead with those environment variables set),
# TRAINC_GPU_PEER_MODES (PyTorch loop: none default reduce-overhead), TRAINC_GPU_HF_MODES
# (Trainer, gpt2 case only: none default). TRAINC_GPU_ROUNDS=N runs the cases N times, one after the
# other (round 2's runs named gpt2-r2 and so on; the table ends with each trainc run's ratio to
# each peer in every round, their median and lowest). A monitor samples the GPU's clock, power and
# temperature throughout; the summary shows them for each run's steps. TRAINC_GPU_TESTS=0 skips the tests. TRAINC_GPU_PROFILE=1
# runs trainc inductor once more per case with TRAINC_PROFILE_KERNELS=1 and prints where its step
# time goes (each step synchronized: slower, for the breakdown only), then traces steps 11-13 of
# each backend in TRAINC_GPU_TRACE_BACKENDS (default inductor; without-NAME and env-VAR=VALUE,... as above; TRAINC_PROFILE_TRACE) and prints
# their kernels' time per step, and profiles the PyTorch loop's kernels the same way (--profile,
# its trace summed by the same script).
# TRAINC_GPU_HEAD_CHUNKS=1 also times the head's logits made a chunk of rows at a time
# (scripts/bench/head_chunks.py) after the tests.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trainc-gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' >> "$OUT/gpu.txt" 2>&1
# The host's processor: the PyTorch loop of the small case is host-bound, so its step (and the
# ratio to it) depends on the machine a call lands on as much as on the GPU.
command -v lscpu > /dev/null &&
  LC_ALL=C lscpu | grep -E "^(Model name|CPU\(s\)|CPU max MHz):" | tr -s " " | paste -sd ";" - >> "$OUT/gpu.txt"

step() { echo "== $1 ($(date +%T))"; }
# nccl.h of the NCCL the wheel's LibTorch uses, for data-parallel training over NCCL.
if [[ -z "${NCCL_INCLUDE_DIR:-}" ]]; then
  NCCL_INCLUDE_DIR=$(python3 -c 'import glob, os, site; print(next((os.path.dirname(h) for d in site.getsitepackages()
    for h in glob.glob(d + "/nvidia/**/include/nccl.h", recursive=True)), ""))')
  export NCCL_INCLUDE_DIR
fi
echo "nccl.h: ${NCCL_INCLUDE_DIR:-not found}" >> "$OUT/gpu.txt"
step build
# The binary and the CUDA test binaries: the CPU tests (trainc_tests) run on the CPU machines, not here.
targets=(trainc)
[[ "${TRAINC_GPU_TESTS:-1}" == 1 ]] && targets+=(trainc_cuda_tests trainc_cuda_inductor_tests)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTRAINC_BUILD_TESTS=ON > "$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1
if [[ $? -ne 0 ]]; then tail -n 40 "$OUT/build.log" "$OUT/cmake.log"; exit 1; fi

test_summary="not run (TRAINC_GPU_TESTS=0)"
if [[ "${TRAINC_GPU_TESTS:-1}" == 1 ]]; then
  step "tests labelled cuda"
  ctest --test-dir build-gpu -L cuda --verbose --timeout 300 > "$OUT/ctest.log" 2>&1  # verbose: the tests' measured differences
  grep -o "steps started on the device.*\|fp16: largest.*\|fp16 in CUDA graphs.*\|fp16 from a loss scale.*\|largest relative loss difference.*\|two NCCL processes (.*\|a killed NCCL rank:.*\|the two-process NCCL test.*\|ATen picks attention.*\|max-autotune chose.*\|head weight gradient alone.*\|attention backend .* cannot run.*\|attention keeps its log-sum-exp.*" \
    "$OUT/ctest.log" > "$OUT/cuda-test-figures.log"
  test_summary=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
fi

# What making the head's logits a chunk of rows at a time saves, on the small GPT's and GPT-2's head.
if [[ "${TRAINC_GPU_HEAD_CHUNKS:-0}" == 1 ]]; then
  step "head chunks"
  { python3 scripts/bench/head_chunks.py 2048 256 50257 && python3 scripts/bench/head_chunks.py 16384 768 50257; } > "$OUT/head-chunks.txt" 2>&1
fi

# Case settings: trainc flags, PyTorch peer flags, tokens per step.
declare -A TRAINC_FLAGS PEER_FLAGS TOKENS PROFILE_FLAG
TRAINC_FLAGS[gpt2]="--max-steps 41 --logging-steps 10"
PEER_FLAGS[gpt2]="--steps 41 --interval 10"
TOKENS[gpt2]=$((16 * 1024))
TRAINC_FLAGS[small]="--model.n-layer 4 --model.n-embd 256 --model.n-head 4 --model.block-size 256 --per-device-train-batch-size 8
  --data.num-samples 8192 --max-steps 501 --logging-steps 50"
PEER_FLAGS[small]="--steps 501 --interval 50 --batch 8 --block 256 --n-layer 4 --n-head 4 --n-embd 256"
PROFILE_FLAG[small]="--profile"  # the PyTorch loop's GPU kernel time per step: what a CUDA graph of such kernels can reach
TOKENS[small]=$((8 * 256))
TRAINC_FLAGS[ddp]=${TRAINC_FLAGS[gpt2]}
PEER_FLAGS[ddp]=${PEER_FLAGS[gpt2]}
TOKENS[ddp]=${TOKENS[gpt2]}
TRAINC_FLAGS[loss]="--max-steps 200 --logging-steps 10"
TOKENS[loss]=${TOKENS[gpt2]}
GPUS=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)

trainc_run() {  # case, run name, extra flags; WORLD=N when the flags start N processes
  local case=$1 name=$2 world=${WORLD:-1}; shift 2
  step "$case: trainc $name"
  local dir="$OUT/$case$ROUND-${name// /-}"
  # shellcheck disable=SC2086
  local without=()  # a without-NAME run: that optimization switched off
  [[ -n ${TRAINC_GPU_RUN_WITHOUT:-} ]] && without=(TRAINC_DISABLE_OPTIMIZATIONS="$TRAINC_GPU_RUN_WITHOUT")
  local variables=()  # an env-VAR=VALUE,... run: those variables set
  [[ -n ${TRAINC_GPU_RUN_ENV:-} ]] && IFS=, read -ra variables <<< "$TRAINC_GPU_RUN_ENV"
  local start
  start=$(date +%s.%N)
  env "${without[@]}" "${variables[@]}" timeout 300 build-gpu/trainc --config configs/gpt2_124m_synthetic.yaml --output-dir "$dir" --logging-first-step \
    ${TRAINC_FLAGS[$case]} "$@" > "$dir.log" 2>&1
  local rc=$?
  [[ $rc -ne 0 ]] && { echo "trainc $name failed (exit $rc):"; tail -n 15 "$dir.log"; }
  echo "$case$ROUND|trainc $name|$start|$(date +%s.%N)" >> "$OUT/run-times.txt"
  python3 - "$dir/metrics.jsonl" "$case$ROUND" "$name" "$rc" "$((world * TOKENS[$case]))" <<'PY' >> "$OUT/results.jsonl"
import json, statistics, sys
path, case, name, rc, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = [json.loads(l) for l in open(path)] if rc == 0 else []
# Records: step 1 alone, then one per interval (their mean step time); the first interval warms up.
steps = [r for r in rows if "step_time_ms" in r]
peak = next((r["peak_memory_gb"] for r in rows if "peak_memory_gb" in r), None)
setup = sum(r.get("compile_seconds", 0) + r.get("capture_seconds", 0) for r in rows if "input_signature" in r)
median = statistics.median(r["step_time_ms"] for r in steps[2:]) if len(steps) > 2 else float("nan")
print(json.dumps({"case": case, "peer": "trainc", "compile": name, "rc": rc, "median_step_ms": median,
                  "tokens_per_second": tokens / (median / 1000) if steps else 0,
                  # the first step's time with its compile and capture, as the peers measure it
                  "first_step_s": steps[0]["step_time_ms"] / 1000 + setup if steps else None, "peak_memory_gb": peak,
                  "final_loss": steps[-1]["loss"] if steps else None}))
PY
}
peer_run() {  # case, script, peer name, mode; WORLD=N starts N processes with torchrun
  local case=$1 script=$2 peer=$3 mode=$4 world=${WORLD:-1}
  step "$case: $peer $mode x$world"
  local profile="" launch=(python3)
  [[ $peer == pytorch ]] && profile=${PROFILE_FLAG[$case]:-}
  # profiled calls also save the loop's profiled steps as a trace, summed below as trainc's are
  local trace="$OUT/traces/$case$ROUND-$peer-$mode-x$world.json"
  [[ $peer == pytorch && ${TRAINC_GPU_PROFILE:-0} == 1 ]] && { profile="--profile --trace $trace"; mkdir -p "$OUT/traces"; }
  [[ $world -gt 1 ]] && launch=(torchrun --standalone --nproc-per-node "$world")
  # shellcheck disable=SC2086
  local start log="$OUT/$case$ROUND-$peer-$mode-x$world.log"
  start=$(date +%s.%N)
  timeout 400 "${launch[@]}" "scripts/bench/$script" --compile "$mode" ${PEER_FLAGS[$case]} $profile 2> "$log" |
    tee -a "$log" | grep '^{"peer"' |
    python3 -c 'import json,sys; [print(json.dumps({"case": sys.argv[1], **json.loads(l)})) for l in sys.stdin]' "$case$ROUND" \
    >> "$OUT/results.jsonl"
  echo "$case$ROUND|$peer $mode|$start|$(date +%s.%N)" >> "$OUT/run-times.txt"
  if [[ -s $trace ]]; then
    python3 scripts/bench/trace_summary.py "$trace" 5 --top 60 > "$OUT/$case$ROUND-trace-$peer-$mode-x$world.txt" 2>&1
  fi
}

# The flags that compile with `$1`: a backend, or a mode of the inductor backend.
compile_flags() {
  case $1 in
    reduce-overhead | max-autotune | max-autotune-no-cudagraphs) echo "--torch-compile-mode $1" ;;
    *) echo "--torch-compile-backend $1" ;;
  esac
}

rm -f "$OUT/results.jsonl" "$OUT/run-times.txt"
# The GPU's clock, power and temperature every 200 ms while the cases run (read only), to tell a
# slower interval from a GPU that lowered its clock.
monitored=timestamp,clocks.sm,power.draw,temperature.gpu,enforced.power.limit,clocks_event_reasons.sw_power_cap
nvidia-smi --query-gpu=$monitored --format=csv,noheader > /dev/null 2>&1 || monitored=timestamp,clocks.sm,power.draw,temperature.gpu
nvidia-smi --query-gpu=$monitored --format=csv,noheader,nounits -lms 200 > "$OUT/gpu-monitor.csv" 2>/dev/null &
monitor=$!
for round in $(seq "${TRAINC_GPU_ROUNDS:-1}"); do
# Round 2 onwards: the same runs again, named gpt2-r2 and so on (side by side twice in one call).
ROUND=$([[ $round -gt 1 ]] && echo "-r$round")
for case in ${TRAINC_GPU_CASES:-gpt2 small}; do
  if [[ $case == loss ]]; then
    trainc_run loss eager
    trainc_run loss inductor --torch-compile-backend inductor
    python3 scripts/bench/compare_losses.py "$OUT/loss$ROUND-eager/metrics.jsonl" "$OUT/loss$ROUND-inductor/metrics.jsonl" |
      tee "$OUT/loss$ROUND-comparison.txt"
    continue
  fi
  if [[ $case == ddp ]]; then
    if [[ $GPUS -lt 2 ]]; then echo "ddp: this machine has $GPUS GPU; the data-parallel case needs 2"; continue; fi
    trainc_run ddp "eager x1"
    WORLD=2 trainc_run ddp "eager x2" --nproc-per-node 2
    WORLD=2 trainc_run ddp "cudagraphs x2" --nproc-per-node 2 --torch-compile-backend cudagraphs
    peer_run ddp pytorch_gpt2.py pytorch none
    WORLD=2 peer_run ddp pytorch_gpt2.py pytorch none
    continue
  fi
  for run in ${TRAINC_GPU_BACKENDS:-eager cudagraphs inductor reduce-overhead}; do
    case $run in
      eager) trainc_run "$case" eager ;;
      # the same again: the tuning cache holds the first run's choices, nothing is measured
      max-autotune-again) trainc_run "$case" "$run" --torch-compile-mode max-autotune ;;
      without-fused_adamw) trainc_run "$case" "$run" --torch-compile-mode reduce-overhead --optim adamw_torch ;;
      max-autotune-without-*) TRAINC_GPU_RUN_WITHOUT=${run#max-autotune-without-} trainc_run "$case" "$run" --torch-compile-mode max-autotune ;;
      without-*) TRAINC_GPU_RUN_WITHOUT=${run#without-} trainc_run "$case" "$run" --torch-compile-mode reduce-overhead ;;
      env-*) TRAINC_GPU_RUN_ENV=${run#env-} trainc_run "$case" "$run" --torch-compile-mode reduce-overhead ;;
      # shellcheck disable=SC2046
      *) trainc_run "$case" "$run" $(compile_flags "$run") ;;
    esac
  done
  if [[ ${TRAINC_GPU_PROFILE:-0} == 1 ]]; then
    step "$case: trainc inductor, profiled"
    # shellcheck disable=SC2086
    TRAINC_PROFILE_KERNELS=1 timeout 300 build-gpu/trainc --config configs/gpt2_124m_synthetic.yaml --output-dir "$OUT/$case-profile" \
      ${TRAINC_FLAGS[$case]} --torch-compile-backend inductor > "$OUT/$case-profile.log" 2>&1
    grep -A40 "^profile:" "$OUT/$case-profile.log" | cut -c1-400 > "$OUT/$case-profile.txt"
    for run in ${TRAINC_GPU_TRACE_BACKENDS:-inductor}; do
      step "$case: trainc $run, traced"
      mkdir -p "$OUT/traces"
      # a without-NAME run traces reduce-overhead with that optimization switched off, an
      # env-VAR=VALUE,... run reduce-overhead with those variables set
      settings=()
      [[ $run == without-* ]] && settings=(TRAINC_DISABLE_OPTIMIZATIONS="${run#without-}")
      [[ $run == env-* ]] && IFS=, read -ra settings <<< "${run#env-}"
      # the captured graphs as DOT too (compat/cuda_graph): what each traced kernel waits for
      mkdir -p "$OUT/traces/$case-graphs-$run"
      # --dump-dir: the generated CUDA, whose header comments name each kernel's work in the summary
      # shellcheck disable=SC2086
      env "${settings[@]}" TRAINC_PROFILE_TRACE="$OUT/traces/$case-$run.json" TRAINC_PROFILE_TRACE_STEPS=11:3 \
        TRAINC_CUDA_GRAPH_DOT="$OUT/traces/$case-graphs-$run" \
        timeout 300 build-gpu/trainc --config configs/gpt2_124m_synthetic.yaml --output-dir "$OUT/$case-trace-$run" ${TRAINC_FLAGS[$case]} \
        $(compile_flags "$([[ $run == without-* || $run == env-* ]] && echo reduce-overhead || echo "$run")") --dump-dir "$OUT/$case-dump-$run" > "$OUT/$case-trace-$run.log" 2>&1 &&
        python3 scripts/bench/trace_summary.py "$OUT/traces/$case-$run.json" 3 --top 60 --sequence \
          --sources "$OUT/$case-dump-$run"/*.cu > "$OUT/$case-trace-$run.txt" 2>&1
    done
  fi
  for mode in ${TRAINC_GPU_PEER_MODES:-none default reduce-overhead}; do peer_run "$case" pytorch_gpt2.py pytorch "$mode"; done
  if [[ $case == gpt2 ]]; then
    for mode in ${TRAINC_GPU_HF_MODES:-none default}; do peer_run "$case" hf_trainer_gpt2.py hf_trainer "$mode"; done
  fi
done
done
kill "$monitor" 2>/dev/null

# max-autotune's records (the choices of this call's runs: a fresh machine starts with an empty cache).
records=("${TRAINC_CACHE_DIR:-$HOME/.cache/trainc}"/autotune/*.txt)
if [[ -e ${records[0]} ]]; then
  cat "${records[@]}" > "$OUT/autotune-records.txt"
  python3 - "$OUT/autotune-records.txt" <<'PY' > "$OUT/autotune-summary.txt"
import collections, sys
lines = open(sys.argv[1]).read().split("trainc autotune 1\n")[1:]
kernels = collections.Counter()
for record in lines:
    fields = dict(l.split(": ", 1) for l in record.strip().split("\n") if ": " in l)
    call = " | ".join(fields["key"].split(" | ")[1:3])
    if call.startswith("generated kernel"):
        kernels[fields["choice"]] += 1
    else:
        print(f"{call[:90]}: {fields['choice']} ({fields['measured'][:150]})")
print("generated kernels' launch shapes:", ", ".join(f"{n}x {c}" for c, n in kernels.most_common()))
PY
fi
# Every log but the traces in one archive that sorts first among $OUT's files.
tar czf "$OUT/00-logs.tgz" -C "$OUT" --exclude=./traces --exclude=./00-logs.tgz . 2>/dev/null
echo
cat "$OUT/gpu.txt"
echo "tests: $test_summary"
[[ -s "$OUT/cuda-test-figures.log" ]] && cat "$OUT/cuda-test-figures.log"
[[ -s "$OUT/head-chunks.txt" ]] && cat "$OUT/head-chunks.txt"
grep -h "compile: autotuned" "$OUT"/*.log 2>/dev/null | cut -c1-300
[[ -s "$OUT/autotune-summary.txt" ]] && { echo "max-autotune's choices:"; cut -c1-260 "$OUT/autotune-summary.txt"; }
[[ -s "$OUT/loss-comparison.txt" ]] && echo "trainc inductor against eager, $(cat "$OUT/loss-comparison.txt")"
grep -h -A4 "^profile:" "$OUT"/*-pytorch-*.log 2>/dev/null
for profile in "$OUT"/*-profile.txt; do [[ -s $profile ]] && { echo "trainc inductor profile ($(basename "$profile")):"; cat "$profile"; }; done
for trace in "$OUT"/*-trace-*.txt; do [[ -s $trace ]] && { echo "trace ($(basename "$trace")):"; cat "$trace"; }; done
# Each run's GPU clock and power while it trained (the monitor's samples above 250 W inside the run:
# steps, not start-up or compilation), from the monitor.
[[ -s "$OUT/run-times.txt" && -s "$OUT/gpu-monitor.csv" ]] && python3 - "$OUT/run-times.txt" "$OUT/gpu-monitor.csv" <<'PY'
import datetime, statistics, sys
samples = []
for line in open(sys.argv[2]):
    fields = [f.strip() for f in line.split(",")]
    try:
        when = datetime.datetime.strptime(fields[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        # the power cap's reason flag: "Active" or "Not Active"
        capped = len(fields) > 5 and fields[5] == "Active"
        samples.append((when, float(fields[1]), float(fields[2]), float(fields[3]), float(fields[4]) if len(fields) > 4 else float("nan"), capped))
    except (ValueError, IndexError):
        continue
print("\nGPU while each run trained (samples above 250 W): count, SM clock MHz (median, lowest), power W (median), highest temperature C, "
      "power limit W, share of samples with the clock held down by the power cap")
for line in open(sys.argv[1]):
    case, run, start, end = line.strip().split("|")
    busy = [s for s in samples if float(start) <= s[0] <= float(end) and s[2] > 250]
    if busy:
        print(f"  {case:<8}{run:<44}{len(busy):4d}{statistics.median(s[1] for s in busy):7.0f}{min(s[1] for s in busy):7.0f}"
              f"{statistics.median(s[2] for s in busy):7.0f}{max(s[3] for s in busy):5.0f}{busy[0][4]:7.0f}"
              f"{sum(s[5] for s in busy) / len(busy):6.0%}")
PY
[[ -s "$OUT/results.jsonl" ]] && python3 - "$OUT/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
nan = float("nan")
for case in dict.fromkeys(r["case"] for r in rows):
    runs = [r for r in rows if r["case"] == case]
    peers = [r for r in runs if r["peer"] != "trainc" and r.get("tokens_per_second")]
    print(f"\n{case}: {'run':<26}{'ms/step':>9}{'tokens/s':>11}{'first step s':>13}{'peak GB':>9}{'last loss':>10}"
          + "".join(f"{'/' + ('ddp' if 'DDP' in p['peer'] else p['peer'][:2]) + ' ' + p['compile'][:8]:>14}" for p in peers))
    for r in runs:
        ratios = "".join(f"{r['tokens_per_second'] / p['tokens_per_second'] if r.get('tokens_per_second') else nan:>14.2f}"
                         for p in peers) if r["peer"] == "trainc" else ""
        print(f"{'':>{len(case) + 2}}{r['peer'] + ' ' + r['compile']:<26}{r['median_step_ms']:>9.2f}{r['tokens_per_second']:>11.0f}"
              f"{(r.get('first_step_s') or nan):>13.1f}{(r.get('peak_memory_gb') or nan):>9.1f}{(r.get('final_loss') or nan):>10.4f}{ratios}")
    # A profiled peer's GPU kernel time against its step: near 100%, the host cost it nothing and
    # the ratio compares the two steps' GPU work; well below, the peer waited on its host. (Under
    # DistributedDataParallel the sum has NCCL's kernels too, which overlap the rest: it can pass 100%.)
    for p in (p for p in runs if p.get("gpu_kernels_ms")):
        print(f"{'':>{len(case) + 2}}{p['peer'] + ' ' + p['compile']}: its GPU kernels {p['gpu_kernels_ms']:.3f} ms a step, "
              f"{p['gpu_kernels_ms'] / p['median_step_ms']:.0%} of its step")
    if case == "ddp":  # tokens/s on 2 GPUs over the same program's on 1
        speed = {(r["peer"], r["compile"]): r.get("tokens_per_second") or nan for r in runs}
        one = speed.get(("trainc", "eager x1"), nan)
        for name in ("eager x2", "cudagraphs x2"):
            print(f"  2 GPUs over trainc eager on 1: trainc {name[:-3]:<11}{speed.get(('trainc', name), nan) / one:6.2f}x")
        print(f"  2 GPUs over the PyTorch loop on 1: PyTorch DDP {speed.get(('pytorch DDP x2', 'none'), nan) / speed.get(('pytorch', 'none'), nan):6.2f}x")
# With TRAINC_GPU_ROUNDS > 1: each trainc run's ratio to each peer in every round (a round's runs
# against that round's peers), then their median and lowest. The peers' host-bound steps move
# more between runs than trainc's, so one pair is one sample of the ratio. A failed run leaves its
# round out, which the round labels show.
import math, re
def measured(r):
    return math.isfinite(r.get("tokens_per_second") or float("nan")) and r["tokens_per_second"] > 0
by_round = {}
for r in rows:
    named = re.fullmatch(r"(.+)-r(\d+)", r["case"])
    base, number = (named[1], int(named[2])) if named else (r["case"], 1)
    by_round.setdefault(base, {}).setdefault(number, []).append(r)
for base, rounds in by_round.items():
    pairs = {}
    for number, runs in sorted(rounds.items()):
        for p in (p for p in runs if p["peer"] != "trainc" and measured(p)):
            for t in (t for t in runs if t["peer"] == "trainc" and measured(t)):
                pairs.setdefault((t["compile"], p["peer"] + " " + p["compile"]), []).append((number, t["tokens_per_second"] / p["tokens_per_second"]))
    if len(rounds) < 2 or not pairs:
        continue
    print(f"\n{base}, {len(rounds)} rounds: ratio in each round, median, lowest")
    for (run, peer), ratios in pairs.items():
        values = [x for _, x in ratios]
        print(f"  trainc {run} / {peer}: {' '.join(f'r{n} {x:.2f}' for n, x in ratios)}; "
              f"median {statistics.median(values):.2f}, lowest {min(values):.2f}")
PY
