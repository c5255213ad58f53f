#!/usr/bin/env bash
# The test command: installs what is missing (tests included), builds, runs the
# whole suite.
# Usage: scripts/test.sh [BUILD_DIR (default: build)] [extra cmake -D args...]
#
# -DKOLO_BUILD_TESTS=ON is explicit: scripts/demo.sh configures the same
# build/ with tests off (and the same compile flags, the unity build of the
# components included, so nothing it built is rebuilt here), and the cache
# would keep that.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
bash "$root/scripts/build.sh" --deps test "$build" -DKOLO_WERROR=ON -DKOLO_UNITY_BUILD=ON -DKOLO_BUILD_TESTS=ON "$@"
ctest --test-dir "$root/$build" --output-on-failure -j "$(nproc)"
