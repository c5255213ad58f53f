#!/usr/bin/env bash
# Goodput under churn (issue 38): kolo-elastic-train or
# examples/torch_elastic_train.py under kolorun -np 4, faulted and unfaulted
# runs alternated; prints the goodput table. See scripts/goodput.py.
# Usage: scripts/goodput.sh [--scenario kill30|mix12] [--example cpp|torch]
#                           [--minutes M] [--pairs P] [--seed S]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export KOLO_BIN_DIR=${KOLO_BIN_DIR:-$root/build/bin}
exec /usr/bin/python3 "$root/scripts/goodput.py" "$@"
