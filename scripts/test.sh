#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole suite.
# Usage: scripts/test.sh [BUILD_DIR (default: build)] [extra cmake -D args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
bash "$root/scripts/build.sh" "$build" -DKOLO_WERROR=ON "$@"
ctest --test-dir "$root/$build" --output-on-failure -j "$(nproc)"
