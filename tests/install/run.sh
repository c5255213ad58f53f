#!/usr/bin/env bash
# The install tests (issue 32 point 6), as CI runs them, on one packaging
# build (scripts/package.sh: /usr prefix, no CUDA, the test command's flags,
# so ccache serves what the test build compiled):
#   deb.sh       the Debian packages: build, file lists, lintian, install,
#                use, remove (needs root)
#   consumer.sh  cmake --install into a temporary prefix; find_package,
#                pkg-config and add_subdirectory consumers
# (wheel.sh, the pip wheel, is a ctest of the test build: python_wheel_test.)
# Usage: tests/install/run.sh [BUILD_DIR (default: build-pkg)]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build-pkg}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
start=$(date +%s)
for t in deb consumer; do
  echo "=== [$(( $(date +%s) - start ))s] tests/install/$t.sh"
  bash "$here/$t.sh" "$build"
done
echo "=== install tests passed in $(( $(date +%s) - start ))s"
