#!/usr/bin/env bash
# kolo.torch against kolo-bench, side by side in one run (issue 20 point 4):
#   1. the training step (resnet50 and small161 presets): kolo-bench --mode
#      step --inplace (C++, in-place allreduce_async + synchronize_all) and
#      bench/python_step.py (kolo.torch, allreduce_async_ + synchronize, as
#      Horovod's optimizer), steps back to back in both (no barrier between
#      steps), alternating ROUNDS times on the same machine;
#   2. `import kolo.torch` time in one process (median of 5);
#   3. the wall time of `kolorun -np 4 /usr/bin/python3 -c 'import kolo.torch
#      as hvd; hvd.init()'` (median of 3), and of the same 4 processes that
#      only import torch (the floor that kolo's start-up adds to).
# Usage: scripts/python-bench.sh [BUILD_DIR (build)] [NP (2)] [ROUNDS (2)]
# PRESETS="small161" runs the step of that preset alone (default: both);
# STARTUP=0 skips the import and start-up timings.
# Needs a build with the Python package (KOLO_WITH_PYTHON) and python3-torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/${1:-build}
np=${2:-2}
rounds=${3:-2}
py=${KOLO_PYTHON:-/usr/bin/python3}
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1
kolorun=$build/bin/kolorun
echo "== machine: $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
for round in $(seq 1 "$rounds"); do
  for preset in ${PRESETS:-resnet50 small161}; do
    steps=20 warmup=3
    [ "$preset" = small161 ] && steps=500 warmup=20
    echo "== round $round, $preset, np=$np"
    "$kolorun" -np "$np" "$build/bin/kolo-bench" --mode step --inplace --preset "$preset" \
      --steps "$steps" --warmup "$warmup" 2>&1 |
      grep -E "^\[0\]<stdout>: +(resnet50|small161) " |
      sed "s/^\[0\]<stdout>:/kolo-bench step (C++):/" || true
    "$kolorun" -np "$np" "$py" "$root/bench/python_step.py" --preset "$preset" \
      --steps "$steps" --warmup "$warmup" 2>&1 | grep "kolo.torch step" || true
  done
done
[ "${STARTUP:-1}" = 0 ] && exit 0
echo "== import kolo.torch (one process; torch included), 5 runs"
for i in 1 2 3 4 5; do
  "$py" -c 'import time; t=time.perf_counter(); import kolo.torch; print(f"{time.perf_counter()-t:.3f}")'
done | sort -n | awk '{v[NR]=$1} END {printf "import kolo.torch: median %.3f s (min %.3f, max %.3f)\n", v[3], v[1], v[5]}'
"$py" -c 'import torch, time; t=time.perf_counter(); import kolo.torch; print(f"import kolo.torch after torch: {time.perf_counter()-t:.3f} s")'
# The start-up, beside its floor on this machine: the same 4 processes
# importing torch alone (most of the time: 4 imports on the cores at once).
startup() {  # LABEL CODE: the median of 3 launches
  local label=$1 code=$2
  echo "== kolorun -np 4 $py -c '$code', 3 runs"
  for i in 1 2 3; do
    s=$(date +%s.%N)
    rc=0
    "$kolorun" -np 4 "$py" -c "$code" >/dev/null || rc=$?
    e=$(date +%s.%N)
    if [ "$rc" != 0 ]; then echo "kolorun -np 4 failed (exit $rc)" >&2; fi
    echo "$e - $s" | bc
  done | sort -n | awk -v l="$label" '{v[NR]=$1} END {printf "%s: median %.2f s (min %.2f, max %.2f)\n", l, v[2], v[1], v[3]}'
}
startup "kolorun -np 4 start-up" 'import kolo.torch as hvd; hvd.init()'
startup "the floor, kolorun -np 4 import torch alone" 'import torch'
