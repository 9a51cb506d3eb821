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
# Several GPUs of one host (GPUS=N, default 1; GPUS=all = every GPU nvidia-smi lists, or every entry
# of a preset CUDA_VISIBLE_DEVICES): the GPU tests run once, as with one GPU; then N h200.py processes
# run in parallel, shard i (--shard i/N: every Nth suite problem) with CUDA_VISIBLE_DEVICES=i
# (CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's numbering), --out $OUT/shard-i, its log in
# $OUT/bench-i.log, each with the same --budget-s and GEMMTUNE_COMPILE_WORKERS = cores / N (unless
# set), all on the one unpacked kernel-pack store; then `h200.py --merge` writes the run's
# <date>-h200[-tag].json and .md into $OUT (its output also in $OUT/bench.log). A shard still running
# 60 s past its budget is stopped (its last written part is merged). E.g. on nvidia-h200-x2:
#   run(command="GPUS=2 SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt,triton,cutlass,cutedsl "
#       "--dtypes bf16,fp8 --part ceilings,suite --budget-s 480 --tag four-backends", kind="nvidia-h200-x2",
#       carry=[... as below, with the packs])
#
# Kernel packs (the GPU machine has neither CUTLASS's headers nor the CuTe DSL wheel): when
# artifacts-pack/store.tar.xz (scripts/precompile.sh) is carried, it is unpacked into one
# store, GEMMTUNE_ARTIFACTS points at it (unless set), CUTLASS and the CuTe DSL run load-only
# (GEMMTUNE_LOAD_ONLY), the GPU tests require the pack to be complete, and the bench gets
# --artifacts. Carry the packs, not the unpacked stores: the working tree plus what is carried
# must stay under 64 MiB. E.g.
#   run(command="bash bench/device.sh --backends cublaslt,cutlass,cutedsl --m-values 2048,8192",
#       carry=["build/libgemmtune_c.so", "build/tests/gemmtune_gpu_tests", "artifacts-pack"])
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
source scripts/gpu/pack.sh
pack_unpack || exit 1

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
pack_trust
echo "== $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -1)"
echo "== python: $(python3 --version 2>&1); $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1 | tail -1)"

# The compile workers of the GPU tests and the CLI: this machine's python3 (with its triton), and
# this checkout's python/ (the path compiled into build/ is the build machine's). The benches pass
# the same to their engines as options (bench/gtbench/engine.py) and h200.py its own, empty
# artifact store.
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)}
export GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
echo "== GEMMTUNE_PYTHON=$GEMMTUNE_PYTHON GEMMTUNE_PYTHON_DIR=$GEMMTUNE_PYTHON_DIR; $(nproc) cores"

# GPUS=N: the devices of the shards (see the header).
devs=()
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -r -a devs <<<"$CUDA_VISIBLE_DEVICES"
else
  n_listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  for ((i = 0; i < n_listed; i++)); do devs+=("$i"); done
fi
gpus=${GPUS:-1}
[ "$gpus" = all ] && gpus=${#devs[@]}
[ "$gpus" = 0 ] && gpus=1   # GPUS=all without a listed GPU: one process, which says what is missing
if ! [[ "$gpus" =~ ^[0-9]+$ ]] || { [ "$gpus" -gt 1 ] && [ "$gpus" -gt "${#devs[@]}" ]; }; then
  echo "== GPUS=${GPUS:-}: not a number of GPUs, 'all', or more than the ${#devs[@]} listed (${devs[*]:-none})"
  exit 2
fi
if [ "$gpus" -gt 1 ] && [ "${1:-}" = --softmax ]; then
  echo "== GPUS=$gpus: the softmax bench runs on one GPU"
  gpus=1
fi

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
budget="" prev=""
for a in "$@"; do
  case "$a" in --budget-s=*) budget=${a#--budget-s=} ;; esac
  [ "$prev" = --budget-s ] && budget=$a
  prev=$a
done
has_artifacts=0
for a in "$@"; do
  case "$a" in --artifacts | --artifacts=*) has_artifacts=1 ;; esac
done
if [ -n "$pack_store" ] && [ "$has_artifacts" = 0 ] && [ "$bench" = bench/h200.py ]; then
  args+=(--artifacts "$pack_store")
fi
if [ -z "$budget" ]; then
  budget=$((${DEVICE_BUDGET_S:-540} - $(elapsed)))
  [ "$budget" -lt 90 ] && budget=90
  args+=(--budget-s "$budget")
fi
t=$(date +%s)
if [ "$gpus" -le 1 ]; then
  echo "== bench: python3 $bench --out $OUT ${args[*]}"
  PYTHONUNBUFFERED=1 python3 "$bench" --out "$OUT" "${args[@]}" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
else
  # N shards in parallel, then one merge (see the header).
  budget_int=${budget%.*}
  stop=()
  [ "${budget_int:-0}" -gt 0 ] 2>/dev/null && stop=(timeout --kill-after=10 $((budget_int + 60)))
  workers=${GEMMTUNE_COMPILE_WORKERS:-$(($(nproc) / gpus))}
  [ "$workers" -lt 1 ] && workers=1
  order=()  # shard i on nvidia-smi's GPU i; a preset CUDA_VISIBLE_DEVICES list keeps its own meaning
  [ -z "${CUDA_VISIBLE_DEVICES:-}" ] && order=(CUDA_DEVICE_ORDER="${CUDA_DEVICE_ORDER:-PCI_BUS_ID}")
  echo "== bench: $gpus shards in parallel on GPUs ${devs[*]:0:$gpus}: python3 $bench --out $OUT/shard-I ${args[*]} --shard I/$gpus (logs: bench-I.log; $workers compile workers each)"
  pids=()
  for ((i = 0; i < gpus; i++)); do
    mkdir -p "$OUT/shard-$i"
    env CUDA_VISIBLE_DEVICES="${devs[$i]}" "${order[@]}" GEMMTUNE_COMPILE_WORKERS="$workers" PYTHONUNBUFFERED=1 \
      "${stop[@]}" python3 "$bench" --out "$OUT/shard-$i" "${args[@]}" --shard "$i/$gpus" >"$OUT/bench-$i.log" 2>&1 &
    pids+=($!)
  done
  shard_rc=0
  docs=()
  for ((i = 0; i < gpus; i++)); do
    wait "${pids[$i]}"
    rc=$?
    echo "== shard $i (CUDA_VISIBLE_DEVICES=${devs[$i]}): rc=$rc after $(($(date +%s) - t)) s$([ "$rc" = 124 ] && echo ', STOPPED past its budget')"
    { grep -E '!!!|\] part [a-z_]+:' "$OUT/bench-$i.log" | tail -12; [ "$rc" != 0 ] && tail -3 "$OUT/bench-$i.log"; } |
      sed "s/^/   [$i] /"
    [ "$rc" != 0 ] && [ "$shard_rc" = 0 ] && shard_rc=$rc
    for f in "$OUT/shard-$i"/*-h200*-shard"$i"of"$gpus".json; do [ -f "$f" ] && docs+=("$f"); done
  done
  if [ "${#docs[@]}" = 0 ]; then
    echo "== bench: no shard wrote a result (see bench-I.log)"
    bench_rc=2
  else
    echo "== merge: python3 $bench --merge ${docs[*]} --out $OUT"
    python3 "$bench" --merge "${docs[@]}" --out "$OUT" 2>&1 | tee "$OUT/bench.log"
    bench_rc=${PIPESTATUS[0]}
    [ "$bench_rc" = 0 ] && bench_rc=$shard_rc
  fi
fi
echo "== bench: rc=$bench_rc in $(($(date +%s) - t)) s; gpu tests rc=$gpu_rc; total $(elapsed) s"
[ "$bench_rc" != 0 ] && exit "$bench_rc"
[ "$gpu_rc" != 0 ] && exit 3
exit 0
