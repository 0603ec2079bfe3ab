#!/usr/bin/env bash
# On the GPU machine (source .device-deps/env.sh first): build trainc against the PyTorch wheel's
# LibTorch, run the test suite, then the GPT-2 124M benchmark side by side with the PyTorch peer
# (scripts/bench/pytorch_gpt2.py), and print a short table last. Logs go to $OUT (default /tmp/trainc-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trainc-gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' >> "$OUT/gpu.txt" 2>&1

step() { echo "== $1 ($(date +%T))"; }
step build
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTRAINC_BUILD_TESTS=ON > "$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" > "$OUT/build.log" 2>&1
build_rc=$?
if [[ $build_rc -ne 0 ]]; then tail -n 40 "$OUT/build.log" "$OUT/cmake.log"; exit 1; fi

test_summary="not run (TRAINC_GPU_TESTS=0)"
if [[ "${TRAINC_GPU_TESTS:-1}" == 1 ]]; then
  step tests
  ctest --test-dir build-gpu -j8 --output-on-failure --timeout 300 > "$OUT/ctest.log" 2>&1
  test_summary=$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1)
elif [[ -n "${TRAINC_GPU_TEST_FILTER:-}" ]]; then
  step "tests $TRAINC_GPU_TEST_FILTER"
  build-gpu/tests/trainc_tests "$TRAINC_GPU_TEST_FILTER" > "$OUT/tests.log" 2>&1
  test_summary="$TRAINC_GPU_TEST_FILTER: $(tail -n 2 "$OUT/tests.log" | tr -s '\n' ' ')"
fi

# Median step time over 10-step intervals (steps 12 onwards), from trainc's metrics.jsonl.
trainc_run() {  # name, extra flags
  local name=$1; shift
  step "trainc $name"
  local start=$(date +%s.%N)
  build-gpu/trainc --config configs/gpt2_124m_synthetic.yaml --output-dir "$OUT/$name" --max-steps 41 \
    --logging-steps 10 --logging-first-step "$@" \
    > "$OUT/$name.log" 2>&1
  local rc=$?
  python3 - "$OUT/$name/metrics.jsonl" "$name" "$rc" <<'PY' >> "$OUT/results.jsonl"
import json, statistics, sys
path, name, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(path)] if rc == 0 else []
# Records: step 1 alone, then one per 10 steps (their mean step time); the first interval warms up.
steps = [r for r in rows if "step_time_ms" in r]
peak = next((r["peak_memory_gb"] for r in rows if "peak_memory_gb" in r), None)
median = statistics.median(r["step_time_ms"] for r in steps[2:]) if len(steps) > 2 else float("nan")
print(json.dumps({"peer": "trainc", "compile": name, "rc": rc, "median_step_ms": median,
                  "tokens_per_second": 16 * 1024 / (median / 1000) if steps else 0,
                  "first_step_s": steps[0]["step_time_ms"] / 1000 if steps else None, "peak_memory_gb": peak,
                  "final_loss": steps[-1]["loss"] if steps else None}))
PY
}
rm -f "$OUT/results.jsonl"
# TRAINC_GPU_BACKENDS: the trainc runs, by compile backend (eager: not compiled).
for backend in ${TRAINC_GPU_BACKENDS:-eager}; do
  if [[ $backend == eager ]]; then trainc_run eager; else trainc_run "$backend" --torch-compile-backend "$backend"; fi
done
for mode in ${TRAINC_GPU_PEER_MODES:-none default}; do
  step "pytorch $mode"
  timeout 300 python3 scripts/bench/pytorch_gpt2.py --compile "$mode" --steps 41 >> "$OUT/results.jsonl" 2> "$OUT/pytorch_$mode.log"
done

if [[ "${TRAINC_GPU_ASAN:-0}" == 1 ]]; then
  step "asan tests"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINC_PCH=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" \
    > "$OUT/asan-cmake.log" 2>&1 && timeout 240 cmake --build build-asan -j"$(nproc)" --target trainc_tests > "$OUT/asan-build.log" 2>&1
  ASAN_OPTIONS=detect_leaks=0 timeout 60 build-asan/tests/trainc_tests "enumerations list their valid values" > "$OUT/asan-test.log" 2>&1
  tail -n 5 "$OUT/asan-build.log"; head -60 "$OUT/asan-test.log"
fi

echo
cat "$OUT/gpu.txt"
echo "tests: $test_summary"
python3 - "$OUT/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = next((r for r in rows if r["peer"] == "pytorch" and r["compile"] == "none"), None)
print(f"{'run':<22}{'ms/step':>10}{'tokens/s':>12}{'vs torch eager':>16}{'first step s':>14}{'peak GB':>9}{'last loss':>11}")
for r in rows:
    ratio = r["tokens_per_second"] / base["tokens_per_second"] if base and r["tokens_per_second"] else float("nan")
    peak = r.get("peak_memory_gb")
    print(f"{r['peer'] + ' ' + r['compile']:<22}{r['median_step_ms']:>10.1f}{r['tokens_per_second']:>12.0f}{ratio:>16.2f}"
          f"{(r['first_step_s'] or 0):>14.1f}{(peak if peak else float('nan')):>9.1f}{(r.get('final_loss') or float('nan')):>11.4f}")
PY
