#!/usr/bin/env bash
# On the GPU machine: compute-sanitizer memcheck over every kernel family of the GPU tests, one
# sanitizer process per family, 0 errors expected. The fault-injection tests (FaultKind.*,
# Isolation.*: deliberate illegal addresses, traps, out-of-bounds writes) are left out.
#
#   scripts/gpu/memcheck.sh          # from the repo root; build/tests/gemmtune_gpu_tests (or
#                                    # BUILD=dir), results in $OUT (memcheck-summary.txt, memcheck.tar.gz)
#
# MEMCHECK_FAMILIES (space-separated names of the mc lines below) runs a subset.
# Families: cuBLASLt (its baseline test), native GEMM, native softmax, Triton (every cuBLASLt and
# Triton GEMM candidate; every native and Triton softmax candidate; the grouped GEMM candidates),
# the GPU reference and checks, CUTLASS and the CuTe DSL (with the block-scaled FP8 candidates of
# every backend; when $GEMMTUNE_ARTIFACTS holds their packs, else those tests skip),
# and the engine twice: in-process (kernels in the test process) and isolated (kernels in the
# tuning helper, a child process the sanitizer follows: --target-processes all).
# Processes with Python compile workers run with one worker: the sanitizer injected into several
# forked workers died with SIGSEGV in an earlier session (bench/results/2026-11-30-s5-memcheck-matrix.md).
# The sanitizer: $COMPUTE_SANITIZER, else compute-sanitizer on PATH, else /usr/local/cuda/bin's,
# else the one in a carried wheel build-dev/nvidia_cuda_sanitizer_api-*.whl (14 MB; on a build
# machine: pip download --no-deps nvidia-cuda-sanitizer-api==13.0.85 -d build-dev), unpacked
# here; exit 3 when there is none.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TESTS=$BUILD/tests/gemmtune_gpu_tests
[ -x "$TESTS" ] || TESTS=$BUILD/gemmtune_gpu_tests
OUT=${OUT:-$PWD/memcheck-out}
mkdir -p "$OUT/mc"
SUMMARY=$OUT/memcheck-summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
[ -x "$TESTS" ] || { say "memcheck: $TESTS is missing"; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SAN=${COMPUTE_SANITIZER:-}
for s in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda/bin/compute-sanitizer; do
  [ -z "$SAN" ] && [ -n "$s" ] && [ -x "$s" ] && SAN=$s
done
whl=$(ls build-dev/nvidia_cuda_sanitizer_api-*.whl 2>/dev/null | head -1)
if [ -z "$SAN" ] && [ -n "$whl" ]; then
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$WORK/san" &&
    chmod +x "$WORK"/san/nvidia/cu*/bin/compute-sanitizer && SAN=$(ls "$WORK"/san/nvidia/cu*/bin/compute-sanitizer | head -1)
fi
[ -n "$SAN" ] && [ -x "$SAN" ] || { say "memcheck: no compute-sanitizer (set COMPUTE_SANITIZER, or carry the wheel)"; exit 3; }
say "== $SAN: $("$SAN" --version 2>&1 | grep -i version | head -1); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

export TMPDIR=$WORK/tmp XDG_CACHE_HOME=$WORK/xdg
mkdir -p "$TMPDIR"
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
# A sanitized kernel runs 10-100x slower: the helper's watchdog must not take that for a hang.
export GEMMTUNE_CANDIDATE_TIMEOUT=600
unset GEMMTUNE_ISOLATION

rc=0
# mc NAME LIMIT_S TARGET FILTER [VAR=VALUE...]: one sanitizer process.
mc() {
  local name=$1 lim=$2 target=$3 filter=$4 t0 r log
  shift 4
  # MEMCHECK_FAMILIES="cublaslt native-gemm ...": only those (a call with little device time left).
  if [ -n "${MEMCHECK_FAMILIES:-}" ] && [[ " $MEMCHECK_FAMILIES " != *" $name "* ]]; then return; fi
  log=$OUT/mc/$name.log
  # Compile first, without the sanitizer and with every compile worker: the compilers are not
  # what is checked, and under it one worker compiling every Triton candidate runs past the
  # limit. The sanitized run then loads every kernel from the artifact store.
  local warm_env=() a
  for a in "$@"; do [[ $a == GEMMTUNE_COMPILE_WORKERS=* ]] || warm_env+=("$a"); done
  env "${warm_env[@]}" timeout "$lim" "$TESTS" --gtest_filter="$filter:-FaultKind*:Isolation.*" >"$OUT/mc/$name.warm.log" 2>&1
  t0=$(date +%s)
  env "$@" timeout "$lim" "$SAN" --tool memcheck --error-exitcode 9 --target-processes "$target" \
    "$TESTS" --gtest_filter="$filter:-FaultKind*:Isolation.*" >"$log" 2>&1
  r=$?
  local errors
  errors=$(grep -hE 'ERROR SUMMARY' "$log" | tail -1)
  [ $r -eq 0 ] || rc=1
  say "$name: exit $r in $(($(date +%s) - t0)) s; ${errors:-no summary}; $(grep -hE '^\[  (PASSED|FAILED)  \]' "$log" | tr '\n' ' ')"
  grep -hE 'Invalid|out of bounds|Address .* is|^\[  FAILED' "$log" | head -5 | tee -a "$SUMMARY"
}
mc cublaslt 60 application-only 'CublasLtBaseline.*'
mc native-gemm 90 application-only 'NativeGemm.*:Overlap.Native*'
mc native-softmax 120 application-only 'SoftmaxNative.*'
mc reference 90 application-only 'Reference.*:Compare.*:SoftmaxCheck.*'
mc triton-gemm 300 application-only 'Candidates.*' GEMMTUNE_COMPILE_WORKERS=1
mc triton-softmax 150 application-only 'SoftmaxCandidates.*' GEMMTUNE_COMPILE_WORKERS=1
mc triton-grouped 150 application-only 'Grouped*' GEMMTUNE_COMPILE_WORKERS=1
mc cutlass-cutedsl 180 application-only 'Cutlass.*:Cutedsl.*:CutedslSoftmax.*:Fp8Block.*:Overlap.CutedslCutlass*' GEMMTUNE_COMPILE_WORKERS=1
mc engine-in-process 150 application-only 'Engine.*:SoftmaxEngine.*' GEMMTUNE_ISOLATION=in-process GEMMTUNE_COMPILE_WORKERS=1
mc engine-isolated 200 all 'Engine.*:SoftmaxEngine.*' GEMMTUNE_COMPILE_WORKERS=1
tar -C "$OUT" -czf "$OUT/memcheck.tar.gz" mc && rm -rf "$OUT/mc"
say "== memcheck.sh: exit $rc"
exit $rc
