#!/usr/bin/env bash
# Session 5, call 4: compute-sanitizer memcheck over the kernel-matrix GPU tests (every CuTe DSL
# GEMM candidate, every CUTLASS pack instance, every native / Triton / CuTe DSL softmax candidate),
# one sanitizer process per test with its own time limit, split over two GPUs (one: in turn).
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NG=$(nvidia-smi -L | wc -l); echo "gpus: $NG"
mkdir -p /tmp/gt /tmp/cs && tar -C /tmp/gt -xJf artifacts-cutlass-pack/artifacts-cutlass.tar.xz &&
  tar -C /tmp/cs -xJf artifacts-cutedsl-pack/store.tar.xz && cp -r --update=none /tmp/cs/store/. /tmp/gt/artifacts-cutlass/
export GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python
export GEMMTUNE_ARTIFACTS=/tmp/gt/artifacts-cutlass GEMMTUNE_CUTEDSL_LOAD_ONLY=1 GEMMTUNE_TEST_CUTLASS_PACK=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p $OUT/mc
mc() {  # GPU, time limit s, test filter
  local g=$1 lim=$2 f=$3; local log=$OUT/mc/${f//[^A-Za-z]/_}.log
  local t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g timeout $lim $SAN --tool memcheck --error-exitcode 9 build/tests/gemmtune_gpu_tests --gtest_filter="$f" > $log 2>&1
  local rc=$?
  echo "$f: rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -hE 'ERROR SUMMARY' $log | tail -1); $(grep -hE '^\[  (PASSED|FAILED)' $log | tr '\n' ' ')"
}
list0() { mc $1 150 'Cutedsl.EveryCandidateIsCorrectOnTheProblemMatrix'; mc $1 100 'Cutlass.EveryInstanceInThePackIsCorrect';
          mc $1 100 'CutedslSoftmax.EveryCandidateOfTheMatrixMatchesTheHostReference'; }
list1() { mc $1 170 'SoftmaxNative.EveryConfigEveryShape'; mc $1 120 'SoftmaxCandidates.EveryBackendEveryCandidateMatchesTheHostReference';
          mc $1 60 'SoftmaxNative.SpecialRowsBehaveAsTorch'; }
if [ "$NG" -ge 2 ]; then list1 1 > $OUT/gpu1.txt 2>&1 & P=$!; list0 0; wait $P; cat $OUT/gpu1.txt
else list0 0; list1 0; fi
cd $OUT && for f in mc/*.log; do grep -E "Invalid|out of bounds|Address .* is" $f | head -3; done
tar czf mc.tgz mc && rm -rf mc; ls
