#!/usr/bin/env bash
# Everything of kolo that needs a GPU, in one command (issue 23 point 4):
#   1. build with CUDA (-DKOLO_WITH_CUDA=ON) in a fresh build directory, the
#      targets below only — or, with --prebuilt DIR, take them from DIR/bin
#      (DIR/lib: shared libraries the machine may lack), as
#      scripts/gpu-pack.sh makes it on a machine that can build;
#   2. the CUDA tests: the fakes' unit tests, worker_lib_cuda_abort_test
#      (an epoch's abort while an NCCL allreduce is in flight, real NCCL with
#      1 rank: CUDA_ABORT_OK lines), then multiprocess_cuda_test
#      (every op over CUDA tensors with exact values: NCCL with 1 rank,
#      staging with 1 and 2 ranks on the one GPU; the device-kind errors;
#      an elastic epoch that ends during an NCCL allreduce: CUDA_ABORTED);
#   3. kolo.torch with CUDA tensors: kolo's Python module built for the
#      machine's own python3 and torch (from DIR/pykit, scripts/gpu-pykit.py,
#      with --prebuilt; from the build otherwise), then
#      tests/python/test_cuda.py under kolorun with 1, 2 and 3 ranks;
#   4. kolo-bench --device cuda, allreduce float32 sum: NCCL (1 rank),
#      staging (1 rank and 2 ranks sharing the GPU), and host tensors over
#      TCP (2 ranks) for reference; time and bus bandwidth per size.
# Prints a report on stdout (markdown-friendly); exit code != 0 when a test
# failed. Usage: scripts/gpu-check.sh [--prebuilt DIR] [--quick] [--python-only]
# Environment: GPU_CHECK_PYTHON, the interpreter with a CUDA torch (default
# python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
prebuilt=""
quick=0
python_only=0  # --python-only: section 3 alone (a rerun of kolo.torch's)
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --python-only) python_only=1; shift ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
fail=0
section() { printf '\n## %s\n\n' "$*"; }

section "Machine"
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -4
grep PRETTY_NAME /etc/os-release 2>/dev/null
echo "cores: $(nproc)"
for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
  [ -f "$h" ] && grep -h '#define NCCL_\(MAJOR\|MINOR\|PATCH\) ' "$h" | tr '\n' ' ' && echo " ($h)"
done
ls /usr/local/cuda/lib64 2>/dev/null | grep -E '^lib(nccl|cudart)\.so' | tr '\n' ' '; echo

if [ -n "$prebuilt" ]; then
  bin=$(cd "$prebuilt" && pwd)/bin
  export LD_LIBRARY_PATH="$(cd "$prebuilt" && pwd)/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  section "Binaries: prebuilt ($prebuilt, built with CUDA on the build machine)"
  missing=$(ldd "$bin/kolo-bench" | grep 'not found')
  if [ -n "$missing" ]; then echo "missing libraries: $missing"; exit 3; fi
else
  section "Build (CUDA on, fresh directory build-gpu-check)"
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
  cmake -S . -B build-gpu-check -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKOLO_WITH_CUDA=ON -DKOLO_WERROR=ON >/dev/null || exit 3
  cmake --build build-gpu-check -j "$(nproc)" --target kolorun \
    kolo-coordinator kolo-bench kolo-cuda-worker multiprocess_cuda_test \
    worker_lib_cuda_executor_test worker_lib_cuda_abort_test \
    allreduce_cuda_staging_test allreduce_nccl_test 2>&1 | tail -3 || exit 3
  bin=$root/build-gpu-check/bin
fi
export KOLO_BIN_DIR=$bin

if [ "$python_only" = 0 ]; then
section "CUDA tests"
for t in allreduce_cuda_staging_test allreduce_nccl_test \
         worker_lib_cuda_executor_test worker_lib_cuda_abort_test; do
  if out=$(timeout 180 "$bin/$t" 2>&1); then
    echo "$t: $(echo "$out" | grep -E '^\[  (PASSED|SKIPPED)' | tr '\n' ' ')"
  else
    echo "$t: FAILED"; echo "$out" | tail -30; fail=1
  fi
  echo "$out" | grep -E '^CUDA_ABORT_' | head -8
done
if out=$(timeout 400 "$bin/multiprocess_cuda_test" 2>&1); then
  echo "multiprocess_cuda_test: passed"
else
  echo "multiprocess_cuda_test: FAILED"; fail=1
fi
echo "$out" | grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|CUDA_FAIL|CUDA_SHUTDOWN|CUDA_ABORTED|CUDA_INFO rank=0|Failure' | head -40
echo "$out" | grep -E 'CUDA_ERR case=kinds' | head -3
fi

section "kolo.torch with CUDA tensors"
py=${GPU_CHECK_PYTHON:-python3}
"$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch",
  torch.__version__, "cuda", torch.version.cuda, "available",
  torch.cuda.is_available(), "nccl", torch.cuda.nccl.version())' 2>&1 | tail -2
pydest=/tmp/kolo-gpu-python
build_module() {  # kolo._kolo for $py into $pydest/kolo
  rm -rf "$pydest"; mkdir -p "$pydest"; cp -r python/kolo "$pydest/kolo"
  local inc pb suffix
  inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  pb=$("$py" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null ||
       echo /usr/include)
  [ -f "$inc/Python.h" ] || { echo "no Python.h under $inc"; return 1; }
  if [ -n "$prebuilt" ]; then
    local kit; kit=$(cd "$prebuilt/pykit" && pwd)
    local f pids=()
    for f in _kolo elastic_binding device_buffer torch_fast_path; do
      c++ $(cat "$kit/compile.args") -I include -I . -I "$kit/include" \
        -I "$inc" -I "$pb" -I/usr/local/cuda/include \
        -c "python/$f.cc" -o "$pydest/$f.o" & pids+=($!)
    done
    for f in "${pids[@]}"; do wait "$f" || return 1; done
    # NCCL as libnccl.so, else by its soname (no development link there).
    local link nccl
    link=$(sed "s#KIT#$kit#g" "$kit/link.args")
    for nccl in -lnccl -l:libnccl.so.2; do
      # shellcheck disable=SC2086
      c++ -shared -o "$pydest/kolo/_kolo$suffix" "$pydest"/*.o \
        ${link//-lnccl/$nccl} && return 0
    done
    return 1
  else
    cmake -S . -B build-gpu-check -DKOLO_PYTHON_EXECUTABLE="$(command -v "$py")" \
      >/dev/null && cmake --build build-gpu-check --target kolo_python &&
      cp build-gpu-check/python/kolo/_kolo*.so "$pydest/kolo/" || return 1
  fi
}
if ! "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "skipped: $py has no CUDA torch"
elif ! out=$(build_module 2>&1); then
  echo "building kolo._kolo for $py: FAILED"; echo "$out" | tail -30; fail=1
else
  echo "kolo._kolo built for $py"
  for np in 1 2 3; do
    # Under kolorun with 1 rank too (test_cuda.py's collectives need a job).
    # -s and info logs: kolo's line naming each process set's backend.
    if out=$(cd "$root/tests/python" && PYTHONPATH="$pydest" \
             KOLO_LOG_LEVEL=${KOLO_LOG_LEVEL:-info} timeout 300 \
             "$bin/kolorun" -np "$np" --start-timeout 120 "$py" -m pytest -q \
             -s -x -p no:cacheprovider test_cuda.py 2>&1); then
      echo "test_cuda.py, $np rank(s): passed"
    else
      echo "test_cuda.py, $np rank(s): FAILED"; fail=1
    fi
    echo "$out" | grep -E 'passed|failed|FAILED|Error|error' | grep -v '^\[[0-9]\]<stderr>.*info' | head -30
    # Which backend each process set's CUDA tensors took (kolo's log).
    echo "$out" | grep -oE 'rank [0-9]+\] .*(run on NCCL [0-9]+|NCCL is not used for process set [0-9]+ in epoch [0-9]+ \([^;)]*)' | sort -u | head -12
  done
fi

[ "$python_only" = 1 ] && { section "Result"; [ "$fail" = 0 ] &&
  echo "gpu-check: all passed" || echo "gpu-check: FAILURES above"; exit "$fail"; }
section "kolo-bench --device cuda (allreduce float32 sum, negotiated)"
max=256M; iters=20
[ "$quick" = 1 ] && max=16M && iters=10
bench() {  # label, np, env..., -- extra flags
  local label=$1 np=$2; shift 2
  echo "### $label"
  env "$@" timeout 200 "$bin/kolorun" -np "$np" "$bin/kolo-bench" \
    --mode negotiated --min-bytes 4K --max-bytes "$max" --factor 8 \
    --iters "$iters" --warmup 3 ${BENCH_FLAGS:-} 2>&1 \
    | grep -vE '^\[[0-9]+\]<stderr>.*(info|warning)\]' | sed 's/^\[0\]<stdout>://'
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "($label: exit $rc)"; fail=1; }
}
BENCH_FLAGS="--device cuda" bench "NCCL, 1 rank" 1 KOLO_CUDA_STAGING=0
BENCH_FLAGS="--device cuda" bench "staging, 1 rank" 1 KOLO_CUDA_STAGING=1
BENCH_FLAGS="--device cuda" bench "staging, 2 ranks on the one GPU" 2 KOLO_CUDA_STAGING=1
BENCH_FLAGS="" bench "host tensors over TCP, 2 ranks (reference)" 2 KOLO_CUDA_STAGING=0

section "Result"
[ "$fail" = 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILURES above"
exit "$fail"
