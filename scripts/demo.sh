#!/usr/bin/env bash
# The demo: installs what is missing, builds, and runs 4 workers through kolorun.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/build.sh" build
exec "$root/build/bin/kolorun" -np 4 "$root/build/bin/kolo-hello"
