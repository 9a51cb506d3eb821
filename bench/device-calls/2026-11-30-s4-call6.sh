#!/usr/bin/env bash
# Session 4, call 6 (one H200; the x2 kind was not lent): every GPU test (CUTLASS pack instances incl. the
# overlapped fp8 mainloop, CuTe DSL GEMM + softmax incl. the packed kind, native, Triton, cuBLASLt,
# engine), then the softmax bench (bf16, fp16, fp32; native, Triton, CuTe DSL), then a CUTLASS
# cold tune (empty artifact store, nvcc + CUTLASS headers carried, 16 nvcc at once) and the warm
# tune after it (the store now holds every instance) for one bf16 and one fp8 problem.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
R=$OUT; mkdir -p $R/gpu0 $R/gpu1 $R/misc
( export TMPDIR=/tmp/g0; mkdir -p $TMPDIR
  OUT=$R/misc/softmax GPU_TESTS_TIMEOUT_S=300 bash bench/device.sh --softmax --dtypes bf16,fp16,fp32 --budget-s 150 --tag s4-softmax > $R/misc/device-gpu0.log 2>&1
  cp $R/misc/softmax/gpu_tests.log $R/gpu0/ )
( export TMPDIR=/tmp/g1; mkdir -p $TMPDIR
  mkdir -p /tmp/cutlass-src && tar -C /tmp/cutlass-src -xJf build-dev/cutlass-src.tar.xz
  for shape in 2048x8192x8192:e4m3 2048x8192x8192:bf16; do
    s=${shape%%:*} dt=${shape##*:}
    for pass in cold warm; do
      t0=$(date +%s.%N)
      GEMMTUNE_CUTLASS_DIR=/tmp/cutlass-src GEMMTUNE_NVCC_JOBS=16 GEMMTUNE_ARTIFACTS=/tmp/cold-$dt \
        timeout 150 build/gemmtune tune $s --dtype $dt --backends cutlass --no-cache --json $R/misc/cutlass-$pass-$dt.json > $R/misc/cutlass-$pass-$dt.txt 2>&1
      echo "cutlass $pass tune $s $dt: rc $? wall $(python3 -c "import time;print(round(time.time()-$t0,2))") s" | tee -a $R/gpu1/cutlass-cold-warm.txt
      python3 -c "
import json,sys
d=json.load(open('$R/misc/cutlass-$pass-$dt.json'))
c=[r.get('compile_s') or 0 for r in d['results']]
print(f\"  {len(c)} candidates, select {d.get('seconds')} s, compile_s sum {sum(c):.1f} max {max(c):.1f}, statuses {sorted(set(r['status'] for r in d['results']))}, pick {d['kernel']['id']}\")
" | tee -a $R/gpu1/cutlass-cold-warm.txt
    done
  done )
rm -f $R/misc/softmax/*.sqlite*
cp $R/misc/softmax/*.md $R/gpu0/ 2>/dev/null
(cd $R && tar czf misc.tgz misc && rm -rf misc)
find $R -type f | sort
grep -E "^\[  (PASSED|FAILED) |^\[==========\]" $R/gpu0/gpu_tests.log | head -20
grep "^|" $R/gpu0/*softmax*.md | head -26 | cut -c1-200
cat $R/gpu1/cutlass-cold-warm.txt
