#!/usr/bin/env bash
# Training step through kolo.torch's DistributedOptimizer (kolorun), torch's
# DistributedDataParallel with Gloo (env:// ranks) and DistributedDataParallel
# on kolo's c10d backend (kolorun), side by side in one run, alternating
# rounds (these VMs are noisy). See
# scripts/torch-train-bench.py for the models and what is timed.
# Usage: scripts/torch-train-bench.sh [BUILD] [ROUNDS] [NPS] [MODELS]
#   defaults: build 3 "2 4" "cnn mlp"
# Prints one RESULT line per run and a table of medians of the rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
rounds=${2:-3}
nps=${3:-2 4}
models=${4:-cnn mlp}
py=/usr/bin/python3
bench="$root/scripts/torch-train-bench.py"
export PYTHONPATH="$root/$build/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
results=$(mktemp)
trap 'rm -f "$results"' EXIT

port=29600
for round in $(seq 1 "$rounds"); do
  for np in $nps; do
    for model in $models; do
      for mode in kolo ddp-kolo; do
        "$root/$build/bin/kolorun" -np "$np" --start-timeout 120 \
          "$py" "$bench" --mode "$mode" --model "$model" 2>/dev/null \
          | sed -n 's/^\[0\]<stdout>://p' | grep RESULT | tee -a "$results"
      done
      port=$((port + 1))
      # The ranks get the env:// variables torchrun would set: Debian's
      # torchrun (torch 1.13 on Python 3.11) fails before starting any
      # worker (AttributeError in elastic/multiprocessing/api.py to_map:
      # Std.from_str returns None for the default "0").
      pids=()
      for r in $(seq 0 $((np - 1))); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$np LOCAL_WORLD_SIZE=$np \
          MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
          timeout 300 "$py" "$bench" --mode ddp --model "$model" 2>/dev/null \
          | { grep RESULT || true; } | tee -a "$results" &
        pids+=($!)
      done
      wait "${pids[@]}"
    done
  done
done

echo
echo "median over $rounds round(s) of the per-step median (ms):"
"$py" - "$results" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = dict(re.findall(r'(\w+)=(\S+)', line))
    rows.setdefault((int(m['np']), m['model'], m['mode']), []).append(
        float(m['median_ms']))
print(f"{'np':>3} {'model':>6} {'kolo.torch':>11} {'DDP gloo':>9} "
      f"{'DDP kolo':>9}  gloo/kolo.torch  gloo/DDP-kolo")
for np_, model in sorted({(k[0], k[1]) for k in rows}):
    k, d, dk = (statistics.median(rows.get((np_, model, m), [float('nan')]))
                for m in ('kolo', 'ddp', 'ddp-kolo'))
    print(f'{np_:>3} {model:>6} {k:>11.2f} {d:>9.2f} {dk:>9.2f}  '
          f'{d / k:>15.2f}x {d / dk:>13.2f}x')
EOF
