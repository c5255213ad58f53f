# shellcheck shell=bash
# What the launcher tests (tests/launchers/*_test.sh) share: how they skip
# and fail (CTest reads exit status 77 as skipped), a free TCP port, a job
# secret, and the comparison of a job's output with what is expected.
# Sourced, not run.

skip() {
  echo "SKIPPED: $*"
  exit 77
}

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# A TCP port the kernel had free just now (another process may take it before
# the test binds it: a small race, accepted).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# write_secret FILE: a fresh job secret, 64 hex digits, readable by its owner
# only.
write_secret() {
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$1")
}

# expect NAME EXPECTED ACTUAL: fails the test, showing both, unless equal.
expect() {
  if [ "$2" != "$3" ]; then
    printf -- '---- expected\n%s\n---- got\n%s\n' "$2" "$3"
    fail "$1"
  fi
  echo "ok: $1"
}
