#!/usr/bin/env bash
# Fails if any C++ file of kolo's is not clang-format clean (.clang-format: Google).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cpp')
[ ${#files[@]} -eq 0 ] && exit 0
clang-format --dry-run --Werror "${files[@]}"
echo "check-format: ${#files[@]} files clean"
