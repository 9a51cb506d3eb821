#!/usr/bin/env bash
# Session 5, call 1. On nvidia-h200-x2: GPU 0 runs every GPU test (both packs in one store, the
# CUTLASS pack complete), GPU 1 at the same time the issue-2 run (cuBLASLt, llm-layers + squares,
# bf16 + fp8 tensorwise; the bench now rotates input sets as the race). On one GPU: the GPU tests,
# then a smoke of the new bench code (the full issue-2 run needs a call of its own).
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NG=$(nvidia-smi -L | wc -l); echo "gpus: $NG"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv,noheader
bench() {  # $1 = GPU, rest = h200.py args
  local g=$1; shift
  mkdir -p $OUT/bench /tmp/bt /tmp/empty-store
  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$g TMPDIR=/tmp/bt GEMMTUNE_ARTIFACTS=/tmp/empty-store \
    OUT=$OUT/bench SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt "$@" > $OUT/device.log 2>&1
  echo "bench rc=$?"
}
if [ "$NG" -ge 2 ]; then
  bench 1 --layers bench/suites/llm_layers.csv,bench/suites/squares.csv --inductor-subset none \
    --inductor-triton-subset none --part ceilings,coldtune,suite,stability,cachehit --budget-s 480 --tag s5-cublaslt &
  BPID=$!
fi
mkdir -p /tmp/gt /tmp/cs && tar -C /tmp/gt -xJf artifacts-cutlass-pack/artifacts-cutlass.tar.xz &&
  tar -C /tmp/cs -xJf artifacts-cutedsl-pack/store.tar.xz && cp -rn /tmp/cs/store/. /tmp/gt/artifacts-cutlass/
CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0 GEMMTUNE_ARTIFACTS=/tmp/gt/artifacts-cutlass GEMMTUNE_TEST_CUTLASS_PACK=1 \
  GEMMTUNE_CUTEDSL_LOAD_ONLY=1 GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python \
  timeout 240 build/tests/gemmtune_gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[==========\]" $OUT/gpu_tests.log | head -20
if [ "$NG" -ge 2 ]; then
  wait $BPID
else
  bench 0 --models llama3-70b --m-values 512,1 --inductor-subset none --inductor-triton-subset 512:llama3-70b:qkv \
    --part suite,stability --budget-s 200 --tag s5-smoke
fi
rm -f $OUT/bench/*.sqlite* $OUT/*.sqlite*
cd $OUT/bench && ls && grep -hE "pick >=|stability:|cachehit|coldtune|OUTSIDE|input sets" *.md ../device.log | head -24 | cut -c1-400
tar czf ../bench-extras.tgz --exclude='*.json' --exclude='*.md' . 2>/dev/null
find . -type f ! -name '*.json' ! -name '*.md' -delete; ls -la $OUT $OUT/bench
