#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh --prebuilt needs into DIR (default
# build-gpu, git-ignored): the CUDA tests, kolorun, kolo-coordinator and
# kolo-bench, stripped, from BUILD_DIR (default build, configured with
# CUDA), and the shared libraries they load that are not glibc/libstdc++ or
# CUDA's (a GPU machine may lack Debian's gRPC/Abseil/protobuf), and DIR/pykit
# (scripts/gpu-pykit.py: what building kolo's Python module there takes).
# For a `device` run that carries DIR (64 MiB limit: about 45 MiB).
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
out=${2:-build-gpu}
cd "$root"
targets="kolorun kolo-coordinator kolo-bench kolo-cuda-worker
  multiprocess_cuda_test worker_lib_cuda_executor_test
  worker_lib_cuda_abort_test allreduce_cuda_staging_test allreduce_nccl_test"
cmake --build "$build" -j 2 --target $targets >/dev/null
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for t in $targets; do strip -o "$out/bin/$t" "$build/bin/$t"; done
for t in $targets; do ldd "$build/bin/$t"; done | awk '$3 ~ /^\// {print $3}' |
  sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda|ld-linux' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
if cmake --build "$build" -j 2 --target kolo_python >/dev/null 2>&1; then
  /usr/bin/python3 "$root/scripts/gpu-pykit.py" "$build" "$out/pykit"
else
  echo "gpu-pack: $build has no Python module (kolo_python): no pykit"
fi
du -sh "$out"
