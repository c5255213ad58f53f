#!/usr/bin/env bash
# Runs kolo's libFuzzer targets (fuzz/; CONTRIBUTING.md, "Fuzzing").
#
#   scripts/fuzz.sh TARGET MINUTES [BUILD_DIR]   one target (or `all`, each in
#                                                turn) for MINUTES (decimals ok)
#   scripts/fuzz.sh --ci [BUILD_DIR]              every target for
#                                                KOLO_FUZZ_SECONDS (45) each,
#                                                from the seeds alone (work dir
#                                                BUILD_DIR/fuzz-ci, emptied first),
#                                                KOLO_FUZZ_JOBS (2) at a time
#   scripts/fuzz.sh --list                        the targets
#
# TARGET is a name from fuzz/ (frame_decoder, ..., or frame_decoder_fuzz).
# Builds BUILD_DIR (default build-fuzz: clang, -DKOLO_FUZZ=ON, ASan+UBSan,
# no tests, no CUDA) if needed, then fuzzes a working copy of the checked-in
# seed corpus fuzz/corpus/TARGET: new inputs go to
# $KOLO_FUZZ_WORK (default BUILD_DIR/fuzz-work)/TARGET/corpus, and into
# fuzz/corpus/TARGET only with --merge (minimised with -merge=1).
# Exits non-zero when a target crashes (or leaks, or hits UB, or times out on
# one input), with the crash input's path in its output (crash-*, leak-*,
# timeout-* under the work dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

merge=0
args=()
for a in "$@"; do
  case "$a" in
    --merge) merge=1 ;;
    *) args+=("$a") ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"

targets() { ls fuzz/*_fuzz.cc | sed 's|fuzz/\(.*\)_fuzz.cc|\1|'; }

# -max_len per target: the size of a sensible message, with room to grow.
max_len() {
  case "$1" in
    frame_decoder) echo 4096 ;;
    data_handshake) echo 1024 ;;
    sealed_channel) echo 4096 ;;
    link_handshake) echo 4096 ;;
    coordinator_core) echo 8192 ;;
    plan_applier) echo 4096 ;;
    worker_config | kolorun_args) echo 2048 ;;
    *) echo 4096 ;;
  esac
}

build() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    bash scripts/install-deps.sh --test
    cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKOLO_FUZZ=ON -DKOLO_SANITIZE=address,undefined \
      -DKOLO_BUILD_TESTS=OFF -DKOLO_WITH_CUDA=OFF >/dev/null
  fi
  cmake --build "$dir" -j "$(nproc)" --target "$@"
}

# run_one NAME SECONDS BUILD_DIR: fuzzes; prints a one-line summary; returns
# libFuzzer's status.
run_one() {
  local name=${1%_fuzz} secs=$2 dir=$3
  local work=${KOLO_FUZZ_WORK:-$dir/fuzz-work}/$name
  local seeds=fuzz/corpus/$name
  mkdir -p "$work/corpus" "$work/artifacts"
  [ -d "$seeds" ] && cp -n "$seeds"/* "$work/corpus/" 2>/dev/null || true
  local log=$work/fuzz.log
  local rc=0
  # detect_leaks: a leak found on an input is a finding like a crash.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$dir/bin/${name}_fuzz" "$work/corpus" -max_total_time="$secs" \
    -max_len="$(max_len "$name")" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    >"$log" 2>&1 || rc=$?
  local last
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz $name: ${secs}s, ${execs:-?} execs, last: ${last:-none}, rc=$rc"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz $name: FAILED; log $log; last lines:"
    tail -40 "$log"
    grep -h 'Test unit written to' "$log" || true
  elif [ "$merge" = 1 ]; then
    "$dir/bin/${name}_fuzz" -merge=1 -max_len="$(max_len "$name")" \
      "$seeds" "$work/corpus" >/dev/null 2>&1
    echo "fuzz $name: merged new inputs into $seeds"
  fi
  return "$rc"
}

if [ "${1:-}" = "--list" ]; then
  targets
  exit 0
fi

if [ "${1:-}" = "--ci" ]; then
  dir=${2:-build-fuzz}
  secs=${KOLO_FUZZ_SECONDS:-45}
  jobs=${KOLO_FUZZ_JOBS:-2}
  mapfile -t all < <(targets)
  build "$dir" "${all[@]/%/_fuzz}"
  # Every CI run starts from the checked-in seeds alone (reproducible).
  export KOLO_FUZZ_WORK=$dir/fuzz-ci
  rm -rf "$KOLO_FUZZ_WORK"
  mkdir -p "$KOLO_FUZZ_WORK"
  # Each target's summary; failures listed at the end.
  failed=()
  for name in "${all[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    (
      rc=0
      run_one "$name" "$secs" "$dir" >"$KOLO_FUZZ_WORK/$name.summary" 2>&1 ||
        rc=$?
      echo "$rc" >"$KOLO_FUZZ_WORK/$name.rc"
    ) &
  done
  wait
  for name in "${all[@]}"; do
    cat "$KOLO_FUZZ_WORK/$name.summary"
    [ "$(cat "$KOLO_FUZZ_WORK/$name.rc")" = 0 ] || failed+=("$name")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}"
    exit 1
  fi
  echo "fuzz: every target ran ${secs}s without a finding"
  exit 0
fi

if [ $# -lt 2 ]; then
  sed -n '2,20p' "$0"
  exit 2
fi
target=$1
minutes=$2
dir=${3:-build-fuzz}
secs=$(awk -v m="$minutes" 'BEGIN { s = int(m * 60); print (s < 1 ? 1 : s) }')
if [ "$target" = all ]; then
  mapfile -t names < <(targets)
else
  names=("${target%_fuzz}")
  [ -f "fuzz/${names[0]}_fuzz.cc" ] || { echo "no target $target; see --list"; exit 2; }
fi
build "$dir" "${names[@]/%/_fuzz}"
status=0
for name in "${names[@]}"; do
  run_one "$name" "$secs" "$dir" || status=1
done
exit "$status"
