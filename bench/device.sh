#!/usr/bin/env bash
# What the lead passes to the device tool: runs in the repository root on the GPU machine, with
# build/ carried (libgemmtune_c.so, the gemmtune CLI, tests/gemmtune_gpu_tests). Runs the GPU
# tests, then the H200 benchmark, writing everything into $OUT:
#
#   run(command="bash bench/device.sh", carry=["build"])                       # default: all parts
#   run(command="bash bench/device.sh --dtypes bf16 --part ceilings,suite,cachehit", carry=["build"])
#   run(command="SKIP_GPU_TESTS=1 bash bench/device.sh --limit 4 --inductor-subset none --inductor-triton-subset none", carry=["build"])
#   run(command="SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt,triton --dtypes bf16 --part ceilings,coldtune,suite --inductor-subset none --tag triton-bf16", carry=["build"])
#
# Environment: SKIP_GPU_TESTS=1 skips the GPU tests; GPU_TESTS_ARGS (e.g. a --gtest_filter) and
# GPU_TESTS_TIMEOUT_S (180) shape their run.
#
# Kernel packs (the GPU machine has neither CUTLASS's headers nor the CuTe DSL wheel): when
# artifacts-cutlass-pack/artifacts-cutlass.tar.xz (scripts/precompile-cutlass.sh) and/or
# artifacts-cutedsl-pack/store.tar.xz (scripts/precompile-cutedsl.sh) are carried, they are
# unpacked into one store, GEMMTUNE_ARTIFACTS points at it (unless set), the CuTe DSL backend
# runs load-only, the GPU tests require the CUTLASS pack to be complete, and the bench gets
# --artifacts. Carry the packs, not the unpacked stores: the working tree plus what is carried
# must stay under 64 MiB. E.g.
#   run(command="bash bench/device.sh --backends cublaslt,cutlass,cutedsl --m-values 2048,8192",
#       carry=["build/libgemmtune_c.so", "build/tests/gemmtune_gpu_tests", "artifacts-cutlass-pack",
#              "artifacts-cutedsl-pack"])
#
# Arguments go to bench/h200.py. Unless --budget-s is given, the bench gets what is left of
# DEVICE_BUDGET_S (default 540 s) after the GPU tests, so the whole call stays under the device
# tool's 600 s. Prints the elapsed time of each step; the bench's whole output is also in
# $OUT/bench.log (the device tool returns only the end of it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }
OUT=${OUT:-$PWD/bench-out}
mkdir -p "$OUT"
export OUT

# Kernel packs -> one store (see the header).
packs=()
[ -f artifacts-cutlass-pack/artifacts-cutlass.tar.xz ] && packs+=(artifacts-cutlass-pack/artifacts-cutlass.tar.xz)
[ -f artifacts-cutedsl-pack/store.tar.xz ] && packs+=(artifacts-cutedsl-pack/store.tar.xz)
pack_store=""
if [ "${#packs[@]}" -gt 0 ] && [ -z "${GEMMTUNE_ARTIFACTS:-}" ]; then
  pack_store=${TMPDIR:-/tmp}/gemmtune-packs/store
  rm -rf "${pack_store%/store}" && mkdir -p "$pack_store"
  for pk in "${packs[@]}"; do
    tmp=$(mktemp -d)
    tar -C "$tmp" -xJf "$pk" || { echo "== pack $pk: cannot unpack"; exit 1; }
    # each pack holds one top-level folder: the store's content-addressed entries
    for d in "$tmp"/*/; do cp -r --update=none "$d". "$pack_store"/ 2>/dev/null || cp -rn "$d". "$pack_store"/; done
    rm -rf "$tmp"
  done
  export GEMMTUNE_ARTIFACTS=$pack_store
  [[ " ${packs[*]} " == *cutedsl* ]] && export GEMMTUNE_CUTEDSL_LOAD_ONLY=${GEMMTUNE_CUTEDSL_LOAD_ONLY:-1}
  [[ " ${packs[*]} " == *cutlass-pack* ]] && export GEMMTUNE_TEST_CUTLASS_PACK=${GEMMTUNE_TEST_CUTLASS_PACK:-1}
  echo "== packs: ${packs[*]} -> GEMMTUNE_ARTIFACTS=$pack_store ($(find "$pack_store" -type f | wc -l) files)"
fi

# The binaries were linked on the build machine; find cuBLASLt here if their run path misses it.
need_lt=0
for f in build/libgemmtune_c.so build/gemmtune build/tests/gemmtune_gpu_tests; do
  [ -e "$f" ] && ldd "$f" 2>/dev/null | grep -q "not found" && need_lt=1
done
if [ "$need_lt" = 1 ]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -e "$d/libcublasLt.so.13" ]; then
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      break
    fi
  done
  echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  for f in build/libgemmtune_c.so build/gemmtune; do
    [ -e "$f" ] && ldd "$f" | grep "not found" | sed "s|^|== $f: |"
  done
fi
echo "== $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -1)"
echo "== python: $(python3 --version 2>&1); $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1 | tail -1)"

# The Triton backend's compile workers (GPU tests, the CLI, the bench): this machine's python3
# (with its triton), and this checkout's python/ (the path compiled into build/ is the build
# machine's). The bench sets the same for its engines and uses its own, empty artifact store.
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)}
export GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
echo "== GEMMTUNE_PYTHON=$GEMMTUNE_PYTHON GEMMTUNE_PYTHON_DIR=$GEMMTUNE_PYTHON_DIR; $(nproc) cores"

# 1. GPU tests (exit 77 = no device: skipped)
gpu_rc=0
if [ "${SKIP_GPU_TESTS:-0}" = 1 ]; then
  echo "== gpu tests: skipped (SKIP_GPU_TESTS=1)"
elif [ ! -x build/tests/gemmtune_gpu_tests ]; then
  echo "== gpu tests: build/tests/gemmtune_gpu_tests missing (was build/ carried?)"
  gpu_rc=1
else
  t=$(date +%s)
  timeout "${GPU_TESTS_TIMEOUT_S:-180}" build/tests/gemmtune_gpu_tests ${GPU_TESTS_ARGS:-} >"$OUT/gpu_tests.log" 2>&1
  gpu_rc=$?
  echo "== gpu tests: rc=$gpu_rc in $(($(date +%s) - t)) s (log: gpu_tests.log)"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^GPU tests skipped" "$OUT/gpu_tests.log" | tail -25
  [ "$gpu_rc" = 124 ] && echo "== gpu tests: TIMED OUT"
fi

# 2. the benchmark: bench/h200.py, or bench/softmax.py when the first argument is --softmax
#    (run(command="bash bench/device.sh --softmax --dtypes bf16", carry=["build"]))
bench=bench/h200.py
if [ "${1:-}" = --softmax ]; then
  bench=bench/softmax.py
  shift
fi
args=("$@")
has_budget=0
for a in "$@"; do
  case "$a" in --budget-s | --budget-s=*) has_budget=1 ;; esac
done
has_artifacts=0
for a in "$@"; do
  case "$a" in --artifacts | --artifacts=*) has_artifacts=1 ;; esac
done
if [ -n "$pack_store" ] && [ "$has_artifacts" = 0 ] && [ "$bench" = bench/h200.py ]; then
  args+=(--artifacts "$pack_store")
fi
if [ "$has_budget" = 0 ]; then
  left=$((${DEVICE_BUDGET_S:-540} - $(elapsed)))
  [ "$left" -lt 90 ] && left=90
  args+=(--budget-s "$left")
fi
t=$(date +%s)
echo "== bench: python3 $bench --out $OUT ${args[*]}"
PYTHONUNBUFFERED=1 python3 "$bench" --out "$OUT" "${args[@]}" 2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}
echo "== bench: rc=$bench_rc in $(($(date +%s) - t)) s; gpu tests rc=$gpu_rc; total $(elapsed) s"
[ "$bench_rc" != 0 ] && exit "$bench_rc"
[ "$gpu_rc" != 0 ] && exit 3
exit 0
