#!/usr/bin/env bash
# Eager, aot_eager and inductor side by side on this machine's CPU, for an mlp, a cnn and a small
# gpt: median step time of steps 11 onwards, throughput relative to eager, and the compile time of
# inductor with a cold kernel cache (first run) and a warm one (second run of the same config).
# Each configuration runs twice, alternating eager and inductor, and the faster median counts:
# shared machines are noisy.
#
#   scripts/bench/cpu_inductor.sh [build-dir]        (TRAINC_BENCH_STEPS: steps per run, default 60)
set -euo pipefail

build=${1:-build}
trainc="$build/trainc"
steps=${TRAINC_BENCH_STEPS:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$trainc" ] || { echo "cpu_inductor.sh: no $trainc; build first (README)" >&2; exit 2; }

common="overwrite_output_dir: true
eval_strategy: no
save_strategy: no
logging_steps: 1
dataloader_drop_last: true
learning_rate: 1.0e-3"
fashion="  kind: idx
  train_path: /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
  train_labels_path: /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"
cat > "$work/mlp.yaml" <<YAML
$common
per_device_train_batch_size: 256
model: {name: mlp, input_size: 784, hidden_sizes: [1024, 1024], num_classes: 10, dropout: 0.0}
data:
$fashion
YAML
cat > "$work/cnn.yaml" <<YAML
$common
per_device_train_batch_size: 128
model: {name: cnn, channels: [32, 64], num_classes: 10, dropout: 0.0}
data:
$fashion
YAML
cat > "$work/gpt.yaml" <<YAML
$common
per_device_train_batch_size: 16
model: {name: gpt, vocab_size: 256, n_layer: 4, n_head: 4, n_embd: 128, block_size: 128, dropout: 0.0}
data: {kind: text, train_path: /usr/share/common-licenses/GPL-3}
YAML

run() {  # run MODEL NAME BACKEND
  local model=$1 name=$2 backend=$3
  TRAINC_CACHE_DIR="$work/cache-$model" "$trainc" --config "$work/$model.yaml" --max-steps "$steps" \
    --torch-compile-backend "$backend" --output-dir "$work/$model-$name" > "$work/$model-$name.log" 2>&1 ||
    { echo "cpu_inductor.sh: $model $name failed:" >&2; tail -5 "$work/$model-$name.log" >&2; exit 1; }
}

for model in mlp cnn gpt; do
  echo "running $model ..." >&2
  run "$model" eager-1 eager
  run "$model" inductor-cold inductor
  run "$model" aot_eager aot_eager
  run "$model" eager-2 eager
  run "$model" inductor-warm inductor
done

python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def read(model, name):
    rows = [json.loads(line) for line in open(f"{work}/{model}-{name}/metrics.jsonl")]
    steps = [r["step_time_ms"] for r in rows if "step_time_ms" in r and r["step"] > 10]
    compile_s = sum(r["compile_seconds"] for r in rows if "compile_seconds" in r)
    compiled = sum(r.get("kernel_libraries_compiled", 0) for r in rows)
    losses = [r["loss"] for r in rows if "loss" in r]
    return statistics.median(steps), compile_s, compiled, losses[-1]
print(f"{'model':<6}{'backend':<11}{'ms/step':>9}{'vs eager':>10}{'compile s':>11}{'libs built':>11}{'last loss':>11}")
for model in ("mlp", "cnn", "gpt"):
    eager = min(read(model, "eager-1")[0], read(model, "eager-2")[0])
    cold, warm = read(model, "inductor-cold"), read(model, "inductor-warm")
    inductor = min(cold[0], warm[0])
    aot = read(model, "aot_eager")
    last = read(model, "eager-1")[3]
    print(f"{model:<6}{'eager':<11}{eager:>9.2f}{1.0:>10.2f}{'':>11}{'':>11}{last:>11.4f}")
    print(f"{model:<6}{'aot_eager':<11}{aot[0]:>9.2f}{eager / aot[0]:>10.2f}{aot[1]:>11.2f}{'':>11}{aot[3]:>11.4f}")
    print(f"{model:<6}{'inductor':<11}{inductor:>9.2f}{eager / inductor:>10.2f}{cold[1]:>11.2f}{cold[2]:>11}{cold[3]:>11.4f}   (cold cache)")
    print(f"{model:<6}{'inductor':<11}{'':>9}{'':>10}{warm[1]:>11.2f}{warm[2]:>11}{warm[3]:>11.4f}   (warm cache)")
PY
