#!/usr/bin/env bash
# mpirun_test.sh BIN_DIR: kolo jobs started by Open MPI's mpirun, no kolorun.
# Rank 0 hosts the coordinator at KOLO_COORDINATOR; mpirun -x passes it and
# KOLO_SECRET_FILE to every worker; the ranks come from OMPI_COMM_WORLD_*.
# The workers never call MPI: mpirun only starts them. Exact COLL_OK and TOPO
# lines for all 4 ranks; the same start of a kolo.torch worker
# (tests/launchers/torch_allreduce.py, when the build has the Python package);
# and mpirun -np 1 with no kolo variables runs the
# worker alone. Exits 77 (skipped) when mpirun is missing.
set -euo pipefail

bin=$(cd "${1:?usage: mpirun_test.sh BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/launchers/lib.sh
. "$here/lib.sh"
command -v mpirun > /dev/null || skip "mpirun is not installed (Debian: openmpi-bin)"
command -v python3 > /dev/null || skip "python3 (to pick a free port) is not installed"
for b in kolo-mp-worker kolo-hello; do
  [ -x "$bin/$b" ] || fail "$bin/$b is not built"
done
mpirun --version 2>&1 | grep -q 'Open MPI' || skip "mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -n 1)"

tmp=$(mktemp -d /tmp/kolo-mpirun-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
write_secret "$tmp/secret"


# Root needs --allow-run-as-root; --oversubscribe: 4 ranks on fewer cores.
mpi=(mpirun --oversubscribe --mca btl "self,vader")
[ "$(id -u)" -ne 0 ] || mpi+=(--allow-run-as-root)

run() { # run MODE: one job, its stdout
  local coordinator
  coordinator="127.0.0.1:$(free_port)"
  echo "+ ${mpi[*]} -np 4 -x KOLO_COORDINATOR=$coordinator -x KOLO_SECRET_FILE=$tmp/secret kolo-mp-worker $1" >&2
  timeout -k 5 60 "${mpi[@]}" -np 4 -x KOLO_COORDINATOR="$coordinator" -x KOLO_SECRET_FILE="$tmp/secret" \
    "$bin/kolo-mp-worker" "$1" || fail "mpirun $1: status $?"
}

out=$(run collectives)
echo "$out"
expect "mpirun -np 4: every rank's collectives exact" \
  "$(printf 'COLL_OK rank=%d size=4\n' 0 1 2 3)" "$(grep '^COLL_OK' <<< "$out" | sort)"

out=$(run topology)
echo "$out"
host=$(hostname)
topo=""
for r in 0 1 2 3; do
  topo+="TOPO rank=$r size=4 local_rank=$r local_size=4 cross_rank=0 cross_size=1 worker=rank$r@$host"$'\n'
done
expect "mpirun -np 4: ranks from OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK" \
  "${topo%$'\n'}" "$(grep '^TOPO' <<< "$out" | sed 's/ host=.*//' | sort)"
echo "+ ${mpi[*]} -np 1 kolo-hello  (no kolo variables)"
out=$(timeout -k 5 60 "${mpi[@]}" -np 1 "$bin/kolo-hello") || fail "mpirun -np 1 kolo-hello: status $?"
echo "$out"
grep -q "^hello from rank 0 of 1: local_rank 0 of 1, cross_rank 0 of 1, worker rank0@$host, .*agreed value [0-9]* (the smallest of 1 proposals)$" <<< "$out" ||
  fail "mpirun -np 1: kolo-hello did not run alone"
echo "ok: mpirun -np 1: one worker, no coordinator address or secret needed"
# ---- 3. kolo.torch (hvd.init()) under mpirun -np 4, when kolo.torch imports (the
# build has the Python package, the interpreter torch, not a sanitizer build).
py=${KOLO_PYTHON:-/usr/bin/python3}
pydir=$(dirname "$bin")/python
if PYTHONPATH="$pydir" "$py" -c 'import kolo.torch' > /dev/null 2>&1; then
  coordinator="127.0.0.1:$(free_port)"
  echo "+ PYTHONPATH=$pydir ${mpi[*]} -np 4 -x PYTHONPATH -x KOLO_COORDINATOR=$coordinator -x KOLO_SECRET_FILE=$tmp/secret $py tests/launchers/torch_allreduce.py"
  out=$(PYTHONPATH="$pydir" timeout -k 5 60 "${mpi[@]}" -np 4 -x PYTHONPATH -x KOLO_COORDINATOR="$coordinator" \
    -x KOLO_SECRET_FILE="$tmp/secret" "$py" "$here/torch_allreduce.py") || fail "mpirun python: status $?"
  echo "$out"
  expect "mpirun -np 4: kolo.torch allreduce exact on every rank" \
    "$(for r in 0 1 2 3; do echo "PY rank=$r size=4 local_rank=$r sum=10"; done)" \
    "$(grep '^PY ' <<< "$out" | sort)"
else
  echo "note: no kolo.torch part ($py cannot import kolo.torch from $pydir)"
fi
echo "PASSED"
