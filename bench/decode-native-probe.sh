#!/usr/bin/env bash
# The native decode GEMM probe (issue 14, docs/native-gemm.md): on the GPU machine,
#   1. the native GEMM kernels' GPU tests, NativeGemm.* (every offered config on the decode
#      matrix against the float64 host reference)            -> $OUT/native_tests.log
#   2. NativeGemmProbe.DISABLED_TimeEveryConfig: each decode problem of the suite, every native
#      config, every cuBLASLt candidate and a streaming read of
#      the weight's bytes, interleaved (cold L2)              -> $OUT/probe.txt
#   3. (PROBE_SUITE=1) `gemmtune suite` over bench/suites/llm_layers.csv at the decode m values (PROBE_M,
#      default 1,16) for each dtype of PROBE_DTYPES (default bf16,e4m3), backends
#      PROBE_BACKENDS (default native,cublaslt), PROBE_MAX_CONFIGS candidates per backend
#      (default 32): every candidate verified against the GPU reference and raced (cold L2,
#      events, medians: docs/tuning.md)                      -> $OUT/suite-<dtype>.csv
# and prints, per problem, the winner and the fastest cuBLASLt candidate.
#
#   run(command="bash bench/decode-native-probe.sh", carry=["build-dev"])  # GEMMTUNE_BIN=build-dev
#
# Environment: GEMMTUNE_BIN (folder with gemmtune and tests/gemmtune_gpu_tests, default build),
# PROBE_M, PROBE_DTYPES, PROBE_BACKENDS, PROBE_MAX_CONFIGS, SKIP_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/probe-out}
BIN=${GEMMTUNE_BIN:-build}
mkdir -p "$OUT"
M=${PROBE_M:-1,16}
MFILE=$OUT/m_values.csv
{ echo "phase,m"; for m in ${M//,/ }; do echo "decode,$m"; done; } > "$MFILE"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 300 "$BIN/tests/gemmtune_gpu_tests" --gtest_filter='NativeGemm.*' > "$OUT/native_tests.log" 2>&1
  echo "== NativeGemm tests: exit $?"; grep -E "^\[  (PASSED|FAILED) |checked|Failure" "$OUT/native_tests.log" | head -20
fi
GEMMTUNE_PROBE_M=$M timeout "${PROBE_TIMEOUT_S:-400}" \
  "$BIN/tests/gemmtune_gpu_tests" --gtest_also_run_disabled_tests --gtest_filter='NativeGemmProbe.*' > "$OUT/probe.txt" 2>&1
echo "== probe: exit $?"; grep -v "^\[" "$OUT/probe.txt"
[ "${PROBE_SUITE:-0}" = 1 ] || exit 0
for dt in $(echo "${PROBE_DTYPES:-bf16,e4m3}" | tr , ' '); do
  timeout 400 "$BIN/gemmtune" suite bench/suites/llm_layers.csv --m-values "$MFILE" --dtype "$dt" \
    --backends "${PROBE_BACKENDS:-native,cublaslt}" --max-configs "${PROBE_MAX_CONFIGS:-32}" --no-cache \
    --log-level warning --csv "$OUT/suite-$dt.csv" 2> "$OUT/suite-$dt.log"
  echo "== suite $dt: exit $?"
  python3 - "$OUT/suite-$dt.csv" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(list)
for r in rows:
    by[(r["model"], r["layer"], r["m"], r["n"], r["k"])].append(r)
def us(r):
    try: return float(r["median_us"])
    except ValueError: return float("inf")
print(f"{'problem':40s} {'winner':34s} {'us':>7s} {'best lt':>7s} {'lt dflt':>7s} {'nat best':>8s} wrong")
for key, rs in by.items():
    ok = [r for r in rs if r["correct"] in ("1", "true", "True")]
    win = next((r for r in rs if r["winner"] in ("1", "true", "True")), None)
    lt = min((us(r) for r in ok if r["backend"] == "cublaslt"), default=float("nan"))
    ltd = next((us(r) for r in rs if r["backend"] == "cublaslt" and r["default"] in ("1", "true", "True")), float("nan"))
    nat = min((us(r) for r in ok if r["backend"] == "native"), default=float("nan"))
    wrong = sum(1 for r in rs if r["status"] == "wrong")
    name = f"{key[0]}/{key[1]} m={key[2]} {key[3]}x{key[4]}"
    w = f"{win['backend']}:{win['candidate']}" if win else "-"
    print(f"{name:40s} {w[:34]:34s} {us(win) if win else float('nan'):7.2f} {lt:7.2f} {ltd:7.2f} {nat:8.2f} {wrong}")
PY
done
