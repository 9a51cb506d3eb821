#!/usr/bin/env bash
# Builds the CuTe DSL kernel pack for the H200 runs on any machine with the project's .venv
# (scripts/setup.sh installs the CuTe DSL wheel; no GPU needed): every artifact the llm-layers
# suite (bench/suites/llm_layers.csv x bench/suites/m_values.csv) would try, bf16 and fp8 e4m3
# with tensorwise and rowwise scales, plus the GPU test's problem matrix; and the softmax
# candidates of bench/suites/softmax.csv (bf16, fp16, fp32) and of the softmax GPU tests
# (tests/gpu/cutedsl_softmax_problems.hpp, the engine tests' shapes); then packs the store into
# artifacts-cutedsl-pack/store.tar.xz, what bench/device.sh unpacks on the GPU machine.
#
#   scripts/precompile-cutedsl.sh [STORE]        # default STORE: artifacts-cutedsl/store
#
# Idempotent (artifacts already in the store are skipped). About 8 minutes from empty on the
# 2-core build machine (the softmax part: ~710 artifacts). Artifacts are keyed by the bytes of
# python/gemmtune/cutedsl/: after an edit there, start from an empty STORE so the pack carries no stale entries (the softmax
# artifacts by the softmax_* files there too, and by compile.py and runtime.cpp).
# Env: GEMMTUNE_CLI (default build/gemmtune), GEMMTUNE_HOST_TESTS (default
# build/tests/gemmtune_host_tests), PRECOMPILE_PARTS (default "gemm softmax").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STORE=$(realpath -m "${1:-$ROOT/artifacts-cutedsl/store}")
GT=${GEMMTUNE_CLI:-$ROOT/build/gemmtune}
HT=${GEMMTUNE_HOST_TESTS:-$ROOT/build/tests/gemmtune_host_tests}
for x in "$GT" "$HT"; do
  [ -x "$x" ] || { echo "precompile-cutedsl: $x is not an executable (run scripts/setup.sh)" >&2; exit 2; }
done
mkdir -p "$STORE"
cd "$ROOT"
suite=(bench/suites/llm_layers.csv --m-values bench/suites/m_values.csv --backend cutedsl --artifacts "$STORE")
for part in ${PRECOMPILE_PARTS:-gemm softmax}; do
  case "$part" in
    gemm)
      "$GT" precompile "${suite[@]}" --dtype bf16
      "$GT" precompile "${suite[@]}" --dtype e4m3
      "$GT" precompile "${suite[@]}" --dtype e4m3 --scale rowwise
      GEMMTUNE_CUTEDSL_PRECOMPILE_GPU_MATRIX=1 GEMMTUNE_ARTIFACTS=$STORE "$HT" --gtest_filter='CutedslPrecompile.*'
      ;;
    softmax)
      GEMMTUNE_CUTEDSL_PRECOMPILE_SOFTMAX=1 GEMMTUNE_SOFTMAX_SUITE=$ROOT/bench/suites/softmax.csv GEMMTUNE_ARTIFACTS=$STORE \
        "$HT" --gtest_filter='CutedslSoftmaxPrecompile.*'
      ;;
    *) echo "precompile-cutedsl: unknown part '$part' (gemm, softmax)" >&2; exit 2 ;;
  esac
done
mkdir -p "$ROOT/artifacts-cutedsl-pack"
tar -C "$(dirname "$STORE")" -cf - "$(basename "$STORE")" | xz -T2 -6 >"$ROOT/artifacts-cutedsl-pack/store.tar.xz.tmp"
mv "$ROOT/artifacts-cutedsl-pack/store.tar.xz.tmp" "$ROOT/artifacts-cutedsl-pack/store.tar.xz"
echo "precompile-cutedsl: $(find "$STORE" -type f | wc -l) files in $STORE; pack: $(du -h "$ROOT/artifacts-cutedsl-pack/store.tar.xz" | cut -f1)"
