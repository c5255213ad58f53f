#!/usr/bin/env bash
# The demo: installs what building and running need, builds the library,
# kolorun and kolo-hello (nothing else), and runs 4 workers through kolorun.
#
# build/ is configured with the test command's compile flags (scripts/test.sh:
# -DKOLO_WERROR=ON, the unity build of the components, the same build type),
# tests off, so that the test command afterwards reuses every object built
# here and only builds what is new.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh" --deps build --target kolorun --target kolo-hello build \
  -DKOLO_WERROR=ON -DKOLO_UNITY_BUILD=ON -DKOLO_BUILD_TESTS=OFF -DKOLO_BUILD_EXAMPLES=ON -DKOLO_BUILD_BENCH=OFF
exec "$root/build/bin/kolorun" -np 4 "$root/build/bin/kolo-hello"
