#!/usr/bin/env bash
# The memory-bandwidth limit of an allreduce on this machine
# (bench/memory/memory_limit.c says why): compiles the probe and runs it for
# SIZE bytes on THREADS threads (one per rank, pinned one per core).
# Usage: scripts/memory-limit.sh [SIZE_BYTES=67108864] [THREADS=2] [ROUNDS=21]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d /tmp/kolo-memlimit.XXXXXX)
trap 'rm -rf "$out"' EXIT
gcc -O2 -march=native -pthread -o "$out/memory_limit" \
  "$root/bench/memory/memory_limit.c"
"$out/memory_limit" "${1:-67108864}" "${2:-2}" "${3:-21}"
