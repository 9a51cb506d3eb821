#!/usr/bin/env bash
# On the GPU machine: every GPU test on a kernel pack, then a four-backend smoke tune that
# compares CLIs side by side (a change's build against the build before it), interleaved.
#
#   scripts/device-check.sh PACK.tar.xz [CLI...]     # CLIs default: build/gemmtune
#
# PACK (scripts/precompile.sh) is unpacked into a private store, trusted (`gemmtune store trust`:
# a pack is native code built elsewhere) and used load-only for CUTLASS and the CuTe DSL (this
# machine has neither), with the GPU tests' complete-pack check on. The GPU
# test binary is build/tests/gemmtune_gpu_tests ($GPU_TESTS). Each CLI tunes every problem of
# SMOKE (default below) with --no-cache, round-robin; each call's report and JSON go to
# $OUT/smoke.tar.gz, and $OUT/smoke.tsv gets one line per call (cli, problem, backend, candidate,
# median_us, seconds).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PACK=${1:?usage: scripts/device-check.sh PACK.tar.xz [CLI...]}
shift
CLIS=("$@")
[ ${#CLIS[@]} -gt 0 ] || CLIS=(build/gemmtune)
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
STORE_ROOT=$(mktemp -d)
trap 'rm -rf "$STORE_ROOT"' EXIT
STORE=$STORE_ROOT/store
mkdir -p -m 700 "$STORE"
tar -C "$STORE" --strip-components=1 -xJf "$PACK" || { echo "== cannot unpack $PACK"; exit 1; }
chmod -R go-w "$STORE"  # a store others can write is refused (docs/kernel-packs.md)
echo "== pack $PACK: $(find "$STORE" -name '*.bin' | wc -l) artifacts"

export GEMMTUNE_ARTIFACTS=$STORE GEMMTUNE_LOAD_ONLY=cutlass,cutedsl GEMMTUNE_TEST_CUTLASS_PACK=1
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
# The binaries were linked on the build machine: find cuBLASLt here if their run path misses it
# (the CUDA toolkit's, else the one PyTorch's wheels bring).
. scripts/gpu/cublaslt-path.sh
cublaslt_path "${CLIS[0]}" && echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
# The pack was built on another machine: trust it explicitly (docs/kernel-packs.md), once the
# CLIs find their libraries, with the first CLI that has the command (a build from before the
# trust step loads packs without it).
for cli in "${CLIS[@]}"; do
  if "$cli" store --help >/dev/null 2>&1; then
    echo "== $("$cli" store trust "$STORE" 2>&1 | tail -1)"
    break
  fi
done
echo "== $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader 2>&1 | head -1)"

rc=0
if [ "${SKIP_GPU_TESTS:-0}" != 1 ]; then
  T0=$(date +%s)
  "${GPU_TESTS:-build/tests/gemmtune_gpu_tests}" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} >"$OUT/gpu-tests.log" 2>&1 || rc=1
  echo "== GPU tests: exit $rc in $(($(date +%s) - T0)) s: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/gpu-tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/gpu-tests.log" | head -20
fi

SMOKE=${SMOKE:-"4096x4096x4096 16x4096x4096 2048x28672x8192 8192x8192x8192 1x6144x4096 --dtype=e4m3:4096x4096x4096 --dtype=e4m3:16x8192x8192 --dtype=e4m3:8192x8192x8192"}
printf 'cli\tproblem\tbackend\tcandidate\tmedian_us\tseconds\n' >"$OUT/smoke.tsv"
mkdir -p "$OUT/smoke"
i=0
for spec in $SMOKE; do
  flags=""; shape=$spec
  [[ $spec == *:* ]] && flags=${spec%%:*} && shape=${spec#*:}
  for cli in "${CLIS[@]}"; do
    i=$((i + 1))
    json="$OUT/smoke/$i.json"
    t0=$(date +%s.%N)
    "$cli" tune "$shape" $flags --no-cache --json "$json" >"$OUT/smoke/$i.txt" 2>&1 || echo "== $cli $shape $flags: exit $?"
    t1=$(date +%s.%N)
    python3 - "$json" "$cli" "$shape $flags" "$t0" "$t1" >>"$OUT/smoke.tsv" <<'PY'
import json, sys
path, cli, problem, t0, t1 = sys.argv[1:]
secs = float(t1) - float(t0)
try:
    r = json.load(open(path))
    w = next(x for x in r["results"] if x.get("winner"))
    print(f"{cli}\t{problem}\t{w['backend']}\t{w['id']}\t{w['median_us']:.2f}\t{float(secs):.1f}")
except Exception as e:  # a failed tune: its line says so
    print(f"{cli}\t{problem}\t-\tERROR {type(e).__name__}\t-\t{float(secs):.1f}")
PY
  done
done
tar -C "$OUT" -czf "$OUT/smoke.tar.gz" smoke && rm -rf "$OUT/smoke"
cat "$OUT/smoke.tsv"
exit $rc
