#!/bin/sh
# Wrapper for tests/multiprocess_sshd_test.cc: prints what a worker started
# by kolorun sees, then runs the real worker.
#   env_report.sh DIR COMMAND [ARGS...]
# Prints one ENV line (the job secret's length only, never the secret),
# leaves the secret in DIR/secret.<rank> (mode 600) for the test's search of
# every command line, waits (at most 30 s) until the test has made
# DIR/scanned, then execs COMMAND.
set -u
dir=$1
shift
printf 'ENV rank=%s host=%s pythonpath=[%s] foo=[%s] bar=[%s] cuda=[%s] secret_len=%s ssh=[%s]\n' \
  "${KOLO_RANK-unset}" "${KOLO_HOSTNAME-unset}" "${PYTHONPATH-unset}" \
  "${FOO-unset}" "${BAR-unset}" "${CUDA_VISIBLE_DEVICES-unset}" \
  "${#KOLO_SECRET}" "${SSH_CONNECTION-unset}"
umask 077
printf '%s' "${KOLO_SECRET-}" > "$dir/secret.${KOLO_RANK-x}"
i=0
while [ ! -e "$dir/scanned" ] && [ "$i" -lt 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
exec "$@"
