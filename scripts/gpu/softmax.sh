#!/usr/bin/env bash
# Issue 19 on the H200 (softmax on every shape): in about 5 minutes,
#   1. the softmax GPU tests (SoftmaxNative.*, SoftmaxCandidates.*, SoftmaxEngine.*, SoftmaxCheck.*,
#      CutedslSoftmax.* (they skip without the CuTe DSL or a pack of their matrix):
#      every native config and every Triton candidate against the float64 host reference, odd
#      widths, rows of 1-256, 1-8 long rows, NaN / +-Inf / all -Inf rows)  -> $OUT/gpu_tests.log
#   2. the extended softmax suite (bench/suites/softmax-shapes.csv: vocabulary widths, odd widths,
#      rows of 1-64, 1-8 rows of 2^16-2^22) in bf16, fp16, fp32: gemmtune's pick vs torch.softmax
#      vs plain Triton, interleaved, with the copy bandwidth of the same run (bench/softmax.py
#      through bench/device.sh)  -> $OUT/<date>-h200-softmax-shapes.json/.md, $OUT/bench.log; its
#      summary.criteria has the issue's: every_row_not_slower_than_torch,
#      every_256MiB_row_ge_85pct_copy, bf16_1x1048576_le_20us. With a CuTe DSL softmax pack of
#      these shapes carried (artifacts-pack/softmax-shapes.tar.xz: scripts/gpu/softmax.sh --pack
#      on the build machine), the bench's engine also races the CuTe DSL kernels (load-only); the
#      tests never see the pack.
#   3. the native probe on a few of those shapes (bf16): every native config timed against the
#      copy, registers and residency  -> $OUT/probe.txt
#
#   run(command="bash scripts/gpu/softmax.sh",
#       carry=["build/libgemmtune_c.so", "build/tests/gemmtune_gpu_tests", "artifacts-pack/softmax-shapes.tar.xz"])
#
# Environment: SOFTMAX_DTYPES (bf16,fp16,fp32), SOFTMAX_BUDGET_S (seconds for the bench, 150),
# SOFTMAX_SHAPES (RxC,RxC,...: only these rows of the suite), PROBE_SHAPES (the probe's RxC list),
# PROBE_DTYPES (bf16), SKIP_TESTS=1, SKIP_PROBE=1, GPU_TESTS_TIMEOUT_S (120), PROBE_TIMEOUT_S (45).
#
# On the build machine, `bash scripts/gpu/softmax.sh --pack` builds that pack (every CuTe DSL
# softmax candidate of the suite's 16-byte aligned rows of 1024-262144 values, bf16, fp16, fp32;
# ~30 s a problem on 2 cores).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PACK=artifacts-pack/softmax-shapes.tar.xz
SUITE=bench/suites/softmax-shapes.csv

if [ "${1:-}" = --pack ]; then
  tmp=$(mktemp -d)
  store=$tmp/store
  mkdir -p "$store"
  # the suite's rows the CuTe DSL kernels can take and the native ones find hardest: 16-byte
  # aligned rows of 1024-262144 values (the vocabulary widths but 50257, 4 x 262144)
  awk -F, 'NR == 1 || ($2 % 8 == 0 && $2 >= 1024 && $2 <= 262144)' "$SUITE" >"$tmp/pack.csv"
  for dt in bf16 fp16 fp32; do
    nice -n 10 build/gemmtune precompile "$tmp/pack.csv" --dtype "$dt" --backends cutedsl --artifacts "$store" \
      --compile-workers 2 2> >(grep -v ": in store$" >&2) || exit 1
  done
  rm -rf "$store"/*/tmp
  mkdir -p "$(dirname "$PACK")"
  tar -C "$(dirname "$store")" -cJf "$PACK" store && ls -la "$PACK"
  exit 0
fi

T0=$(date +%s)
OUT=${OUT:-$PWD/softmax-out}
mkdir -p "$OUT"
export OUT

# 1. GPU tests (the binary was linked on the build machine: find cuBLASLt here if needed)
tests_rc=0
BIN=build/tests/gemmtune_gpu_tests
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  if ldd "$BIN" 2>/dev/null | grep -q "not found"; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
      [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
    done
  fi
  t=$(date +%s)
  GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python \
    timeout "${GPU_TESTS_TIMEOUT_S:-120}" "$BIN" \
    --gtest_filter='SoftmaxNative.*:SoftmaxCandidates.*:SoftmaxEngine.*:SoftmaxCheck.*:CutedslSoftmax.*' >"$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  echo "== gpu tests: rc=$tests_rc in $(($(date +%s) - t)) s"
  grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|^Expected|Which is|: WRONG|^\[==========\]" "$OUT/gpu_tests.log" | head -60
  [ "$tests_rc" = 124 ] && echo "== gpu tests: TIMED OUT"
fi

# 2. the suite (the CuTe DSL pack, when carried, for the bench's engine only), or its rows in SOFTMAX_SHAPES
if [ -n "${SOFTMAX_SHAPES:-}" ]; then
  sub=$OUT/softmax-shapes-subset.csv
  awk -F, -v want="$SOFTMAX_SHAPES" 'BEGIN { n = split(want, w, ","); for (i = 1; i <= n; ++i) keep[w[i]] = 1 }
    NR == 1 || ($1 "x" $2) in keep' "$SUITE" >"$sub"
  SUITE=$sub
  echo "== suite: $(($(wc -l <"$SUITE") - 1)) rows of bench/suites/softmax-shapes.csv (SOFTMAX_SHAPES)"
fi
if [ -f "$PACK" ]; then
  store=${TMPDIR:-/tmp}/gemmtune-softmax-pack
  rm -rf "$store" && mkdir -p "$store" && tar -C "$store" -xJf "$PACK"
  export GEMMTUNE_ARTIFACTS=$store/store GEMMTUNE_LOAD_ONLY=cutlass,cutedsl
  echo "== pack $PACK: $(find "$store" -name '*.bin' | wc -l) artifacts"
fi
SKIP_GPU_TESTS=1 bash bench/device.sh --softmax --suite "$SUITE" --dtypes "${SOFTMAX_DTYPES:-bf16,fp16,fp32}" \
  --rounds 15 --budget-s "${SOFTMAX_BUDGET_S:-150}" --tag shapes 2>&1 | tail -60
bench_rc=${PIPESTATUS[0]}
unset GEMMTUNE_ARTIFACTS GEMMTUNE_LOAD_ONLY
rm -f "$OUT/softmax-cache.sqlite"
echo "== bench: rc=$bench_rc after $(($(date +%s) - T0)) s"

# 3. the native probe (PROBE_DTYPES, default bf16)
if [ "${SKIP_PROBE:-0}" != 1 ]; then
  PROBE_SHAPES=${PROBE_SHAPES:-1x1048576,4096x50257,19173961x7,134217728x1,4096x151936,32768x4097} PROBE_SAMPLES=9 \
    PROBE_TIMEOUT_S=${PROBE_TIMEOUT_S:-45} SKIP_NCU=1 bash bench/softmax-native-probe.sh >/dev/null 2>&1
  grep -E "^== |^best" "$OUT/probe.txt" 2>/dev/null
fi
echo "== total $(($(date +%s) - T0)) s; tests rc=$tests_rc, bench rc=$bench_rc"
[ "$tests_rc" != 0 ] && exit 3
exit "$bench_rc"
