#!/usr/bin/env bash
# Installs what kolo needs from Debian's packages. Idempotent: does nothing
# (no apt-get update) when every package is already installed.
# Usage: scripts/install-deps.sh          what building and running need
#                                         (the library, kolorun, the examples)
#        scripts/install-deps.sh --test   that, and what the tests and CI need
set -euo pipefail

# Building and running: configure with -DKOLO_BUILD_TESTS=OFF, build, run
# kolorun and the examples.
BUILD_PKGS=(
  build-essential cmake ninja-build
  # gRPC's CMake config finds re2 through pkg-config.
  pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libssl-dev
  libcli11-dev nlohmann-json3-dev
  # The coordinator's /metrics page (--metrics-port): Debian's cpp-httplib,
  # a compiled library (libcpp-httplib.so) with its pkg-config file.
  libcpp-httplib-dev
  # kolorun --config-file (horovodrun's YAML config).
  libyaml-cpp-dev
  # The coordinator's autotuner (kolorun --autotune): dlib's global optimizer.
  libdlib-dev
  # Optional to CMake, but the compiler launcher of build/ when installed: the
  # demo and the test command share build/, and a launcher that appeared
  # between them (installed by --test) would rebuild every object.
  ccache
)

# The tests and CI (scripts/test.sh, .ci/run): GoogleTest; clang and its
# runtimes for the thread-safety, sanitizer and fuzz builds; clang-format for
# the format check; ip for the network-namespace tests (kolorun --fault's link
# faults).
TEST_PKGS=(
  libgtest-dev libgmock-dev
  clang clang-format libclang-rt-dev
  iproute2 procps
  # tests/kubernetes/ reads the manifests.
  python3-yaml
  # kolo-bench --plot draws its PNG/SVG with gnuplot (no X needed).
  gnuplot-nox
  # The Python package (python/, KOLO_WITH_PYTHON) for Debian's /usr/bin/python3
  # and its tests: kolo.torch on Debian's CPU torch; cloudpickle for
  # broadcast_object.
  python3-dev pybind11-dev python3-torch python3-numpy python3-pytest
  python3-cloudpickle
  # The torch.distributed backend "kolo" (python/c10d/, built only when CMake
  # finds Torch): torch 1.13's C++ headers, c10d's among them, and
  # TorchConfig.cmake (in /usr/lib/x86_64-linux-gnu/cmake/Torch).
  libtorch-dev
  # The install tests (tests/install/): the wheel in a venv, the Debian
  # packages checked with lintian.
  python3-venv python3-setuptools python3-wheel lintian
  # The documentation site (scripts/docs.sh): Doxygen's XML of the public
  # headers, Sphinx with MyST Markdown, Breathe and the furo theme.
  doxygen python3-sphinx python3-myst-parser python3-breathe furo
  # Real starts by other launchers (tests/launchers/): a private Slurm
  # cluster (slurmctld, slurmd, srun/sbatch) with its own munged, and Open
  # MPI's mpirun.
  slurm-wlm munge openmpi-bin
  # kolorun's ssh starts against a real sshd in network namespaces.
  openssh-server openssh-client
  # promtool (Debian's prometheus package) checks the /metrics page in
  # tests/multiprocess_metrics_test.cc.
  prometheus
)

PKGS=("${BUILD_PKGS[@]}")
case "${1:-}" in
  "") ;;
  --test) PKGS+=("${TEST_PKGS[@]}") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

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
