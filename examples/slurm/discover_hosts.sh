#!/bin/sh
# discover_hosts.sh: kolorun's --host-discovery-script inside a Slurm
# allocation (salloc, sbatch). Prints "host:slots", one line per node of the
# job that Slurm still reports as up; slots are the job's tasks on that node
# (SLURM_TASKS_PER_NODE, else SLURM_JOB_CPUS_PER_NODE), or SLOTS_PER_NODE
# when set. A node that goes down drops out of the answer, so an elastic job
# started with `sbatch --no-kill` goes on with the others.
#
#   kolorun --min-np 1 --host-discovery-script examples/slurm/discover_hosts.sh \
#     python3 train.py
set -eu

: "${SLURM_JOB_NODELIST:?discover_hosts.sh: not inside a Slurm allocation (no SLURM_JOB_NODELIST)}"
counts=${SLURM_TASKS_PER_NODE:-${SLURM_JOB_CPUS_PER_NODE:-}}
if [ -z "$counts" ] && [ -z "${SLOTS_PER_NODE:-}" ]; then
  echo "discover_hosts.sh: neither SLURM_TASKS_PER_NODE nor SLURM_JOB_CPUS_PER_NODE is set" >&2
  exit 1
fi

# Slurm compresses the counts: "2(x3),1" is 2, 2, 2 and 1. One count a word.
expanded=""
old_ifs=$IFS
IFS=,
for c in $counts; do
  case $c in
    *"(x"*)
      n=${c%%"("*}
      r=${c#*"(x"}
      r=${r%")"}
      i=0
      while [ "$i" -lt "$r" ]; do expanded="$expanded $n"; i=$((i + 1)); done
      ;;
    *) expanded="$expanded $c" ;;
  esac
done
IFS=$old_ifs

# The state of each node ("alloc", "mix", "down*", ...); a node missing from
# sinfo's answer, or one that does not respond (a "*" suffix), is left out.
states=$(sinfo -h -N -n "$SLURM_JOB_NODELIST" -o '%N %t' 2>/dev/null || true)

# shellcheck disable=SC2086  # one count a word, on purpose
set -- $expanded
for host in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
  slots=${SLOTS_PER_NODE:-${1:-1}}
  [ $# -gt 0 ] && shift
  if [ -n "$states" ]; then
    state=$(printf '%s\n' "$states" | awk -v h="$host" '$1 == h { print $2; exit }')
    case $state in
      *"*"* | "") continue ;;
      alloc* | mix* | comp* | drng* | idle*) ;;
      *) continue ;;
    esac
  fi
  echo "$host:$slots"
done
