#!/usr/bin/env bash
# kolo against its peers, side by side on this machine right now: kolo-bench
# allreduce (over shared memory, KOLO_SHM=1, the default, and over loopback
# TCP, KOLO_SHM=0), Gloo's ring allreduce over TCP, Open MPI's MPI_Allreduce
# over TCP (`--mca pml ob1 --mca btl self,tcp`, loopback) and over its
# shared-memory transport (`--mca btl self,vader`), float32 sum, out of
# place, 4 B to MAX_BYTES (factor 4), on 2 and 4 ranks, RUNS rounds with the
# three runs of a round back to back, so that the VM's slow and fast minutes
# hit all of them alike. Every time is each rank's median over ~1 s of
# iterations, max over ranks; the table shows the median over rounds (and the
# min-max) and kolo's time over each peer's.
#
# The peers' programs (bench/peers/, written for this comparison, not part of
# kolo) are compiled here; a peer whose development package is missing
# (libgloo-dev, libopenmpi-dev + openmpi-bin) is left out with a note. The
# peers use the system's TCP congestion control
# (net.ipv4.tcp_congestion_control), kolo its own choice (KOLO_TCP_CONGESTION,
# cubic by default). PEER_CONGESTION=cubic (root) sets the system's for the
# duration of the script and puts the old one back, so that the peers run on
# the same congestion control as kolo; pacing BBR, a common default, slows
# every peer's large transfers on loopback ~1.5x.
#
# Usage: [PEER_CONGESTION=NAME] scripts/peer-bench.sh [RUNS=3]
#        [BUILD_DIR=build] [MAX_BYTES=256M]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
bin="$root/${2:-build}/bin"
max=${3:-256M}
out=${KOLO_BENCH_OUT:-$(mktemp -d /tmp/kolo-peers.XXXXXX)}
mkdir -p "$out"
max_bytes=$(python3 -c "import sys; s=sys.argv[1]; u={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*u[s[-1]] if s[-1] in u else int(s))" "$max")

cc_file=/proc/sys/net/ipv4/tcp_congestion_control
if [[ -n "${PEER_CONGESTION:-}" ]]; then
  old_cc=$(cat "$cc_file")
  trap 'echo "$old_cc" >"$cc_file"' EXIT
  echo "$PEER_CONGESTION" >"$cc_file"
fi

peers=()
if [[ -f /usr/include/gloo/allreduce.h ]] &&
  g++ -O3 -march=native -std=c++20 -o "$out/gloo_allreduce" \
    "$root/bench/peers/gloo_allreduce.cc" -lgloo -lpthread; then
  peers+=(gloo)
else
  echo "note: Gloo left out (apt-get install libgloo-dev)" >&2
fi
if command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
  mpicc -O3 -march=native -o "$out/mpi_allreduce" \
    "$root/bench/peers/mpi_allreduce.c"; then
  peers+=(ompi vader)
else
  echo "note: Open MPI left out (apt-get install libopenmpi-dev openmpi-bin)" >&2
fi

run_peer() {  # peer n file
  local peer=$1 n=$2 file=$3
  case $peer in
    gloo)
      local store pids=() r
      store=$(mktemp -d "$out/store.XXXXXX")
      for r in $(seq 0 $((n - 1))); do
        if ((r == 0)); then
          "$out/gloo_allreduce" "$r" "$n" "$store" 4 "$max_bytes" >"$file" &
        else
          "$out/gloo_allreduce" "$r" "$n" "$store" 4 "$max_bytes" >/dev/null &
        fi
        pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r"; done
      rm -rf "$store"
      ;;
    ompi)
      mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 \
        --mca btl self,tcp --mca btl_tcp_if_include lo \
        "$out/mpi_allreduce" 4 "$max_bytes" >"$file"
      ;;
    vader)
      mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 \
        --mca btl self,vader \
        "$out/mpi_allreduce" 4 "$max_bytes" >"$file"
      ;;
  esac
}

echo "# $(date -u '+%F %H:%M UTC'); system congestion control:" \
  "$(cat "$cc_file"); peers: ${peers[*]:-none}" \
  | tee "$out/header"
step=0
total=$(( runs * 2 * (2 + ${#peers[@]}) ))
progress() {  # what: a progress line on stderr (runs take minutes)
  step=$(( step + 1 ))
  echo "[$step/$total] $1 ..." >&2
}
for run in $(seq 1 "$runs"); do
  for n in 2 4; do
    progress "allreduce kolo np=$n run $run"
    "$bin/kolorun" -np "$n" "$bin/kolo-bench" --min-bytes 4 \
      --max-bytes "$max_bytes" --factor 4 --json "$out/kolo_np${n}_run${run}.json" \
      >/dev/null
    progress "allreduce kolo (TCP, KOLO_SHM=0) np=$n run $run"
    KOLO_SHM=0 "$bin/kolorun" -np "$n" "$bin/kolo-bench" --min-bytes 4 \
      --max-bytes "$max_bytes" --factor 4 \
      --json "$out/kolotcp_np${n}_run${run}.json" >/dev/null
    for peer in "${peers[@]}"; do
      progress "allreduce $peer np=$n run $run"
      run_peer "$peer" "$n" "$out/${peer}_np${n}_run${run}.txt"
    done
  done
done

python3 - "$out" "$runs" "${peers[@]}" <<'PY'
import json, statistics, sys
out, runs, peers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
names = {"kolotcp": "kolo TCP", "gloo": "Gloo ring", "ompi": "Open MPI TCP",
         "vader": "Open MPI shm (vader)"}
peers = ["kolotcp"] + peers
def size_name(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"
def cell(v):
    return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"
for n in (2, 4):
    times = {}  # (who, size) -> [us per run]
    for run in range(1, runs + 1):
        for who in ("kolo", "kolotcp"):
            for rec in json.load(open(f"{out}/{who}_np{n}_run{run}.json")):
                if rec["check"] != "ok":
                    sys.exit(f"kolo check failed: {rec}")
                times.setdefault((who, rec["size_bytes"]), []).append(rec["time_us"])
        for peer in peers[1:]:
            for line in open(f"{out}/{peer}_np{n}_run{run}.txt"):
                size, us = line.split()
                times.setdefault((peer, int(size)), []).append(float(us))
    sizes = sorted(s for who, s in times if who == "kolo")
    print(f"\n{n} ranks: time (us), median of {runs} rounds (min-max)\n")
    print("| size | kolo (shm) | " + " | ".join(
        f"{names[p]} | kolo / {names[p]}" for p in peers) + " |")
    print("|---" * (2 + 2 * len(peers)) + "|")
    for size in sizes:
        kolo = times[("kolo", size)]
        row = [size_name(size), cell(kolo)]
        for p in peers:
            theirs = times.get((p, size))
            if not theirs:
                row += ["-", "-"]
                continue
            row += [cell(theirs),
                    f"{statistics.median(kolo) / statistics.median(theirs):.2f}"]
        print("| " + " | ".join(row) + " |")
print(f"\nraw figures: {out}")
PY
