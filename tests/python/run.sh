#!/usr/bin/env bash
# Runs kolo's Python tests: run.sh NP FILE... (files in tests/python/).
# NP=1: plain pytest in this process; NP>1: one kolorun -np NP job whose
# every rank runs pytest over the files (ranks run the same tests in the same
# order; a failure on one rank ends the job, see conftest.py). The start
# timeout is 120 s: importing torch and pytest takes seconds per rank, more
# on a loaded 2-core machine.
# Environment (set by ctest): KOLO_PYTHON (default /usr/bin/python3),
# KOLO_BIN_DIR (kolorun's folder), PYTHONPATH (build/python). The ranks of an
# NP>1 job get KOLO_TEST_METRICS_PORT, where its coordinator serves metrics.
# Exit 77 (ctest: skipped) when the interpreter has no torch or pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${KOLO_PYTHON:-/usr/bin/python3}
np=$1
shift
if ! "$py" -c 'import torch, pytest' 2>/dev/null; then
  echo "SKIP: $py cannot import torch and pytest" \
       "(apt-get install -y python3-torch python3-pytest)"
  exit 77
fi
files=()
for f in "$@"; do files+=("$here/$f"); done
args=(-m pytest -q -x -p no:cacheprovider -p no:hypothesispytest --rootdir "$here"
      "${files[@]}")
if [ "$np" = 1 ]; then
  exec "$py" "${args[@]}"
fi
# The coordinator's metrics page, for tests that read its counters
# (KOLO_TEST_METRICS_PORT; the job secret is not theirs to read).
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export KOLO_TEST_METRICS_PORT=$port
exec "${KOLO_BIN_DIR:?set KOLO_BIN_DIR to kolorun\'s folder}/kolorun" \
  -np "$np" --start-timeout 120 --metrics-port "$port" "$py" "${args[@]}"
