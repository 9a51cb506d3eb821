#!/usr/bin/env bash
# Call 3: GPU0: all GPU tests + the softmax bench (bf16, fp16, fp32; native, Triton, CuTe DSL), then the
#         native softmax probe + ncu; GPU1: issue 2 (cuBLASLt suite, stability, cache hits, cold tune).
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && cp build-dev/libgemmtune_c.so build-dev/gemmtune build/ && cp build-dev/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
R=$OUT; mkdir -p $R/gpu0 $R/gpu1 $R/misc
( export TMPDIR=/tmp/g1 CUDA_VISIBLE_DEVICES=1 OUT=$R/gpu1 SKIP_GPU_TESTS=1; mkdir -p $TMPDIR
  bash bench/device.sh --backends cublaslt --layers bench/suites/llm_layers.csv,bench/suites/squares.csv --inductor-subset none --inductor-triton-subset none --part ceilings,coldtune,suite,stability,cachehit --budget-s 470 --tag cublaslt-duel2 > $R/misc/device-gpu1.log 2>&1 ) &
( export TMPDIR=/tmp/g0 CUDA_VISIBLE_DEVICES=0; mkdir -p $TMPDIR
  OUT=$R/misc/softmax GPU_TESTS_TIMEOUT_S=330 bash bench/device.sh --softmax --dtypes bf16,fp16,fp32 --budget-s 150 --tag three-backends > $R/misc/device-gpu0.log 2>&1
  OUT=$R/gpu0 bash bench/softmax-native-probe.sh > $R/misc/probe-console.log 2>&1 ) &
wait
mv $R/gpu0/ncu.txt $R/misc/ 2>/dev/null
rm -f $R/misc/softmax/*.sqlite*
cp $R/misc/softmax/*.md $R/misc/softmax/gpu_tests.log $R/gpu0/ 2>/dev/null
mv $R/gpu1/bench.log $R/misc/bench-gpu1.log 2>/dev/null
(cd $R && tar czf misc.tgz misc && rm -rf misc)
find $R -type f | sort
grep -E "^\[  (PASSED|FAILED) |^\[==========\]" $R/gpu0/gpu_tests.log | head -20
grep "^|" $R/gpu0/*softmax*.md | head -26 | cut -c1-220
grep -E "pick >=|stability:|cachehit|coldtune" $R/gpu1/*.md | head -10 | cut -c1-400
