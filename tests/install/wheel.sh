#!/usr/bin/env bash
# tests/install/wheel.sh [BUILD_DIR]: the kolo-collectives wheel end to end
# (issue 32 point 2). Builds the wheel with pip (offline, no build
# isolation; BUILD_DIR, a configured kolo build, is reused through
# KOLO_CMAKE_BUILD_DIR, else setup.py configures and builds CMake itself),
# installs it into a fresh --system-site-packages venv, checks
# kolo.__version__ against CMakeLists.txt, runs a 2-rank torch allreduce
# with the venv's kolorun (no PYTHONPATH) checked exactly on every rank,
# and, where the build has the torch.distributed backend, a 2-rank
# dist.all_reduce on it from the wheel; uninstalls it and checks that
# nothing of it is left in the venv.
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

# ---- The torch.distributed backend, where the build has it ----------------
# kolo._kolo_c10d goes into the wheel when the build made it (libtorch-dev
# installed); it links the system's libtorch, so it is checked here, with
# the venv's kolorun, the way a user of the wheel would start it.
c10d_built=$(cd "$tmp" && python -c \
  'from kolo._version import c10d_torch_version as v; print(v or "")')
if [ -n "$c10d_built" ]; then
  python -m zipfile -l "$wheel" >"$tmp/wheel.list"
  grep -q 'kolo/_kolo_c10d\.cpython-' "$tmp/wheel.list" \
    || fail "the build has the torch.distributed backend (torch $c10d_built), the wheel lacks kolo/_kolo_c10d"
  cat >"$tmp/c10d.py" <<'EOF'
import sys
import torch
import torch.distributed as dist
import kolo.torch.distributed as kdist

dist.init_process_group('kolo')
r, n = dist.get_rank(), dist.get_world_size()
if not kdist._kolo_c10d.__file__.startswith(sys.prefix + '/'):
    sys.exit(f'rank {r}: the backend from {kdist._kolo_c10d.__file__}')
t = torch.arange(5, dtype=torch.int64) * (r + 1)
dist.all_reduce(t)
if not torch.equal(t, torch.arange(5) * (n * (n + 1) // 2)):
    sys.exit(f'rank {r}: c10d sum is {t.tolist()}')
print(f'rank {r} of {n}: dist.all_reduce ok')
dist.destroy_process_group()
EOF
  (cd "$tmp" && timeout 300 kolorun -np 2 --start-timeout 120 \
     "$venv/bin/python" c10d.py) || fail "kolorun -np 2 c10d.py failed"
else
  echo "the build has no torch.distributed backend (no libtorch-dev): not checked"
fi

# ---- Uninstall: nothing may remain ------------------------------------------
"$venv/bin/python" -m pip uninstall -q -y kolo-collectives
left=$(find "$venv" \( -name 'kolo*' -o -name 'kolo_collectives*' \) -print)
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "PASS: uninstalled, nothing of kolo-collectives left in the venv"
