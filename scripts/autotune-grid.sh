#!/usr/bin/env bash
# Autotune against an exhaustive grid of the knobs it tunes (issue 36):
# kolo-bench --mode step over every setting, and kolorun --autotune, the
# two alternated, then the grid's best and autotune side by side again;
# prints the tables and the ratio. See scripts/autotune-grid.py.
# Usage: scripts/autotune-grid.sh [--preset small161|resnet50] [--np N]
#                                 [--rounds R] [--confirm C] [--steps S]
#                                 [--json FILE]
# (KOLO_BIN_DIR: default build/bin)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export KOLO_BIN_DIR=${KOLO_BIN_DIR:-$root/build/bin}
exec /usr/bin/python3 "$root/scripts/autotune-grid.py" "$@"
