#!/usr/bin/env bash
# slurm_test.sh BIN_DIR SOURCE_DIR: kolo jobs started by a real Slurm. Starts a
# private cluster on this machine (its own munged, slurmctld and slurmd, on
# free ports, everything in a temporary directory) and stops it after, then:
#   1. srun -n 4 kolo-mp-worker, no kolorun: rank 0 hosts the coordinator at
#      KOLO_COORDINATOR, every worker reads KOLO_SECRET_FILE; the ranks come
#      from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID. Exact COLL_OK and TOPO
#      lines for all 4 ranks.
#   1a. srun -n 4 python3 tests/launchers/torch_allreduce.py: hvd.init() and
#      an exact allreduce on every rank (when the build has kolo.torch).
#   1b. srun -n 1 kolo-hello and sbatch -n 1 --wrap kolo-hello, no kolo
#      variables: the one worker runs alone.
#   2. sbatch --wait examples/slurm/train.sbatch kolo-mp-worker collectives:
#      exact lines in the job's output file.
#   3. sbatch --wait examples/slurm/elastic.sbatch: kolorun --min-np 1 with
#      examples/slurm/discover_hosts.sh inside the allocation, every worker a
#      job step; kolo-elastic-train ends with 4 identical EL_FINAL lines.
#   4. the same with one worker's step killed (scancel --signal=KILL): kolorun
#      replaces it with a new step; the job ends with 4 workers and the
#      parameters of run 3, bit for bit.
# First, discover_hosts.sh against a fake scontrol and sinfo (4 nodes, one
# down). Exits 77 (skipped) when Slurm or munge is missing, without root, or when
# the daemons do not come up. Every wait has a deadline.
set -euo pipefail

bin=$(cd "${1:?usage: slurm_test.sh BIN_DIR SOURCE_DIR}" && pwd)
src=$(cd "${2:?usage: slurm_test.sh BIN_DIR SOURCE_DIR}" && pwd)
export PATH="$bin:$PATH:/usr/sbin:/sbin"
unset SLURM_CONF
# shellcheck source=tests/launchers/lib.sh
. "$(dirname "$0")/lib.sh"


# discover_hosts.sh on what one node cannot show: compressed task counts
# ("2(x3),1") over 4 nodes, one of them down (a fake scontrol and sinfo).
fake=$(mktemp -d /tmp/kolo-slurm-fake.XXXXXX)
printf '#!/bin/sh\nprintf "n1\\nn2\\nn3\\nn4\\n"\n' > "$fake/scontrol"
printf '#!/bin/sh\nprintf "n1 alloc\\nn2 down*\\nn3 mix\\nn4 alloc\\n"\n' > "$fake/sinfo"
chmod +x "$fake/scontrol" "$fake/sinfo"
hosts=$(PATH="$fake:$PATH" SLURM_JOB_NODELIST='n[1-4]' SLURM_TASKS_PER_NODE='2(x3),1' \
  sh "$src/examples/slurm/discover_hosts.sh") || fail "discover_hosts.sh: status $?"
rm -rf "$fake"
if [ "$hosts" != "$(printf 'n1:2\nn3:2\nn4:1')" ]; then
  fail "discover_hosts.sh with 2(x3),1 over n1..n4, n2 down: got '$hosts'"
fi
echo "ok: discover_hosts.sh: counts 2(x3),1 over 4 nodes, the down node left out"

for tool in munged mungekey slurmctld slurmd srun sbatch scontrol sinfo squeue scancel python3 timeout; do
  command -v "$tool" > /dev/null || skip "$tool is not installed (Debian: slurm-wlm munge)"
done
[ "$(id -u)" -eq 0 ] || skip "a private Slurm cluster needs root (slurmd runs jobs as their users)"
for b in kolo-mp-worker kolo-elastic-train kolo-hello kolorun; do
  [ -x "$bin/$b" ] || fail "$bin/$b is not built"
done

host=$(hostname -s)
tmp=$(mktemp -d /tmp/kolo-slurm-test.XXXXXX)
chmod 0711 "$tmp" # munged wants its socket's directories searchable
conf="$tmp/slurm.conf"
pids=()

# Stops what this test started: its jobs, the processes of its steps (they
# carry SLURM_CONF=$tmp/slurm.conf; the daemons do not), then the daemons,
# each by its pid.
cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ]; then
    scancel --full --quiet --user=root 2> /dev/null
    local deadline=$((SECONDS + 10))
    while [ -n "$(squeue -h -o %i 2> /dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  fi
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    if tr '\0' '\n' 2> /dev/null < "$p/environ" | grep -qxF "SLURM_CONF=$conf"; then
      kill -KILL "${p#/proc/}" 2> /dev/null
    fi
  done
  for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null; done
  for p in "${pids[@]}"; do
    local deadline=$((SECONDS + 10))
    while kill -0 "$p" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
    kill -KILL "$p" 2> /dev/null
  done
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for f in "$tmp"/*.log; do
      echo "---- $f (last lines)"
      tail -n 20 "$f"
    done
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# wait_for SECONDS WHAT COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
  echo "ready: $what"
}

# ---- munge: a key and a socket of our own.
mungekey --create --keyfile="$tmp/munge.key" > /dev/null
chmod 0600 "$tmp/munge.key"
munged --foreground --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
  --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" \
  > "$tmp/munged.out" 2>&1 &
pids+=($!)
wait_for 10 munged test -S "$tmp/munge.sock" || skip "munged did not start: $(tail -n 3 "$tmp/munged.out")"

# ---- Slurm: one node (this host) with 4 CPUs whatever the machine has
# (config_overrides), one partition.
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$conf" << EOF
ClusterName=kolotest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
# The daemons run without SLURM_CONF in their environment (they have -f), so
# that cleanup tells them from the processes of the jobs.
slurmctld -D -i -f "$conf" > "$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$conf" > "$tmp/slurmd.out" 2>&1 &
pids+=($!)
export SLURM_CONF="$conf"
node_idle() { sinfo -h -n "$host" -o %t | grep -qx idle; }
wait_for 30 "node $host idle" node_idle ||
  skip "the private Slurm cluster did not come up: $(sinfo -h -o '%t %E' 2>&1; tail -n 3 "$tmp/slurmctld.out" "$tmp/slurmd.out")"

# The job secret, readable by its owner only.
write_secret "$tmp/secret"

coll_ok=$(printf 'COLL_OK rank=%d size=4\n' 0 1 2 3)

# ---- 1. srun, rank 0 hosting the coordinator.
KOLO_COORDINATOR="$host:$(free_port)"
export KOLO_COORDINATOR KOLO_SECRET_FILE="$tmp/secret"
echo "+ KOLO_COORDINATOR=$KOLO_COORDINATOR KOLO_SECRET_FILE=$KOLO_SECRET_FILE srun -n 4 kolo-mp-worker collectives"
out=$(timeout -k 5 60 srun -n 4 --time=2 "$bin/kolo-mp-worker" collectives) || fail "srun collectives: status $?"
echo "$out"
expect "srun -n 4: every rank's collectives exact" "$coll_ok" "$(grep '^COLL_OK' <<< "$out" | sort)"

KOLO_COORDINATOR="$host:$(free_port)"
echo "+ srun -n 4 kolo-mp-worker topology"
out=$(timeout -k 5 60 srun -n 4 --time=2 "$bin/kolo-mp-worker" topology) || fail "srun topology: status $?"
echo "$out"
topo=""
for r in 0 1 2 3; do
  topo+="TOPO rank=$r size=4 local_rank=$r local_size=4 cross_rank=0 cross_size=1 worker=rank$r@$host"$'\n'
done
expect "srun -n 4: ranks from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID" \
  "${topo%$'\n'}" "$(grep '^TOPO' <<< "$out" | sed 's/ host=.*//' | sort)"
unset KOLO_COORDINATOR KOLO_SECRET_FILE

# ---- 1a. kolo.torch (hvd.init()) under srun -n 4, when kolo.torch imports (the
# build has the Python package, the interpreter torch, not a sanitizer build).
py=${KOLO_PYTHON:-/usr/bin/python3}
pydir=$(dirname "$bin")/python
if PYTHONPATH="$pydir" "$py" -c 'import kolo.torch' > /dev/null 2>&1; then
  KOLO_COORDINATOR="$host:$(free_port)"
  export KOLO_COORDINATOR KOLO_SECRET_FILE="$tmp/secret"
  echo "+ PYTHONPATH=$pydir srun -n 4 $py tests/launchers/torch_allreduce.py"
  out=$(PYTHONPATH="$pydir" timeout -k 5 60 srun -n 4 --time=2 "$py" "$src/tests/launchers/torch_allreduce.py") ||
    fail "srun python: status $?"
  unset KOLO_COORDINATOR KOLO_SECRET_FILE
  echo "$out"
  expect "srun -n 4: kolo.torch allreduce exact on every rank" \
    "$(for r in 0 1 2 3; do echo "PY rank=$r size=4 local_rank=$r sum=10"; done)" \
    "$(grep '^PY ' <<< "$out" | sort)"
else
  echo "note: no kolo.torch part ($py cannot import kolo.torch from $pydir)"
fi

# ---- 1b. one task, no kolo variables at all: the worker runs alone, as
# without a launcher (srun -n 1; a batch script running the worker itself).
hello_alone="^hello from rank 0 of 1: local_rank 0 of 1, cross_rank 0 of 1, worker rank0@$host, .*agreed value [0-9]* (the smallest of 1 proposals)$"
echo "+ srun -n 1 kolo-hello"
out=$(timeout -k 5 60 srun -n 1 --time=2 "$bin/kolo-hello") || fail "srun -n 1 kolo-hello: status $?"
echo "$out"
grep -q "$hello_alone" <<< "$out" || fail "srun -n 1: kolo-hello did not run alone"
echo "ok: srun -n 1: one worker, no coordinator address or secret needed"
echo "+ sbatch --wait -n 1 --wrap kolo-hello"
timeout -k 5 60 sbatch --wait -n 1 --time=2 --output="$tmp/alone.out" --wrap "$bin/kolo-hello" ||
  fail "sbatch --wrap kolo-hello: status $?; output: $(cat "$tmp/alone.out" 2> /dev/null)"
cat "$tmp/alone.out"
grep -q "$hello_alone" "$tmp/alone.out" || fail "sbatch -n 1: kolo-hello did not run alone"
echo "ok: sbatch -n 1, the worker in the batch script itself: one worker"

# ---- 2. sbatch with the shipped script.
echo "+ sbatch --wait examples/slurm/train.sbatch kolo-mp-worker collectives"
TRAIN_SECRET_DIR="$tmp" timeout -k 5 60 sbatch --wait --time=2 --output="$tmp/train.out" \
  "$src/examples/slurm/train.sbatch" "$bin/kolo-mp-worker" collectives ||
  fail "sbatch train.sbatch: status $?; output: $(cat "$tmp/train.out" 2> /dev/null)"
cat "$tmp/train.out"
expect "sbatch train.sbatch: every rank's collectives exact" "$coll_ok" \
  "$(grep '^COLL_OK' "$tmp/train.out" | sort)"
grep -q "^kolo-train: job [0-9]*, 4 workers, coordinator $host:[0-9]*$" "$tmp/train.out" ||
  fail "train.sbatch did not name its coordinator"
[ -z "$(find "$tmp" -name '.kolo-secret-*')" ] || fail "train.sbatch left its secret behind"

# ---- 3. elastic: kolorun inside the allocation, hosts from Slurm.
train=("$bin/kolo-elastic-train" --steps 60 --step-ms 50)
finals_of() { # the EL_FINAL lines of an output file, fingerprints cut off
  grep -o 'EL_FINAL rank=[0-9]* size=[0-9]* steps=[0-9]*' "$1" | sort
}
fingerprint_of() { # the one fingerprint every rank ended with
  local f
  f=$(grep -o 'EL_FINAL.*fingerprint=[0-9a-f]*' "$1" | sed 's/.*fingerprint=//' | sort -u)
  [ "$(wc -l <<< "$f")" -eq 1 ] || fail "$1: the ranks ended with different parameters: $f"
  echo "$f"
}
steps_of() { # the job steps slurmd launched for job $1
  grep -c "launch task StepId=$1\." "$tmp/slurmd.log" || true
}
echo "+ sbatch --wait examples/slurm/elastic.sbatch ${train[*]}"
job=$(TRAIN_SLURM_DIR="$src/examples/slurm" timeout -k 5 60 sbatch --parsable --wait --time=2 \
  --output="$tmp/elastic.out" "$src/examples/slurm/elastic.sbatch" "${train[@]}") ||
  fail "sbatch elastic.sbatch: status $?; output: $(cat "$tmp/elastic.out" 2> /dev/null)"
grep -v 'EL_STEP' "$tmp/elastic.out"
all_final=$(printf 'EL_FINAL rank=%d size=4 steps=60\n' 0 1 2 3)
expect "elastic under Slurm: 4 workers on the slots of discover_hosts.sh ran 60 steps" \
  "$all_final" "$(finals_of "$tmp/elastic.out")"
clean=$(fingerprint_of "$tmp/elastic.out")
expect "elastic under Slurm: each worker ran as a job step (srun --launcher-cmd)" 4 "$(steps_of "$job")"

# ---- 4. elastic, one worker's job step killed: kolorun replaces it with a
# new step and the job ends with the parameters of the run without faults.
echo "+ sbatch examples/slurm/elastic.sbatch ${train[*]}; scancel --signal=KILL JOB.2"
job=$(TRAIN_SLURM_DIR="$src/examples/slurm" sbatch --parsable --time=2 \
  --output="$tmp/elastic-kill.out" "$src/examples/slurm/elastic.sbatch" "${train[@]}")
formed() { grep -q '^\[0\]<stdout>:EL_CONSISTENT step=1 size=4' "$tmp/elastic-kill.out"; }
wait_for 30 "job $job formed" formed || fail "elastic job $job did not form: $(cat "$tmp/elastic-kill.out")"
scancel --signal=KILL "$job.2"
running() { [ -n "$(squeue -h -j "$job" -o %i 2> /dev/null)" ]; }
deadline=$((SECONDS + 60))
while running; do
  [ $SECONDS -lt $deadline ] || fail "elastic job $job did not end within 60 s"
  sleep 0.2
done
grep -v 'EL_STEP' "$tmp/elastic-kill.out"
grep -q 'slot .* failed; replacing it' "$tmp/elastic-kill.out" || fail "kolorun did not replace the killed worker"
expect "elastic under Slurm, a step killed: 4 workers ran 60 steps" "$all_final" "$(finals_of "$tmp/elastic-kill.out")"
expect "elastic under Slurm, a step killed: the parameters of the run without faults" \
  "$clean" "$(fingerprint_of "$tmp/elastic-kill.out")"
expect "elastic under Slurm, a step killed: the replacement ran as a fifth step" 5 "$(steps_of "$job")"
echo "PASSED"
