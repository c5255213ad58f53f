#!/usr/bin/env bash
# Measures kolorun start-up: from launching `kolorun -np N` to every worker
# past kolo::init() (and the whole run's wall time), RUNS times.
# Usage: scripts/startup.sh [N=4] [RUNS=5] [BUILD_DIR=build]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-4}
runs=${2:-5}
bin="$root/${3:-build}/bin"
for run in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  out=$("$bin/kolorun" -np "$n" "$bin/kolo-mp-worker" topology)
  end=$(date +%s%N)
  last_init=$(grep -o 'init_done_ns=[0-9]*' <<<"$out" | cut -d= -f2 | sort -n | tail -1)
  count=$(grep -c 'init_done_ns=' <<<"$out")
  awk -v r="$run" -v n="$n" -v c="$count" -v s="$start" -v i="$last_init" -v e="$end" 'BEGIN {
    printf "run %d: np=%d, %d workers past init after %.3f s; kolorun wall %.3f s\n",
      r, n, c, (i - s) / 1e9, (e - s) / 1e9 }'
done
