#!/usr/bin/env bash
# Issue 19 on the H200 (softmax on every shape): in about 5 minutes,
#   1. the softmax GPU tests (SoftmaxNative.*, SoftmaxCandidates.*, SoftmaxEngine.*, SoftmaxCheck.*,
#      CutedslSoftmax.* (they skip without the CuTe DSL or a pack of their matrix; with the pack
#      below they run its candidates, load-only):
#      every native config and every Triton candidate against the float64 host reference, odd
#      widths, rows of 1-256, 1-8 long rows, NaN / +-Inf / all -Inf rows)  -> $OUT/gpu_tests.log
#   2. the extended softmax suite (bench/suites/softmax-shapes.csv: vocabulary widths, odd widths,
#      rows of 1-64, 1-8 rows of 2^16-2^22) in bf16, fp16, fp32: gemmtune's pick vs torch.softmax
#      vs plain Triton, interleaved, with the copy bandwidth of the same run (bench/softmax.py
#      through bench/device.sh)  -> $OUT/<date>-h200-softmax-shapes.json/.md, $OUT/bench.log; its
#      summary.criteria has the issue's: every_row_not_slower_than_torch,
#      every_256MiB_row_ge_85pct_copy, bf16_1x1048576_le_20us. With a CuTe DSL softmax pack of
#      these shapes carried (artifacts-pack/softmax-shapes.tar.xz: scripts/gpu/softmax.sh --pack
#      on the build machine), the bench's engine also races the CuTe DSL kernels (load-only), and
#      the GPU tests run the pack's candidates of their matrix.
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
# On the build machine, `bash scripts/gpu/softmax.sh --pack` builds that pack (~400 artifacts, ~5 MB,
# ~15 min on 2 cores): the top PACK_SUITE_CONFIGS (5) CuTe DSL softmax candidates (plus the packed
# kind's) of the suite's rows of 1000-262144 values and of 7 values (the vocabulary widths, the odd
# widths 1001 / 4097 / 16385 / 50257 in virtual columns), bf16, fp16, fp32; and of the CuTe DSL GPU
# tests' matrix (tests/gpu/packs/softmax.jsonl): the top PACK_TEST_CONFIGS (2) of each problem, the
# top PACK_ODD_CONFIGS (3) of those whose rows do not start on 16-byte packs (virtual columns).
# PACK_SHAPES (RxC,RxC,...) keeps only those rows of the suite (a pack for a SOFTMAX_SHAPES run).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PACK=artifacts-pack/softmax-shapes.tar.xz
SUITE=bench/suites/softmax-shapes.csv

if [ "${1:-}" = --pack ]; then
  tmp=$(mktemp -d)
  store=$tmp/store
  mkdir -p "$store"
  pc() {  # pc FILE MAX_CONFIGS [precompile flags]
    local f=$1 n=$2
    shift 2
    nice -n 10 build/gemmtune precompile "$f" --backends cutedsl --artifacts "$store" --max-configs "$n" \
      --compile-workers 2 "$@" 2> >(grep -v ": in store$" >&2) || exit 1
  }
  # the suite's rows the CuTe DSL kernels can take: rows of 1000-262144 values (aligned or not)
  # and of 7 (not on 16-byte packs)
  # (PACK_SHAPES=RxC,RxC,...: only those of them)
  awk -F, -v want="${PACK_SHAPES:-}" 'BEGIN { n = split(want, w, ","); for (i = 1; i <= n; ++i) keep[w[i]] = 1 }
    NR == 1 || ((($2 >= 1000 && $2 <= 262144) || $2 == 7) && (n == 0 || ($1 "x" $2) in keep))' "$SUITE" >"$tmp/pack.csv"
  for dt in bf16 fp16 fp32; do pc "$tmp/pack.csv" "${PACK_SUITE_CONFIGS:-5}" --dtype "$dt"; done
  # the GPU tests' matrix; its problems whose rows are not on 16-byte packs (ld, or cols when
  # packed, not a multiple of 16 bytes' elements) again with more candidates
  python3 - tests/gpu/packs/softmax.jsonl "$tmp/odd.jsonl" <<'PY'
import json, sys
size = {"bf16": 2, "fp16": 2, "fp32": 4}
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        p = json.loads(line)
        if (p["ld"] or p["cols"]) % (16 // size[p["dtype"]]):
            out.write(line)
PY
  pc tests/gpu/packs/softmax.jsonl "${PACK_TEST_CONFIGS:-2}"
  pc "$tmp/odd.jsonl" "${PACK_ODD_CONFIGS:-3}"
  rm -rf "$store"/*/tmp
  mkdir -p "$(dirname "$PACK")"
  tar -C "$(dirname "$store")" -cJf "$PACK" store && ls -la "$PACK"
  exit 0
fi

T0=$(date +%s)
OUT=${OUT:-$PWD/softmax-out}
mkdir -p "$OUT"
export OUT

# The binaries were linked on the build machine: find cuBLASLt here if their run path misses it.
. scripts/gpu/cublaslt-path.sh
cublaslt_path build/tests/gemmtune_gpu_tests || cublaslt_path build/gemmtune

# The CuTe DSL pack (when carried): unpacked into a private store, trusted (native code built
# elsewhere: docs/kernel-packs.md), the CuTe DSL load-only, for the tests and the bench.
if [ -f "$PACK" ]; then
  store=${TMPDIR:-/tmp}/gemmtune-softmax-pack
  rm -rf "$store" && mkdir -p -m 700 "$store" && tar -C "$store" -xJf "$PACK"
  chmod -R go-w "$store"
  export GEMMTUNE_ARTIFACTS=$store/store GEMMTUNE_LOAD_ONLY=cutlass,cutedsl
  echo "== pack $PACK: $(find "$store" -name '*.bin' | wc -l) artifacts; $(build/gemmtune store trust "$store/store" 2>&1 | tail -1)"
fi

# 1. GPU tests
tests_rc=0
BIN=build/tests/gemmtune_gpu_tests
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  t=$(date +%s)
  GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python \
    timeout "${GPU_TESTS_TIMEOUT_S:-120}" "$BIN" \
    --gtest_filter='SoftmaxNative.*:SoftmaxCandidates.*:SoftmaxEngine.*:SoftmaxCheck.*:CutedslSoftmax.*' >"$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  echo "== gpu tests: rc=$tests_rc in $(($(date +%s) - t)) s"
  grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|^Expected|Which is|: WRONG|^\[==========\]" "$OUT/gpu_tests.log" | head -60
  [ "$tests_rc" = 124 ] && echo "== gpu tests: TIMED OUT"
fi

# 2. the suite (with the CuTe DSL pack when carried), or its rows in SOFTMAX_SHAPES
if [ -n "${SOFTMAX_SHAPES:-}" ]; then
  sub=$OUT/softmax-shapes-subset.csv
  awk -F, -v want="$SOFTMAX_SHAPES" 'BEGIN { n = split(want, w, ","); for (i = 1; i <= n; ++i) keep[w[i]] = 1 }
    NR == 1 || ($1 "x" $2) in keep' "$SUITE" >"$sub"
  SUITE=$sub
  echo "== suite: $(($(wc -l <"$SUITE") - 1)) rows of bench/suites/softmax-shapes.csv (SOFTMAX_SHAPES)"
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
