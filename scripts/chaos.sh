#!/usr/bin/env bash
# The chaos run: kolo-elastic-train under kolorun with random faults of
# every kind for MINUTES (default 2), deterministic from SEED (default 1);
# prints a table (faults by kind, recoveries and their times, goodput,
# hangs, wrong results, orphans) and fails on any hang, wrong result, orphan
# or failed job. See scripts/chaos.py.
# Usage: scripts/chaos.sh [MINUTES] [SEED] [--round-seconds S] [--rate R] [--no-goodput]
#        scripts/chaos.sh --faults N [SEED]     (rounds until N faults fired)
#        scripts/chaos.sh --replay ROUND_SEED [--round-seconds S] [--rate R]
#                                               (one round again)
# (KOLO_BIN_DIR: default build/bin)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export KOLO_BIN_DIR=${KOLO_BIN_DIR:-$root/build/bin}
exec /usr/bin/python3 "$root/scripts/chaos.py" "$@"
