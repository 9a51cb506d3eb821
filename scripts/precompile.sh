#!/usr/bin/env bash
# Builds the kernel pack for the GPU machine on a build machine (nvcc, CUTLASS headers and the
# CuTe DSL in .venv: scripts/setup.sh; no GPU needed), with `gemmtune precompile` only, into one
# artifact store, then packs it into STORE.tar.xz (what bench/device.sh unpacks there; the GPU
# machine runs the pack load-only for CUTLASS and the CuTe DSL, docs/kernel-packs.md).
#
#   scripts/precompile.sh [STORE]       # default STORE: artifacts-pack/store in the repo
#
# Parts ($PRECOMPILE_PARTS, default all, in this order):
#   cutlass-core   the CUTLASS configs most likely to win at m >= 2048 (large tiles, clusters),
#                  bf16 and fp8, so that a pack cut short still serves the bench
#   cutlass-tests  tests/gpu/test_cutlass.cpp's fixed instances (keep the two in step)
#   cutlass-bench  every CUTLASS candidate of the llm-layers suite at m in {2048, 4096, 8192}
#                  (bf16, fp8 tensorwise and block)
#   cutedsl        every CuTe DSL GEMM candidate of llm-layers x m_values (bf16, fp8 tensorwise,
#                  rowwise and block)
#   softmax        every CuTe DSL and Triton softmax candidate of bench/suites/softmax.csv
#                  (bf16, fp16, fp32)
#   grouped        every CUTLASS and CuTe DSL grouped candidate of bench/suites/grouped_moe.jsonl
#                  (the MoE experts scripts/gpu/grouped_bench.py times: Mixtral-8x7B, DeepSeek-V3, bf16 and e4m3)
#   gpu-tests      the CuTe DSL GPU tests' problems (tests/gpu/packs/*.jsonl; a host test keeps
#                  them equal to the tests' matrices: GEMM, softmax, grouped), and CUTLASS's for
#                  the block-scaled and grouped ones
# Idempotent (artifacts already in the store are store hits). Extra flags for every call:
# $PRECOMPILE_FLAGS (e.g. "--nvcc-jobs 1"; "--load-only cutlass,cutedsl" builds nothing and
# reports a fixed-id part's (--configs) missing artifacts as failures). Each call's JSON lines go to STORE/precompile.jsonl.
# Env: GEMMTUNE_CLI (default build/gemmtune).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STORE=$(realpath -m "${1:-$ROOT/artifacts-pack/store}")
GT=${GEMMTUNE_CLI:-$ROOT/build/gemmtune}
PARTS=${PRECOMPILE_PARTS:-cutlass-core cutlass-tests cutlass-bench cutedsl softmax grouped gpu-tests}
read -r -a FLAGS <<<"${PRECOMPILE_FLAGS:-}"
[ -x "$GT" ] || { echo "precompile: $GT is not an executable (run scripts/setup.sh)" >&2; exit 2; }
mkdir -p -m 700 "$STORE"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
T0=$(date +%s)

# pc NAME SUITE [precompile flags...]: one `gemmtune precompile` call, logged.
pc() {
  local name=$1 suite=$2
  shift 2
  echo "== $(date -u +%H:%M:%S) $name (load $(cut -d' ' -f1-3 /proc/loadavg)): $*"
  if ! nice -n 10 "$GT" precompile "$suite" --artifacts "$STORE" --json "$TMP/$name.jsonl" "$@" "${FLAGS[@]}" \
      2> >(grep -v ": in store$" >&2); then
    echo "== $name: FAILED"
    FAILED=1
  fi
  [ -f "$TMP/$name.jsonl" ] && sed "s/^{/{\"part\":\"$name\",/" "$TMP/$name.jsonl" >>"$STORE/precompile.jsonl"
  return 0
}

# shapes NAME "m,n,k" ...: a shapes CSV in $TMP.
shapes() {
  local f="$TMP/$1.csv"
  shift
  echo "m,n,k" >"$f"
  printf '%s\n' "$@" >>"$f"
  echo "$f"
}

printf 'phase,m\nprefill,2048\nprefill,4096\nprefill,8192\n' >"$TMP/m_big.csv"
LLM="$ROOT/bench/suites/llm_layers.csv"
MV="$ROOT/bench/suites/m_values.csv"
BF16=(--dtype bf16 --layout rc --d-layout r)
FP8=(--dtype e4m3 --scale tensorwise --out-dtype bf16 --layout rc --d-layout r)
S4K=$(shapes s4k "4096,4096,4096")
for part in $PARTS; do
  case "$part" in
    cutlass-core)
      C=(--backends cutlass --configs)
      pc core-bf16-a "$S4K" "${BF16[@]}" "${C[@]}" co128x256x64c1x1,co256x128x64c1x1,pp64x256x64c1x1,pp128x128x64c1x1,co128x128x64c1x1
      pc core-fp8-a "$S4K" "${FP8[@]}" "${C[@]}" co128x128x128c1x1,co128x192x128c1x1,co256x64x128c1x1,pp64x128x128c1x1,pp64x192x128c1x1
      pc core-bf16-b "$S4K" "${BF16[@]}" "${C[@]}" co128x256x64c2x1,co256x128x64c2x1,co128x256x64c1x2,co256x128x64c1x2
      pc core-fp8-b "$S4K" "${FP8[@]}" "${C[@]}" co128x192x128c2x1,co128x192x128c1x2,co256x64x128c2x1,co256x64x128c1x2
      pc core-bf16-c "$S4K" "${BF16[@]}" "${C[@]}" co128x128x64c2x1,co128x128x64c1x2,co128x192x64c1x1,co128x192x64c2x1
      pc core-fp8-c "$S4K" "${FP8[@]}" "${C[@]}" co128x128x128c2x1,co128x128x128c1x2
      ;;
    cutlass-tests)
      # tests/gpu/test_cutlass.cpp's cases(): the same instance classes and config ids. Sizes
      # here only need to admit the configs; the instance does not depend on them.
      C=(--backends cutlass --configs)
      S=$(shapes t-bf16 "296,520,200")
      pc t-bf16-bias-gelu "$S" "${BF16[@]}" --bias --act gelu "${C[@]}" co128x128x64c1x1
      pc t-bf16-beta-c "$S" "${BF16[@]}" --alpha 0.5 --beta 0.75 "${C[@]}" pp64x128x64c1x1
      pc t-bf16-dcol-relu "$S" --dtype bf16 --layout rc --d-layout c --act relu "${C[@]}" co128x128x64c1x2
      pc t-bf16-dcol-beta-bias "$S" --dtype bf16 --layout rc --d-layout c --beta=-1 --bias "${C[@]}" co256x128x64c2x1
      pc t-fp16-crr-bias-silu "$S" --dtype fp16 --layout cr --d-layout r --bias --act silu "${C[@]}" pp128x64x64c2x1
      pc t-fp16-beta-c "$S" --dtype fp16 --layout rc --d-layout r --alpha 1.5 --beta 0.5 "${C[@]}" co128x256x64c1x1
      S8=$(shapes t-fp8 "300,528,464")
      pc t-e4m3-tw-bias-relu-fp16 "$S8" --dtype e4m3 --scale tensorwise --out-dtype fp16 --layout rc --d-layout r \
        --bias --act relu "${C[@]}" co128x192x128c1x2
      pc t-e4m3-rowwise "$S8" --dtype e4m3 --scale rowwise --out-dtype bf16 --layout rc --d-layout r \
        "${C[@]}" co128x128x128c2x1,pp64x128x128c1x1
      S16=$(shapes t-m16 "16,1000,512")  # swap-AB at m = 16 (kernel M = n, kernel N = m)
      pc t-swap-bf16 "$S16" "${BF16[@]}" "${C[@]}" pp64x64x64c1x1s,co128x64x64c1x1s
      pc t-swap-bf16-bias-silu "$S16" "${BF16[@]}" --bias --act silu "${C[@]}" co128x64x64c1x1s
      pc t-swap-e4m3-rowwise "$S16" --dtype e4m3 --scale rowwise --out-dtype bf16 --layout rc --d-layout r \
        "${C[@]}" pp64x64x128c1x1s
      ;;
    cutlass-bench)
      pc bench-bf16 "$LLM" --m-values "$TMP/m_big.csv" "${BF16[@]}" --backends cutlass
      pc bench-fp8 "$LLM" --m-values "$TMP/m_big.csv" "${FP8[@]}" --backends cutlass
      pc bench-fp8-block "$LLM" --m-values "$TMP/m_big.csv" --dtype e4m3 --scale block --out-dtype bf16 --layout rc \
        --d-layout r --backends cutlass
      ;;
    cutedsl)
      pc cutedsl-bf16 "$LLM" --m-values "$MV" --dtype bf16 --backends cutedsl
      pc cutedsl-fp8 "$LLM" --m-values "$MV" --dtype e4m3 --backends cutedsl
      pc cutedsl-fp8-rowwise "$LLM" --m-values "$MV" --dtype e4m3 --scale rowwise --backends cutedsl
      pc cutedsl-fp8-block "$LLM" --m-values "$MV" --dtype e4m3 --scale block --out-dtype bf16 --layout rc \
        --d-layout r --backends cutedsl
      ;;
    softmax)
      for t in bf16 fp16 fp32; do pc "softmax-$t" "$ROOT/bench/suites/softmax.csv" --dtype "$t" --backends cutedsl,triton; done
      ;;
    grouped)
      pc grouped-moe "$ROOT/bench/suites/grouped_moe.jsonl" --backends cutlass,cutedsl
      ;;
    gpu-tests)
      pc gpu-cutedsl-gemm "$ROOT/tests/gpu/packs/cutedsl_gemm.jsonl" --backends cutedsl
      pc gpu-softmax "$ROOT/tests/gpu/packs/softmax.jsonl" --backends cutedsl
      pc gpu-fp8-block "$ROOT/tests/gpu/packs/fp8_block.jsonl" --backends cutedsl,cutlass
      pc gpu-overlap "$ROOT/tests/gpu/packs/overlap.jsonl" --backends cutedsl,cutlass
      pc gpu-cutlass-grouped "$ROOT/tests/gpu/packs/grouped.jsonl" --backends cutlass
      pc gpu-cutedsl-grouped "$ROOT/tests/gpu/packs/cutedsl_grouped.jsonl" --backends cutedsl
      ;;
    *) echo "precompile: unknown part '$part'" >&2; exit 2 ;;
  esac
done

PACK="$STORE.tar.xz"
tar -C "$(dirname "$STORE")" --exclude='*/tmp' -cf - "$(basename "$STORE")" | xz -T2 -6 >"$PACK.tmp" && mv "$PACK.tmp" "$PACK"
echo "== $(find "$STORE" -name '*.bin' | wc -l) artifacts in $STORE; pack $PACK: $(du -h "$PACK" | cut -f1); $(($(date +%s) - T0)) s"
exit "$FAILED"
