#!/usr/bin/env bash
# The native softmax probe (issue 6, docs/softmax.md "The pipe kernel"): on the GPU machine, in
# about a minute,
#   0. (NATIVE_TESTS=1 only) the native kernels' GPU tests, SoftmaxNative.* (~30-60 s)
#      -> $OUT/native_tests.log
#   1. times every native config of bench/suites/softmax.csv's shapes (bf16 unless PROBE_DTYPES
#      says more) against the device-to-device copy bandwidth measured in the same run
#      (SoftmaxNativeProbe.DISABLED_TimeEveryConfig in build/tests/gemmtune_gpu_tests: 1 GiB
#      operands, so every launch meets a cold L2; back-to-back launches, CUDA events, medians;
#      3 rows of each output checked against the float64 host reference) -> $OUT/probe.txt
#   2. profiles a few long-row kernels with Nsight Compute (DRAM throughput, achieved occupancy,
#      registers, warp stall reasons), at most NCU_TIMEOUT_S (60) seconds -> $OUT/ncu.txt
# and prints the tables and the key ncu lines.
#
#   run(command="bash bench/softmax-native-probe.sh", carry=["build/tests/gemmtune_gpu_tests"])
#   run(command="PROBE_DTYPES=bf16,fp16,fp32 SKIP_NCU=1 bash bench/softmax-native-probe.sh", carry=[...])
#   run(command="NATIVE_TESTS=1 bash bench/softmax-native-probe.sh", carry=["build/tests/gemmtune_gpu_tests"])
#
# Environment:
#   PROBE_DTYPES   dtypes to time (default bf16; e.g. bf16,fp16,fp32)
#   PROBE_SHAPES   RxC list (default: the suite's seven shapes)
#   PROBE_CONFIGS  only these config names (default: every config offered for the shape)
#   PROBE_SAMPLES  timed launches per config (default 15, the median is printed)
#   PROBE_TIMEOUT_S  limit of step 1 (default 300)
#   NCU_SHAPE      the shape ncu sees (default 512x262144 bf16: 256 MiB operands)
#   NCU_CONFIGS    the configs ncu profiles, one launch each (default: the best pipe config of the
#                  2026-11-30 probe at 262144 columns and the two pipe configs its ncu run compared)
#   NCU_DTYPE      the dtype ncu sees (default bf16)
#   NCU_SECTIONS   extra ncu arguments (e.g. "--section SourceCounters": the warp stall sampling's
#                  top SASS locations, for the wide ring's per-step cost, docs/softmax.md)
#   NCU_TIMEOUT_S  hard limit of step 2 (default 60); SKIP_NCU=1 skips it
#   NATIVE_TESTS=1 run SoftmaxNative.* first (limit NATIVE_TESTS_TIMEOUT_S, default 240)
#   GPU_TESTS      the test binary (default build/tests/gemmtune_gpu_tests)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/probe-out}
mkdir -p "$OUT"
BIN=${GPU_TESTS:-build/tests/gemmtune_gpu_tests}
if [ ! -x "$BIN" ]; then
  echo "== $BIN missing: carry build/tests/gemmtune_gpu_tests"
  exit 1
fi
# The binary was linked on the build machine; find cuBLASLt here if its run path misses it.
if ldd "$BIN" 2>/dev/null | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -e "$d/libcublasLt.so.13" ]; then
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      break
    fi
  done
fi
echo "== $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader 2>&1 | head -1)"

# 0. the native kernels' GPU tests
tests_rc=0
if [ "${NATIVE_TESTS:-0}" = 1 ]; then
  t=$(date +%s)
  timeout "${NATIVE_TESTS_TIMEOUT_S:-240}" "$BIN" --gtest_filter='SoftmaxNative.*' >"$OUT/native_tests.log" 2>&1
  tests_rc=$?
  echo "== native GPU tests: rc=$tests_rc in $(($(date +%s) - t)) s ($OUT/native_tests.log)"
  grep -E '^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|^Expected|^  Actual|Which is|skipped:|^\[==========\]' "$OUT/native_tests.log" | head -80
  [ "$tests_rc" = 124 ] && echo "== native GPU tests: TIMED OUT"
fi

# 1. timings
export GEMMTUNE_PROBE_DTYPES=${PROBE_DTYPES:-bf16}
[ -n "${PROBE_SHAPES:-}" ] && export GEMMTUNE_PROBE_SHAPES=$PROBE_SHAPES
[ -n "${PROBE_CONFIGS:-}" ] && export GEMMTUNE_PROBE_CONFIGS=$PROBE_CONFIGS
export GEMMTUNE_PROBE_SAMPLES=${PROBE_SAMPLES:-15}
t=$(date +%s)
timeout "${PROBE_TIMEOUT_S:-300}" "$BIN" --gtest_also_run_disabled_tests --gtest_filter='SoftmaxNativeProbe.*' \
  >"$OUT/probe.txt" 2>&1
probe_rc=$?
echo "== probe: rc=$probe_rc in $(($(date +%s) - t)) s ($OUT/probe.txt)"
grep -v -E '^\[ (RUN|       OK) |^\[----------\]|^Note: |^$' "$OUT/probe.txt"
unset GEMMTUNE_PROBE_SHAPES GEMMTUNE_PROBE_CONFIGS

# 2. Nsight Compute on long-row kernels (one launch of each config, kernel replay)
if [ "${SKIP_NCU:-0}" != 1 ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -z "$NCU" ]; then
    echo "== ncu: not found"
  else
    configs=${NCU_CONFIGS:-pipe_v8_e64_t256_r1_c16_s2,pipe_v8_e32_t1024_r1_c8_s3,pipe_v8_e32_t512_r1_c16_s3}
    n=$(echo "$configs" | tr ',' '\n' | grep -c .)
    t=$(date +%s)
    GEMMTUNE_PROBE_NCU=1 GEMMTUNE_PROBE_DTYPES=${NCU_DTYPE:-bf16} GEMMTUNE_PROBE_SHAPES=${NCU_SHAPE:-512x262144} \
      GEMMTUNE_PROBE_CONFIGS=$configs timeout -k 5 "${NCU_TIMEOUT_S:-60}" "$NCU" --clock-control none \
      --kernel-name regex:softmax_ --launch-count "$n" \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section WarpStateStats --section SchedulerStats ${NCU_SECTIONS:-} --print-details all \
      "$BIN" --gtest_also_run_disabled_tests --gtest_filter='SoftmaxNativeProbe.*' >"$OUT/ncu.txt" 2>&1
    rc=$?
    echo "== ncu ($NCU): rc=$rc in $(($(date +%s) - t)) s ($OUT/ncu.txt); $configs on ${NCU_SHAPE:-512x262144}"
    grep -E 'launched$|softmax_[a-z]+_kernel|DRAM Throughput|Memory Throughput|^ +Duration|Registers Per Thread|Dynamic Shared Memory Per Block|Achieved Occupancy|Theoretical Occupancy|Block Limit (Registers|Shared Mem|Warps)|Cluster Size|Waves Per SM|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Stall [A-Z]|^ +(Long Scoreboard|Barrier|Membar|Short Scoreboard|Wait|Math Pipe Throttle|LG Throttle|MIO Throttle|Drain|Not Selected|Selected|Sleeping|Branch Resolving|Dispatch Stall|No Instruction|Misc|Tex Throttle|IMC Miss)|==ERR|==WARN|ERROR' \
      "$OUT/ncu.txt" | head -200
  fi
fi
[ "$probe_rc" != 0 ] && exit "$probe_rc"
exit "$tests_rc"
