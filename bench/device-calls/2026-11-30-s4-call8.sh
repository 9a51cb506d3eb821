#!/usr/bin/env bash
# Session 4, call 8 (one H200): issue 2 diagnostic: the disputed pair (llama3-70b/qkv m=512 fp8,
# cuBLASLt 320x64x128 = first, 112x128x128 = second) under the bench's method and the race's, one
# variable at a time (bench/pair-method.py), twice.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ID320=42000000f70000002400000001000000000000000000000006000000000005000100000034fc01001c0000001c0000000e000e00440000000000000000000000
ID112=42000000a50000002400000001000000000000000000000004000000000003000100000034fc01001c0000001c0000000e000e00440000000000000000000000
for rep in 1 2; do
  timeout 120 python3 bench/pair-method.py --problem 512x10240x8192 --dtype e4m3 --ids $ID320,$ID112 --rounds 40 2>&1 | tee -a $OUT/pair-method.txt
done
