#!/usr/bin/env bash
# GPU checks of the hardening work (issue 22, items 3 and 4), about a minute on the H200:
#   - a cached choice is verified once per process, on its first load (one reference run);
#   - a tuning cache that cannot be opened leaves the engine working without one;
#   - the engine's tune / cache / reload test around them.
# Then, when a kernel pack is given, the trust step on it: unpacked private, tuned load-only with
# CUTLASS before `gemmtune store trust` (its kernels refused: built elsewhere) and after (a
# CUTLASS winner from the pack).
#
#   scripts/gpu/harden.sh [PACK.tar.xz]      # logs under $OUT (default harden-out/)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/harden-out}
mkdir -p "$OUT"
BIN=${GPU_TESTS:-build/tests/gemmtune_gpu_tests}
CLI=${GEMMTUNE_CLI:-build/gemmtune}
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
# Binaries linked on the build machine: find cuBLASLt here if their run path misses it.
. scripts/gpu/cublaslt-path.sh
cublaslt_path "$BIN"
rc=0
"$BIN" --gtest_filter='Engine.CachedChoiceIsVerifiedOnItsFirstLoad:Engine.WorksWithoutACacheThatCannotBeOpened:Engine.TunesCachesAndReloads' \
  >"$OUT/harden-gpu-tests.log" 2>&1 || rc=1
echo "== GPU tests: exit $rc: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/harden-gpu-tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' "$OUT/harden-gpu-tests.log"

if [ -n "${1:-}" ]; then
  STORE_ROOT=$(mktemp -d)
  trap 'rm -rf "$STORE_ROOT"' EXIT
  STORE=$STORE_ROOT/store
  mkdir -p -m 700 "$STORE"
  tar -C "$STORE" --strip-components=1 -xJf "$1" && chmod -R go-w "$STORE" || { echo "== cannot unpack $1"; exit 1; }
  TUNE=("$CLI" tune 4096x4096x4096 --artifacts "$STORE" --load-only cutlass,cutedsl --backends cutlass --no-cache)
  {
    echo "== before trust (the pack's CUTLASS kernels are refused: not authenticated here):"
    "${TUNE[@]}" 2>&1 | tail -4
    echo "== trust:"
    "$CLI" store trust "$STORE" 2>&1 | tail -2
    echo "== after trust (the pack's CUTLASS kernels load and race):"
    "${TUNE[@]}" --json "$OUT/harden-pack-tune.json" 2>&1 | tail -8
  } >"$OUT/harden-pack.log" 2>&1
  cat "$OUT/harden-pack.log"
  python3 - "$OUT/harden-pack-tune.json" <<'PY' || { echo "== no CUTLASS winner from the trusted pack"; rc=1; }
import json, sys
r = json.load(open(sys.argv[1]))
w = [x for x in r["results"] if x.get("winner")]
sys.exit(0 if w and w[0]["backend"] == "cutlass" else 1)
PY
fi
exit $rc
