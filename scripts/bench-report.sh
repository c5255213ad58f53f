#!/usr/bin/env bash
# The issue-3 report: kolo-bench allreduce (float32 sum, out of place) from
# 4 B to 256 MiB (factor 4) on 2 and 4 ranks, RUNS runs each, and a table of
# the median over runs of each size's time (each run's time is already the
# max over ranks of each rank's median) with the spread over runs, and of its
# p90 (max over ranks of each rank's 90th percentile).
# Usage: scripts/bench-report.sh [RUNS=3] [BUILD_DIR=build] [extra kolo-bench
#        flags, e.g. --mode negotiated...]    JSON of every run is kept in
#        $KOLO_BENCH_OUT (a temp directory by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
bin="$root/${2:-build}/bin"
shift $(( $# > 2 ? 2 : $# ))
out=${KOLO_BENCH_OUT:-$(mktemp -d /tmp/kolo-bench.XXXXXX)}
mkdir -p "$out"
step=0
total=$(( 2 * runs ))
for n in 2 4; do
  for run in $(seq 1 "$runs"); do
    step=$(( step + 1 ))
    # Progress on stderr: a run takes a minute or more.
    echo "[$step/$total] allreduce 4 B..256 MiB kolo np=$n run $run ..." >&2
    "$bin/kolorun" -np "$n" "$bin/kolo-bench" --min-bytes 4 --max-bytes 256M \
      --factor 4 --json "$out/np${n}_run${run}.json" "$@" >/dev/null
  done
done
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def size_name(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"
for n in (2, 4):
    rows = {}
    for run in range(1, runs + 1):
        for rec in json.load(open(f"{out}/np{n}_run{run}.json")):
            if rec["check"] != "ok":
                sys.exit(f"check failed: {rec}")
            rows.setdefault(rec["size_bytes"], []).append(rec)
    mode = next(iter(rows.values()))[0].get("mode", "raw")
    print(f"\n{n} ranks, {mode} mode: median of {runs} runs "
          "(min-max over runs)\n")
    print("| size | time (us) | p90 (us) | busbw (GB/s) |")
    print("|---|---|---|---|")
    for size in sorted(rows):
        times = [r["time_us"] for r in rows[size]]
        p90 = [r.get("p90_us", 0) for r in rows[size]]
        busbw = [r["busbw_gbps"] for r in rows[size]]
        print(f"| {size_name(size)} | {statistics.median(times):,.1f} "
              f"({min(times):,.1f}-{max(times):,.1f}) | "
              f"{statistics.median(p90):,.1f} | "
              f"{statistics.median(busbw):.3f} |")
print(f"\nJSON: {out}")
PY
