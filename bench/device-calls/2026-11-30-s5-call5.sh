#!/usr/bin/env bash
# Session 5, call 5: why SoftmaxCandidates.EveryBackendEveryCandidateMatchesTheHostReference ended
# with a segfault 2 s into compute-sanitizer memcheck (call 4) while it passes without it: the same
# test plain x3, under memcheck with --target-processes application-only, with one compile worker,
# and the GEMM twin (Candidates.*: cuBLASLt + Triton, the same parallel prepare) under memcheck.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NG=$(nvidia-smi -L | wc -l); echo "gpus: $NG"
export GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python CUDA_DEVICE_ORDER=PCI_BUS_ID
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T=SoftmaxCandidates.EveryBackendEveryCandidateMatchesTheHostReference
mkdir -p $OUT/d
run() {  # name, GPU, limit, command...
  local n=$1 g=$2 lim=$3; shift 3; local t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g timeout $lim "$@" > $OUT/d/$n.log 2>&1; local rc=$?
  echo "$n: rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -hE 'ERROR SUMMARY' $OUT/d/$n.log | tail -1); $(grep -hE '^\[  (PASSED|FAILED)' $OUT/d/$n.log | tr '\n' ' ')"
}
g0() {
  for i in 1 2 3; do run plain$i $1 60 build/tests/gemmtune_gpu_tests --gtest_filter=$T; done
  run mc-apponly $1 120 $SAN --tool memcheck --target-processes application-only build/tests/gemmtune_gpu_tests --gtest_filter=$T
  GEMMTUNE_COMPILE_WORKERS=1 run mc-1worker $1 120 $SAN --tool memcheck build/tests/gemmtune_gpu_tests --gtest_filter=$T
}
g1() {
  run mc-again $1 60 $SAN --tool memcheck build/tests/gemmtune_gpu_tests --gtest_filter=$T
  run mc-gemm-candidates $1 240 $SAN --tool memcheck build/tests/gemmtune_gpu_tests --gtest_filter='Candidates.*'
}
if [ "$NG" -ge 2 ]; then g1 1 > $OUT/g1.txt 2>&1 & P=$!; g0 0; wait $P; cat $OUT/g1.txt; else g0 0; g1 0; fi
for f in $OUT/d/mc-*.log; do echo "== $(basename $f)"; grep -vE "^\[ *(OK|RUN) |^$" $f | tail -8 | cut -c1-300; done
cd $OUT && tar czf d.tgz d && rm -rf d; ls
