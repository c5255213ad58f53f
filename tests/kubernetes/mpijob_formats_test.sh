#!/usr/bin/env bash
# kolorun with the files the Kubeflow MPI Operator (v2beta1) mounts in an
# MPIJob's launcher (deploy/kubernetes/mpijob.yaml): /etc/mpi/hostfile, lines
# `<job>-worker-<i>.<job>-worker.<namespace>.svc slots=N`, and
# /etc/mpi/discover_hosts.sh, a script that echoes one such host a line
# (with or without `:N`). The operator's hosts are reached here by a fake
# --ssh-cmd that records the host and runs the command locally; the check is
# that every worker starts on the host the file names and the job ends with
# one fingerprint.
# Usage: mpijob_formats_test.sh BIN_DIR
# Single process at a time; its files live in a temporary directory removed
# on exit.
set -euo pipefail
bin=${1:-${KOLO_BIN_DIR:-build/bin}}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
h0=kolo-mpijob-worker-0.kolo-mpijob-worker.default.svc
h1=kolo-mpijob-worker-1.kolo-mpijob-worker.default.svc
printf '%s slots=1\n%s slots=1\n' "$h0" "$h1" >"$dir/hostfile"
printf '#!/bin/sh\necho %s\necho %s:1\n' "$h0" "$h1" >"$dir/discover_hosts.sh"
chmod +x "$dir/discover_hosts.sh"
cat >"$dir/ssh" <<SSH
#!/bin/sh
host=\$1; shift
echo "\$host" >>"$dir/hosts.log"
exec sh -c "\$*"
SSH
chmod +x "$dir/ssh"

check() { # NAME KOLORUN-ARGS...
  local name=$1
  shift
  : >"$dir/hosts.log"
  local out
  out=$(timeout 120 "$bin/kolorun" -np 2 "$@" --ssh-cmd "$dir/ssh" \
    "$bin/kolo-elastic-train" --steps 20 2>&1) || {
    echo "FAIL $name: kolorun failed"$'\n'"$out"
    exit 1
  }
  local want got fps
  want=$(printf '%s\n%s\n' "$h0" "$h1")
  got=$(sort "$dir/hosts.log")
  fps=$(grep -o 'EL_FINAL .*fingerprint=[0-9a-f]*' <<<"$out" | sed 's/.*=//' | sort -u)
  if [[ "$got" != "$want" || $(wc -l <<<"$fps") -ne 1 || -z "$fps" ]]; then
    echo "FAIL $name: hosts [$got], fingerprints [$fps]"$'\n'"$out"
    exit 1
  fi
  echo "PASS $name: workers on $h0 and $h1, fingerprint $fps"
}

check hostfile --hostfile "$dir/hostfile"
check discover_hosts.sh --min-np 1 --max-np 2 \
  --host-discovery-script "$dir/discover_hosts.sh"
