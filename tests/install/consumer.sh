#!/usr/bin/env bash
# Install test (issue 32 point 6): kolo installed with `cmake --install` into a
# temporary prefix, then used from outside its tree as a user would:
#   1. the installed files: public headers that compile alone (C++17, nothing
#      of kolo's source tree), libkolo.so with its versioned SONAME, the
#      programs (each --version says the project's version), the CMake
#      package, kolo.pc, the Python package (kolo.__version__);
#   2. examples/consumer built with find_package(kolo CONFIG REQUIRED) and
#      run under the installed kolorun (3 ranks, exact sums);
#   3. the same program built with `pkg-config --cflags --libs kolo`;
#   4. find_package(kolo 99) fails with CMake's version message;
#   5. the same program with kolo as a subproject (add_subdirectory of the
#      source tree; skipped with KOLO_INSTALL_TEST_SUBPROJECT=0).
# Usage: tests/install/consumer.sh BUILD_DIR (a configured, built kolo build,
# e.g. scripts/package.sh's build-pkg).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: consumer.sh BUILD_DIR}" && pwd)
version=$(sed -n 's/^project(kolo VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
major_minor=${version%.*}
tmp=$(mktemp -d /tmp/kolo-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "consumer.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
(cd "$prefix" && find . -type f -o -type l | sort | sed 's|^\./|  |')

step "installed files"
for h in kolo.h elastic.h types.h version.h; do
  [ -f "$prefix/include/kolo/$h" ] || fail "include/kolo/$h not installed"
  echo "#include \"kolo/$h\"" | c++ -std=c++17 -fsyntax-only -x c++ - -I"$prefix/include" \
    || fail "include/kolo/$h does not compile alone against the install"
done
libdir=$(dirname "$(find "$prefix" -name "libkolo.so.$version" | head -1)")
[ -n "$libdir" ] && [ -d "$libdir" ] || fail "libkolo.so.$version not installed"
soname=$(readelf -d "$libdir/libkolo.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libkolo.so.$major_minor" ] || fail "SONAME is '$soname', want libkolo.so.$major_minor"
[ -L "$libdir/libkolo.so" ] || fail "no libkolo.so link for the linker"
[ -f "$libdir/cmake/kolo/koloConfig.cmake" ] || fail "no koloConfig.cmake"
[ -f "$libdir/cmake/kolo/koloConfigVersion.cmake" ] || fail "no koloConfigVersion.cmake"
[ -f "$libdir/pkgconfig/kolo.pc" ] || fail "no kolo.pc"
for p in kolorun kolo-coordinator kolo-ctl kolo-bench; do
  [ -x "$prefix/bin/$p" ] || { [ "$p" = kolo-bench ] && continue; fail "bin/$p not installed"; }
  out=$("$prefix/bin/$p" --version)
  echo "  $p --version: $out"
  case "$out" in *" $version"*) ;; *) fail "$p --version says '$out', want $version" ;; esac
done
pydir=$(dirname "$(find "$prefix" -path '*-packages/kolo/__init__.py' | head -1)")
if [ -d "$pydir" ]; then
  pyver=$(env -u PYTHONPATH PYTHONPATH="$(dirname "$pydir")" /usr/bin/python3 -c 'import kolo; print(kolo.__version__)')
  echo "  kolo.__version__: $pyver"
  [ "$pyver" = "$version" ] || fail "kolo.__version__ is $pyver, want $version"
fi

run3() {  # run3 PROGRAM: 3 ranks under the installed kolorun, exact sums
  local out
  out=$(env -u PYTHONPATH "$prefix/bin/kolorun" -np 3 "$1" 2>&1) || { echo "$out"; fail "$1 failed"; }
  echo "$out" | sed 's/^/  /'
  [ "$(echo "$out" | grep -c "sums exact")" -eq 3 ] || fail "$1: not 3 ranks with exact sums"
}

step "find_package(kolo CONFIG REQUIRED)"
cmake -S "$root/examples/consumer" -B "$tmp/find" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  | grep 'kolo ' || true
cmake --build "$tmp/find" >/dev/null
run3 "$tmp/find/kolo-consumer"

step "pkg-config --cflags --libs kolo"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs kolo)
echo "  $flags"
[ "$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion kolo)" = "$version" ] \
  || fail "pkg-config --modversion kolo is not $version"
# shellcheck disable=SC2086
c++ -std=c++17 -o "$tmp/pc-consumer" "$root/examples/consumer/main.cc" $flags -Wl,-rpath,"$libdir"
run3 "$tmp/pc-consumer"

step "find_package(kolo 99) fails"
mkdir -p "$tmp/v99"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(v99 LANGUAGES CXX)\nfind_package(kolo 99 CONFIG REQUIRED)\n' \
  > "$tmp/v99/CMakeLists.txt"
if out=$(cmake -S "$tmp/v99" -B "$tmp/v99/b" -DCMAKE_PREFIX_PATH="$prefix" 2>&1); then
  fail "find_package(kolo 99) succeeded"
fi
echo "$out" | grep -A5 'Could not find a configuration file' | sed 's/^/  /' || true
echo "$out" | grep -q 'requested version "99"' || fail "find_package(kolo 99) failed without CMake's version message"
echo "$out" | grep -q "version: $version" || fail "find_package(kolo 99) failed without naming version $version"

if [ "${KOLO_INSTALL_TEST_SUBPROJECT:-1}" != 0 ]; then
  step "add_subdirectory($root)"
  # Built in BUILD_DIR/consumer-subproject: a path that is the same, relative
  # to the source tree, in every clone, so that ccache serves the next run
  # (the test build's objects do not fit: other include paths). No build
  # type (no -O2, no -g): the cheapest compile when the cache is cold.
  sub=$build/consumer-subproject
  rm -rf "$sub"
  # Quiet, but a failure shows what failed (this build is not a unity
  # build: it catches a file that misses an include).
  cmake -S "$root/examples/consumer" -B "$sub" -G Ninja -DKOLO_SOURCE_DIR="$root" \
    -DCMAKE_BUILD_TYPE= -DKOLO_WITH_CUDA=OFF -DKOLO_WITH_PYTHON=OFF >"$tmp/sub.log" 2>&1 \
    || { tail -40 "$tmp/sub.log"; fail "configuring kolo as a subproject"; }
  cmake --build "$sub" -j "$(nproc)" --target kolo-consumer >"$tmp/sub.log" 2>&1 \
    || { grep -B2 -A12 -m3 'error' "$tmp/sub.log" || tail -40 "$tmp/sub.log"; fail "building kolo as a subproject"; }
  run3 "$sub/kolo-consumer"
  rm -rf "$sub"
fi
echo "consumer.sh: all passed"
