#!/usr/bin/env bash
# Builds kolo's Debian packages (kolo, kolo-dev) with CPack.
# Usage: scripts/package.sh [BUILD_DIR (default: build-pkg)]
# The build is configured for /usr (the Python package in
# /usr/lib/python3/dist-packages, for Debian's /usr/bin/python3), without
# CUDA (the packages must install on machines without /usr/local/cuda), with
# the test command's compile flags (so ccache serves what it built), and
# without tests or examples. Prints the packages' paths.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-pkg}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${KOLO_BUILD_TYPE:-RelWithDebInfo}" \
  -DKOLO_WERROR=ON -DKOLO_UNITY_BUILD=ON -DCMAKE_INSTALL_PREFIX=/usr -DKOLO_WITH_CUDA=OFF \
  -DKOLO_BUILD_TESTS=OFF -DKOLO_BUILD_EXAMPLES=OFF -DKOLO_BUILD_BENCH=ON \
  -DKOLO_WITH_PYTHON=ON -DKOLO_PYTHON_INSTALL_DIR=lib/python3/dist-packages >/dev/null
cmake --build "$build" -j "$(nproc)"
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/kolo*_"$(sed -n 's/^project(kolo VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"_*.deb
