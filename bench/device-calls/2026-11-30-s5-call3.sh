#!/usr/bin/env bash
# Session 5, call 3: the final code (clean-up merged; CuTe DSL shim_common.h + check_fields with
# the rebuilt CuTe DSL pack; GPU tests' race-reach check). GPU 0: every GPU test (both packs, the
# CUTLASS pack complete). GPU 1: a four-backend bench smoke from the packs, then compute-sanitizer
# memcheck over the engine-level tests and racecheck over a native softmax test. One GPU: in turn.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NG=$(nvidia-smi -L | wc -l); echo "gpus: $NG"
mkdir -p /tmp/gt /tmp/cs && tar -C /tmp/gt -xJf artifacts-cutlass-pack/artifacts-cutlass.tar.xz &&
  tar -C /tmp/cs -xJf artifacts-cutedsl-pack/store.tar.xz && cp -r --update=none /tmp/cs/store/. /tmp/gt/artifacts-cutlass/
export GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python
export GEMMTUNE_ARTIFACTS=/tmp/gt/artifacts-cutlass GEMMTUNE_CUTEDSL_LOAD_ONLY=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
gpu0() {
  CUDA_VISIBLE_DEVICES=0 GEMMTUNE_TEST_CUTLASS_PACK=1 timeout 240 build/tests/gemmtune_gpu_tests > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$?"
}
gpu1() {
  local g=$1
  mkdir -p $OUT/b /tmp/t1
  CUDA_VISIBLE_DEVICES=$g TMPDIR=/tmp/t1 OUT=$OUT/b SKIP_GPU_TESTS=1 bash bench/device.sh --artifacts /tmp/gt/artifacts-cutlass \
    --backends cublaslt,triton,cutlass,cutedsl --dtypes bf16,fp8 --models llama3-70b --m-values 16,2048 \
    --inductor-subset none --inductor-triton-subset none --part suite,stability --budget-s 150 --tag s5-four-smoke \
    > $OUT/bench.log 2>&1; echo "bench rc=$?"
  CUDA_VISIBLE_DEVICES=$g timeout 150 $SAN --tool memcheck --leak-check full --error-exitcode 9 build/tests/gemmtune_gpu_tests \
    --gtest_filter='Engine.*:SoftmaxEngine.*:Cutlass.SeveralInstancesInOneProcess:Cutlass.EngineSelectRacesCutlass:Cutedsl.RepeatedRunsAreIdenticalAcrossStreams:Cutedsl.EngineTunesCachesAndReloads:CutedslSoftmax.RefusesWhatItCannotRun:Reference.*:SoftmaxCheck.*' \
    > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"
  CUDA_VISIBLE_DEVICES=$g timeout 100 $SAN --tool racecheck --error-exitcode 9 build/tests/gemmtune_gpu_tests \
    --gtest_filter='SoftmaxNative.PipeLoopsOverRowsAndStages' > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"
}
if [ "$NG" -ge 2 ]; then gpu1 1 > $OUT/gpu1.txt 2>&1 & P=$!; gpu0; wait $P; cat $OUT/gpu1.txt
else gpu0; gpu1 0; fi
grep -E "^\[  (PASSED|FAILED) |^\[==========\]|^\[  FAILED" $OUT/gpu_tests.log | head -20
for f in memcheck racecheck; do echo "== $f"; grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)|Invalid|hazard" $OUT/$f.log | head -12; done
grep -hE "pick >=|stability:|MISMATCH|^\| (all|bf16|fp8) |not available" $OUT/b/*.md $OUT/bench.log | head -12 | cut -c1-300
rm -f $OUT/*.sqlite* $OUT/*/*.sqlite*
cd $OUT && tar czf extras.tgz --exclude='*.json' --exclude='*.md' --exclude=gpu_tests.log --exclude=memcheck.log --exclude=extras.tgz . 2>/dev/null
find . -type f ! -name '*.json' ! -name '*.md' ! -name gpu_tests.log ! -name memcheck.log ! -name extras.tgz -delete; find . -type f | sort
