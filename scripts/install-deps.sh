#!/usr/bin/env bash
# Installs what kolo needs from Debian's packages. Idempotent: does nothing
# (no apt-get update) when every package is already installed.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config
  clang clang-format libclang-rt-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libgtest-dev libgmock-dev libssl-dev
  libcli11-dev nlohmann-json3-dev
  iproute2 procps ccache
  # kolo-bench --plot draws its PNG/SVG with gnuplot (no X needed).
  gnuplot-nox
  # The Python package (python/, KOLO_WITH_PYTHON) for Debian's /usr/bin/python3
  # and its tests: kolo.torch on Debian's CPU torch; cloudpickle for
  # broadcast_object.
  python3-dev pybind11-dev python3-torch python3-numpy python3-pytest
  python3-cloudpickle
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
