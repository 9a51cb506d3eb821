#!/usr/bin/env bash
# Issue 18 on the H200 (grouped GEMM), in about 4 minutes:
#   1. scripts/gpu/grouped_bench.py --engine: every Triton grouped config checked against float64
#      per group (odd cases and every bench case), timed against torch._grouped_mm and a torch.mm
#      loop on the issue's shapes, and gemmtune.torch.grouped_mm (the engine's tuned pick, through
#      build/libgemmtune_c.so) beside them, with the dense loop of the engine's cuBLASLt pick; fp8
#      rowwise beside torch._scaled_grouped_mm and the dense torch._scaled_mm  -> $OUT/grouped.{md,json,log}
#   2. the grouped GPU tests (GroupedCandidates.*, GroupedCheck.*, GroupedEngine.*, GroupedTiming.*)  -> $OUT/gpu_tests.log
#   3. the CLI: `gemmtune tune grouped` on two shapes, twice (the second from the cache)  -> $OUT/cli-*.json
#   4. the CLI: fp8 grouped (Mixtral up, 512 rows per group), rowwise and block scales, and the dense
#      fp8 pick of the same total rows (4096x14336x4096, cuBLASLt)  -> $OUT/cli-fp8-*.json
# Logs and the CLI's answers come back in $OUT/logs.tar.xz (at most 8 files come back).
# GROUPED_BENCH_ONLY=1: part 1 alone; GROUPED_SKIP_BENCH=1: parts 2-4 alone; GROUPED_BENCH_ARGS: more
# arguments to grouped_bench.py (e.g. "--no-check-all --iters 6" for a shorter run).
#
#   run(command="bash scripts/gpu/grouped.sh",
#       carry=["build/libgemmtune_c.so", "build/gemmtune", "build/tests/gemmtune_gpu_tests",
#              "artifacts-pack/store.tar.xz"])   (move bench/results aside: tree + carry < 64 MiB)
# (artifacts-pack/store.tar.xz optional: scripts/precompile.sh with PRECOMPILE_PARTS="gpu-tests grouped"
# builds CUTLASS's grouped instances for the tests and the bench's shapes.)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
OUT=${OUT:-$PWD/grouped-out}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# With a kernel pack carried (artifacts-pack/store.tar.xz: scripts/precompile.sh's gpu-tests and
# grouped parts), CUTLASS's grouped instances are tested and raced from it.
source scripts/gpu/pack.sh
pack_unpack || exit 1
export GEMMTUNE_CACHE=$work/tuning.sqlite GEMMTUNE_ARTIFACTS=${GEMMTUNE_ARTIFACTS:-$work/artifacts}
export GEMMTUNE_PYTHON=$(command -v python3) GEMMTUNE_PYTHON_DIR=$PWD/python GEMMTUNE_TUNER=$PWD/build/gemmtune
export GEMMTUNE_LIB=$PWD/build/libgemmtune_c.so
# The binaries were linked on the build machine: find cuBLASLt here if their run path misses it.
if ldd build/libgemmtune_c.so 2>/dev/null | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
  done
fi
pack_trust

# 1. the kernel and the engine against torch (GROUPED_SKIP_BENCH=1: parts 2-4 alone)
bench_rc=0
if [ "${GROUPED_SKIP_BENCH:-0}" != 1 ]; then
  python3 scripts/gpu/grouped_bench.py --out "$OUT" --engine ${GROUPED_BENCH_ARGS:-} >"$OUT/grouped.log" 2>&1
  bench_rc=$?
  grep -E "summary|FAIL|engine:" "$OUT/grouped.log" | head -20
  echo "== bench: rc=$bench_rc after $(($(date +%s) - T0)) s"
fi

# GROUPED_BENCH_ONLY=1: the bench alone (parts 2-4 skipped).
tests_rc=0 cli_rc=0
if [ "${GROUPED_BENCH_ONLY:-0}" != 1 ]; then
# 2. GPU tests (a fresh cache; the artifact store is shared with the bench's engine)
t=$(date +%s)
timeout "${GPU_TESTS_TIMEOUT_S:-150}" build/tests/gemmtune_gpu_tests \
  --gtest_filter='GroupedCandidates.*:GroupedCheck.*:GroupedEngine.*:GroupedTiming.*' >"$OUT/gpu_tests.log" 2>&1
tests_rc=$?
echo "== gpu tests: rc=$tests_rc in $(($(date +%s) - t)) s"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Failure|^Expected|Which is|: WRONG|^\[==========\]" "$OUT/gpu_tests.log" | head -40

# 3. the CLI, twice per problem (the second answer comes from the cache)
for args in "8x14336x4096 --rows-per-group 512" "32x7168x2048 --rows-per-group 64 --layout masked --skew 1"; do
  name=$(echo "$args" | tr ' ' '_' | tr -d '-')
  for pass in 1 2; do
    timeout 60 build/gemmtune tune grouped $args --json "$OUT/cli-$name-$pass.json" >"$OUT/cli-$name-$pass.txt" 2>&1 || cli_rc=1
  done
  head -30 "$OUT/cli-$name-1.txt"
  grep -E "cache|key" "$OUT/cli-$name-2.txt" | head -3
done
# 4. fp8 grouped (e4m3 rowwise) beside the dense fp8 pick of the same total rows (cuBLASLt candidates)
timeout 60 build/gemmtune tune grouped 8x14336x4096 --rows-per-group 512 --dtype e4m3 --scale rowwise \
  --json "$OUT/cli-fp8-grouped.json" >"$OUT/cli-fp8-grouped.txt" 2>&1 || cli_rc=1
timeout 60 build/gemmtune tune 4096x14336x4096 --dtype e4m3 --scale rowwise --backends cublaslt \
  --json "$OUT/cli-fp8-dense.json" >"$OUT/cli-fp8-dense.txt" 2>&1 || cli_rc=1
# the same with block scales (DeepSeek-V3's), grouped and dense
timeout 60 build/gemmtune tune grouped 8x14336x4096 --rows-per-group 512 --dtype e4m3 --scale block \
  --json "$OUT/cli-fp8-block-grouped.json" >"$OUT/cli-fp8-block-grouped.txt" 2>&1 || cli_rc=1
timeout 60 build/gemmtune tune 4096x14336x4096 --dtype e4m3 --scale block --backends cublaslt \
  --json "$OUT/cli-fp8-block-dense.json" >"$OUT/cli-fp8-block-dense.txt" 2>&1 || cli_rc=1
head -8 "$OUT/cli-fp8-grouped.txt"; head -8 "$OUT/cli-fp8-dense.txt"
head -12 "$OUT/cli-fp8-block-grouped.txt"; head -8 "$OUT/cli-fp8-block-dense.txt"
fi
# At most 8 files come back from $OUT: the bench's table and JSON stay, the rest goes in one tar.
(cd "$OUT" && tar -cJf logs.tar.xz $(ls grouped.log gpu_tests.log cli-* 2>/dev/null) && rm -f gpu_tests.log cli-*)
echo "== total $(($(date +%s) - T0)) s; bench rc=$bench_rc, tests rc=$tests_rc, cli rc=$cli_rc"
[ "$tests_rc" != 0 ] && exit 3
[ "$cli_rc" != 0 ] && exit 4
exit "$bench_rc"
