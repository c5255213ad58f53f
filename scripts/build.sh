#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kolo.
# Usage: scripts/build.sh [--deps build|test] [--target T]... [BUILD_DIR (default: build)]
#                         [extra cmake -D args...]
#   --deps     which packages scripts/install-deps.sh installs: build (building
#              and running; configure with -DKOLO_BUILD_TESTS=OFF) or test
#              (everything, the default)
#   --target   build only T and what it needs (repeatable; default: all)
# Environment: CC/CXX pick the compiler (default: the system's c++);
# KOLO_BUILD_TYPE the build type (default: RelWithDebInfo).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="test"
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps) deps=${2:-}; shift $(($# > 1 ? 2 : 1)) ;;
    --target) targets+=(--target "${2:?build.sh: --target needs a target}"); shift 2 ;;
    *) break ;;
  esac
done
case "$deps" in
  build) bash "$root/scripts/install-deps.sh" ;;
  test) bash "$root/scripts/install-deps.sh" --test ;;
  *) echo "build.sh: --deps build|test, not '$deps'" >&2; exit 2 ;;
esac
build=${1:-build}
shift || true
cmake -S "$root" -B "$root/$build" -G Ninja -DCMAKE_BUILD_TYPE="${KOLO_BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$root/$build" -j "$(nproc)" "${targets[@]}"
