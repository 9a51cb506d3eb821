#!/usr/bin/env bash
# Session 4, call 4 (one H200): issue 2 (engine + cuBLASLt): llm-layers + squares suite, bf16 and
# fp8 tensorwise, pick vs cuBLASLt's default and torch, re-tune stability, cache hits, cold tune.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt --layers bench/suites/llm_layers.csv,bench/suites/squares.csv \
  --inductor-subset none --inductor-triton-subset none --part ceilings,coldtune,suite,stability,cachehit \
  --budget-s 480 --tag s4-cublaslt > $OUT/device.log 2>&1
rm -f $OUT/*.sqlite*
ls $OUT
grep -E "pick >=|stability:|cachehit|coldtune|OUTSIDE" $OUT/*.md $OUT/device.log | head -20 | cut -c1-400
