#!/usr/bin/env bash
# Install test (issue 32 point 6): kolo's Debian packages.
#   1. scripts/package.sh builds kolo_<v>_<arch>.deb and kolo-dev_<v>_<arch>.deb
#      (in BUILD_DIR); their file lists are checked against what each must
#      and must not carry; lintian runs on both and must report no error;
#   2. apt-get installs both (nothing of kolo may be installed before);
#      then, with no PYTHONPATH and the installed programs only:
#      `kolorun -np 2 /usr/bin/python3 script.py` sums torch tensors exactly,
#      and examples/consumer builds with find_package(kolo) and pkg-config
#      against /usr and runs under kolorun with exact sums;
#   3. dpkg -r removes both, and nothing they installed is left (the Python
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
for p in kolo kolo-dev; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed'; then
    fail "package $p is installed already; remove it first (dpkg -r $p)"
  fi
done
tmp=$(mktemp -d /tmp/kolo-deb-test.XXXXXX)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg -r kolo-dev kolo >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

step "scripts/package.sh $build"
mapfile -t debs < <(bash "$root/scripts/package.sh" "$build")
arch=$(dpkg --print-architecture)
run_deb=$build/kolo_${version}_${arch}.deb
dev_deb=$build/kolo-dev_${version}_${arch}.deb
for d in "$run_deb" "$dev_deb"; do
  [ -f "$d" ] || fail "no $d (package.sh gave: ${debs[*]})"
  echo "  $(basename "$d"): $(stat -c %s "$d") bytes"
done

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
echo "  kolo: $(grep -vc '/$' "$tmp/run.list") files, kolo-dev: $(grep -vc '/$' "$tmp/dev.list") files"
dpkg-deb -f "$run_deb" Depends | sed 's/^/  kolo Depends: /'

step "lintian"
command -v lintian >/dev/null || fail "lintian is not installed (apt-get install -y lintian)"
lintian_out=$(lintian --tag-display-limit 0 "$run_deb" "$dev_deb" 2>&1 || true)
echo "$lintian_out" | sed 's/^/  /'
if echo "$lintian_out" | grep -q '^E: '; then fail "lintian reports errors"; fi

step "apt-get install ./kolo_*.deb ./kolo-dev_*.deb"
kolo_paths() { find /usr /etc -xdev -ipath '*kolo*' 2>/dev/null | sort; }
kolo_paths > "$tmp/before.kolo"
find /usr -xdev -type d 2>/dev/null | sort > "$tmp/before.dirs"
(cd "$build" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "./$(basename "$run_deb")" "./$(basename "$dev_deb")" >/dev/null)
installed=1
dpkg -L kolo kolo-dev | sort -u > "$tmp/owned.list"

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

step "dpkg -r kolo-dev kolo"
dpkg -r kolo-dev kolo >/dev/null
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
