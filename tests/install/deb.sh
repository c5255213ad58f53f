#!/usr/bin/env bash
# Install test (issue 32 point 6): kolo's Debian packages.
#   1. scripts/package.sh builds kolo_<v>_<arch>.deb, kolo-dev_<v>_<arch>.deb
#      and, where libtorch-dev is installed (the build then has the
#      torch.distributed backend), kolo-torch_<v>_<arch>.deb (in BUILD_DIR);
#      their file lists are checked against what each must and must not
#      carry; lintian runs on them and must report no error;
#   2. apt-get installs them (nothing of kolo may be installed before);
#      then, with no PYTHONPATH and the installed programs only:
#      `kolorun -np 2 /usr/bin/python3 script.py` sums torch tensors exactly
#      (through kolo.torch, and through dist.init_process_group("kolo") with
#      kolo-torch), and examples/consumer builds with find_package(kolo) and
#      pkg-config against /usr and runs under kolorun with exact sums;
#   3. dpkg -r removes them, and nothing they installed is left (the Python
#      package's byte-compiled files included).
# Needs root (apt-get, dpkg). Usage: tests/install/deb.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-pkg}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
version=$(sed -n 's/^project(kolo VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
fail() { echo "deb.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get install, dpkg -r)"
for p in kolo kolo-dev kolo-torch; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed'; then
    fail "package $p is installed already; remove it first (dpkg -r $p)"
  fi
done
tmp=$(mktemp -d /tmp/kolo-deb-test.XXXXXX)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg -r kolo-torch kolo-dev kolo >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

step "scripts/package.sh $build"
mapfile -t debs < <(bash "$root/scripts/package.sh" "$build")
arch=$(dpkg --print-architecture)
run_deb=$build/kolo_${version}_${arch}.deb
dev_deb=$build/kolo-dev_${version}_${arch}.deb
torch_deb=$build/kolo-torch_${version}_${arch}.deb
all_debs=("$run_deb" "$dev_deb")
# The backend is built where Torch's C++ package is (python/CMakeLists.txt).
if [ -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake ] ||
   dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q installed; then
  all_debs+=("$torch_deb")
fi
for d in "${all_debs[@]}"; do
  [ -f "$d" ] || fail "no $d (package.sh gave: ${debs[*]})"
  echo "  $(basename "$d"): $(stat -c %s "$d") bytes"
done
with_torch=0
[ ${#all_debs[@]} -eq 3 ] && with_torch=1

step "file lists"
dpkg-deb -c "$run_deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/run.list"
dpkg-deb -c "$dev_deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/dev.list"
has() { grep -qE "$2" "$tmp/$1.list" || fail "$1 package lacks $2"; }
lacks() { ! grep -qE "$2" "$tmp/$1.list" || fail "$1 package must not carry $2"; }
has run "^/usr/lib/[^/]+/libkolo\.so\.${version//./\\.}$"
has run "^/usr/bin/kolorun$"
has run "^/usr/bin/kolo-coordinator$"
has run "^/usr/bin/kolo-ctl$"
has run "^/usr/lib/python3/dist-packages/kolo/__init__\.py$"
has run "^/usr/lib/python3/dist-packages/kolo/_kolo\.cpython-[0-9]+-[^/]+\.so$"
has run "^/usr/lib/python3/dist-packages/kolo/torch/__init__\.py$"
has run "^/usr/share/doc/kolo/copyright$"
lacks run "^/usr/include/"
lacks run "__pycache__"
lacks run "^/usr/lib/[^/]+/libkolo\.so$"
has dev "^/usr/include/kolo/kolo\.h$"
has dev "^/usr/include/kolo/version\.h$"
has dev "^/usr/lib/[^/]+/libkolo\.so$"
has dev "^/usr/lib/[^/]+/cmake/kolo/koloConfig\.cmake$"
has dev "^/usr/lib/[^/]+/pkgconfig/kolo\.pc$"
has dev "^/usr/share/doc/kolo-dev/copyright$"
lacks dev "^/usr/bin/"
lacks run "_kolo_c10d"
if [ "$with_torch" = 1 ]; then
  dpkg-deb -c "$torch_deb" | awk '{print $6}' | sed 's|^\./|/|' > "$tmp/torch.list"
  has torch "^/usr/lib/python3/dist-packages/kolo/_kolo_c10d\.cpython-[0-9]+-[^/]+\.so$"
  has torch "^/usr/share/doc/kolo-torch/copyright$"
  lacks torch "^/usr/bin/"
  lacks torch "__init__\.py$"
  dpkg-deb -f "$torch_deb" Depends | sed 's/^/  kolo-torch Depends: /'
  echo "  kolo-torch: $(grep -vc '/$' "$tmp/torch.list") files"
fi
echo "  kolo: $(grep -vc '/$' "$tmp/run.list") files, kolo-dev: $(grep -vc '/$' "$tmp/dev.list") files"
dpkg-deb -f "$run_deb" Depends | sed 's/^/  kolo Depends: /'

step "lintian"
command -v lintian >/dev/null || fail "lintian is not installed (apt-get install -y lintian)"
lintian_out=$(lintian --tag-display-limit 0 "${all_debs[@]}" 2>&1 || true)
echo "$lintian_out" | sed 's/^/  /'
if echo "$lintian_out" | grep -q '^E: '; then fail "lintian reports errors"; fi

step "apt-get install ${all_debs[*]##*/}"
kolo_paths() { find /usr /etc -xdev -ipath '*kolo*' 2>/dev/null | sort; }
kolo_paths > "$tmp/before.kolo"
find /usr -xdev -type d 2>/dev/null | sort > "$tmp/before.dirs"
(cd "$build" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${all_debs[@]/#$build\//./}" >/dev/null)
installed=1
packages=(kolo kolo-dev)
[ "$with_torch" = 1 ] && packages+=(kolo-torch)
dpkg -L "${packages[@]}" | sort -u > "$tmp/owned.list"

step "kolorun -np 2 /usr/bin/python3 (no PYTHONPATH)"
cat > "$tmp/sum.py" <<'PY'
import torch
import kolo.torch as hvd
hvd.init()
r, n = hvd.rank(), hvd.size()
got = hvd.allreduce(torch.arange(8, dtype=torch.float64) + r, op=hvd.Sum)
want = torch.arange(8, dtype=torch.float64) * n + n * (n - 1) / 2
assert torch.equal(got, want), (got, want)
print(f"rank {r} of {n}: sums exact, kolo {hvd.__name__} {__import__('kolo').__version__}")
PY
out=$(cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH kolorun -np 2 /usr/bin/python3 sum.py 2>&1) \
  || { echo "$out"; fail "python job failed"; }
echo "$out" | sed 's/^/  /'
[ "$(echo "$out" | grep -c "sums exact, kolo kolo.torch $version")" -eq 2 ] || fail "not 2 ranks with exact sums"

if [ "$with_torch" = 1 ]; then
  step "kolo-torch: dist.init_process_group(\"kolo\") under kolorun -np 2"
  cat > "$tmp/c10d.py" <<'PY'
import torch
import torch.distributed as dist
import kolo
import kolo.torch.distributed
dist.init_process_group("kolo")
r, n = dist.get_rank(), dist.get_world_size()
t = torch.arange(8, dtype=torch.float64) + r
dist.all_reduce(t)
want = torch.arange(8, dtype=torch.float64) * n + n * (n - 1) / 2
assert torch.equal(t, want), (t, want)
print(f"rank {r} of {n}: c10d sums exact, from {kolo._kolo_c10d.__file__}")
dist.destroy_process_group()
PY
  out=$(cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH kolorun -np 2 /usr/bin/python3 c10d.py 2>&1) \
    || { echo "$out"; fail "torch.distributed job failed"; }
  echo "$out" | grep "c10d sums exact" | sed 's/^/  /'
  [ "$(echo "$out" | grep -c "c10d sums exact, from /usr/lib/python3/dist-packages/kolo/")" -eq 2 ] \
    || { echo "$out"; fail "not 2 ranks with exact c10d sums from the package"; }
fi

step "examples/consumer against /usr: find_package and pkg-config"
cmake -S "$root/examples/consumer" -B "$tmp/find" -G Ninja >/dev/null
cmake --build "$tmp/find" >/dev/null
# shellcheck disable=SC2046
c++ -std=c++17 -o "$tmp/pc-consumer" "$root/examples/consumer/main.cc" $(pkg-config --cflags --libs kolo)
for prog in "$tmp/find/kolo-consumer" "$tmp/pc-consumer"; do
  out=$(env -u LD_LIBRARY_PATH kolorun -np 2 "$prog" 2>&1) || { echo "$out"; fail "$prog failed"; }
  [ "$(echo "$out" | grep -c 'sums exact')" -eq 2 ] || { echo "$out"; fail "$prog: sums"; }
  echo "  $(basename "$prog"): 2 ranks, sums exact"
done

step "dpkg -r ${packages[*]}"
dpkg -r "${packages[@]}" >/dev/null
installed=0
left=()
while read -r f; do
  [ -e "$f" ] || continue
  [ -d "$f" ] && grep -qxF "$f" "$tmp/before.dirs" && continue
  left+=("$f")
done < "$tmp/owned.list"
# Paths named kolo that were not there before (byte-compiled files, say);
# only kolo's: importing torch as root may byte-compile torch's own files.
mapfile -t new < <(comm -13 "$tmp/before.kolo" <(kolo_paths))
[ ${#left[@]} -eq 0 ] || fail "left after dpkg -r: ${left[*]}"
[ ${#new[@]} -eq 0 ] || fail "new under /usr after install and removal: ${new[*]}"
echo "  nothing left"
echo "deb.sh: all passed"
