#!/usr/bin/env bash
# tests/install/wheel.sh [BUILD_DIR]: the kolo-collectives wheel end to end
# (issue 32 point 2). Builds the wheel with pip (offline, no build
# isolation; BUILD_DIR, a configured kolo build, is reused through
# KOLO_CMAKE_BUILD_DIR, else setup.py configures and builds CMake itself),
# installs it into a fresh --system-site-packages venv, checks
# kolo.__version__ against CMakeLists.txt, runs a 2-rank torch allreduce
# with the venv's kolorun (no PYTHONPATH) checked exactly on every rank,
# uninstalls it and checks that nothing of it is left in the venv.
# setuptools' build folders and the wheel go to a temporary folder (removed
# on exit), so the source tree stays clean and runs do not race.
# Environment: KOLO_PYTHON (default /usr/bin/python3, it needs torch).
# Exit 77 (ctest: skipped) when the interpreter lacks venv, setuptools,
# wheel or torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${KOLO_PYTHON:-/usr/bin/python3}
build_dir=${1:+$(cd "$1" && pwd)}
unset PYTHONPATH  # the installed package, never a build's

if ! "$py" -c 'import ensurepip, setuptools, wheel, torch' 2>/dev/null; then
  echo "SKIP: $py lacks venv, setuptools, wheel or torch (apt-get install" \
       "-y python3-venv python3-setuptools python3-wheel python3-torch)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kolo-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- Build the wheel --------------------------------------------------------
cat >"$tmp/setuptools.cfg" <<EOF
[build]
build_base = $tmp/setuptools-build
[egg_info]
egg_base = $tmp
EOF
(cd "$root" && DIST_EXTRA_CONFIG="$tmp/setuptools.cfg" \
   KOLO_CMAKE_BUILD_DIR="$build_dir" "$py" -m pip wheel --no-build-isolation \
   --no-index --no-deps --no-cache-dir -q -w "$tmp/dist" .)
wheels=("$tmp"/dist/kolo_collectives-*.whl)
[ -f "${wheels[0]}" ] || fail "pip wheel made no kolo_collectives wheel"
wheel=${wheels[0]}
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"

# ---- Install into a fresh venv ----------------------------------------------
venv=$tmp/venv
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index --no-deps --no-cache-dir \
  "$wheel"
export PATH="$venv/bin:$PATH"
for p in kolorun kolo-ctl kolo-coordinator; do
  [ "$(command -v "$p")" = "$venv/bin/$p" ] || fail "$p is not $venv/bin/$p"
done
kolorun --version
kolo-ctl --help >/dev/null

want=$(sed -n 's/^project(kolo VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
got=$(cd "$tmp" && python -c 'import kolo; print(kolo.__version__)')
if [ -z "$want" ] || [ "$got" != "$want" ]; then
  fail "kolo.__version__ is '$got', CMakeLists.txt says '$want'"
fi
echo "kolo.__version__ = $got"

# ---- Run a job with the venv's kolorun --------------------------------------
# Rank r sends (r+1)*i + r for i < 7, in float32 and int64: the sum over n
# ranks is i*n(n+1)/2 + n(n-1)/2, exactly.
cat >"$tmp/allreduce.py" <<'EOF'
import sys
import torch
import kolo
import kolo.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
if not kolo.__file__.startswith(sys.prefix + '/') or sys.prefix == sys.base_prefix:
    sys.exit(f'rank {r}: kolo from {kolo.__file__}, not the venv {sys.prefix}')
i = torch.arange(7)
want = i * (n * (n + 1) // 2) + n * (n - 1) // 2
for dtype in (torch.float32, torch.int64):
    got = hvd.allreduce((i * (r + 1) + r).to(dtype), op=hvd.Sum,
                        name=f'x.{dtype}')
    if got.dtype != dtype or not torch.equal(got, want.to(dtype)):
        sys.exit(f'rank {r}: {dtype} sum is {got.tolist()}, want {want.tolist()}')
print(f'rank {r} of {n}: allreduce ok')
hvd.shutdown()
EOF
(cd "$tmp" && timeout 300 kolorun -np 2 --start-timeout 120 \
   "$venv/bin/python" allreduce.py) || fail "kolorun -np 2 allreduce.py failed"

# ---- Uninstall: nothing may remain ------------------------------------------
"$venv/bin/python" -m pip uninstall -q -y kolo-collectives
left=$(find "$venv" \( -name 'kolo*' -o -name 'kolo_collectives*' \) -print)
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "PASS: uninstalled, nothing of kolo-collectives left in the venv"
