#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kolo.
# Usage: scripts/build.sh [BUILD_DIR (default: build)] [extra cmake -D args...]
# Environment: CC/CXX pick the compiler (default: the system's c++).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/$build" -G Ninja -DCMAKE_BUILD_TYPE=${KOLO_BUILD_TYPE:-RelWithDebInfo} "$@"
cmake --build "$root/$build" -j "$(nproc)"
