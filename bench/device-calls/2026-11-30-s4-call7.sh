#!/usr/bin/env bash
# Session 4, call 7 (one H200): issue 2 diagnostic: the race with the default fp8 input range vs 8x
# it (few subnormals, as the bench's inputs), alternating, on the two problems whose picks the
# bench disputed in the last run (llama3-70b/qkv m=512 fp8: 320x64 vs 112x128; gate_up m=1 fp8).
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
RACE_METHOD_VARIANTS=fp8gain RACE_METHOD_REPS="1 2" RACE_METHOD_PROBLEMS="512x10240x8192 1x57344x8192" OUT=$OUT bash bench/race-method.sh 2>&1
cd $OUT && tar czf race-method.tgz race-method && rm -rf race-method
