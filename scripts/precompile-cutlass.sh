#!/usr/bin/env bash
# Builds the CUTLASS kernel pack for the H200 runs on a machine with nvcc + CUTLASS (no GPU):
#
#   1. the bench set: every instance the llm-layers suite (bench/suites/llm_layers.csv x m in
#      {2048, 4096, 8192}) would try in bench/h200.py's terms (A row-major, B = W[n,k] i.e.
#      column-major, D row-major, no epilogue), bf16 and fp8 e4m3 with tensorwise scales -> bf16,
#      at $GEMMTUNE_CUTLASS_MAX_CONFIGS candidates per problem (default 16: the union is 20 configs
#      per dtype; instances do not depend on m, n, k);
#   2. the GPU correctness set of tests/gpu/test_cutlass.cpp (FIXED below: keep the two in sync):
#      one instance per variant class (epilogues, layouts, fp16, fp8 rowwise, swap-AB, clusters,
#      both schedules).
#
#   scripts/precompile-cutlass.sh [STORE]         # default STORE: artifacts-cutlass/ in the repo
#
# Idempotent: instances already in the store are skipped ("in store"). One nvcc at a time
# ($GEMMTUNE_NVCC_JOBS, default 1), niced. Each call's JSON lines (per instance; "nvcc_s" 0 for
# store hits) are appended to STORE/precompile.jsonl, with the load average at the call's start;
# the end prints the median nvcc time per instance from the store's metadata.
# Last, STORE is packed into STORE-pack/NAME.tar.xz (what to carry to the GPU machine: 1.5 MB for
# the 53 instances instead of 39 MiB; unpack it there and point GEMMTUNE_ARTIFACTS at it,
# docs/cutlass.md). The default paths match .gitignore's /artifacts-*/.
#
# Env: GEMMTUNE_CLI (default build/gemmtune), GEMMTUNE_NVCC_JOBS, GEMMTUNE_CUTLASS_MAX_CONFIGS,
# PRECOMPILE_PARTS (default "core tests bench-bf16 bench-fp8": the likely bench winners first).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STORE=$(realpath -m "${1:-$ROOT/artifacts-cutlass}")
GT=${GEMMTUNE_CLI:-$ROOT/build/gemmtune}
JOBS=${GEMMTUNE_NVCC_JOBS:-1}
PARTS=${PRECOMPILE_PARTS:-core tests bench-bf16 bench-fp8}
[ -x "$GT" ] || { echo "precompile-cutlass: $GT is not an executable (set GEMMTUNE_CLI)" >&2; exit 2; }
mkdir -p "$STORE"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
T0=$(date +%s)

# pc NAME SHAPES_CSV [precompile flags...]: one `gemmtune precompile` call, logged.
pc() {
  local name=$1 shapes=$2
  shift 2
  echo "== $(date -u +%H:%M:%S) $name (load $(cut -d' ' -f1-3 /proc/loadavg)): $*"
  local rc=0 load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  nice -n 10 "$GT" precompile "$shapes" --artifacts "$STORE" --jobs "$JOBS" --json "$TMP/$name.jsonl" "$@" || rc=$?
  if [ -f "$TMP/$name.jsonl" ]; then
    python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l); j["part"]=sys.argv[2]; j["loadavg"]=sys.argv[3]; print(json.dumps(j))' \
      "$TMP/$name.jsonl" "$name" "$load" >>"$STORE/precompile.jsonl"
  fi
  if [ "$rc" != 0 ]; then
    echo "== $name: FAILED (exit $rc)"
    FAILED=1
  fi
}

# shapes NAME "m,n,k" ...: a shapes CSV in $TMP.
shapes() {
  local f="$TMP/$1.csv"
  shift
  echo "m,n,k" >"$f"
  printf '%s\n' "$@" >>"$f"
  echo "$f"
}

# The bench set: the llm-layers suite at m >= 2048, as bench/h200.py poses it (layout rc, D row).
printf 'phase,m\nprefill,2048\nprefill,4096\nprefill,8192\n' >"$TMP/m_big.csv"
LLM="$ROOT/bench/suites/llm_layers.csv"
BF16=(--dtype bf16 --layout rc --d-layout r)
FP8=(--dtype e4m3 --scale tensorwise --out-dtype bf16 --layout rc --d-layout r)
S4K=$(shapes s4k "4096,4096,4096")
for part in $PARTS; do
  case "$part" in
    # The bench set's configs most likely to win at m >= 2048 (large tiles, clusters) first, so
    # that a pack cut short still serves the bench; bench-* below add the rest of the set.
    core)
      pc core-bf16-a "$S4K" "${BF16[@]}" --configs co128x256x64c1x1,co256x128x64c1x1,pp64x256x64c1x1,pp128x128x64c1x1,co128x128x64c1x1
      pc core-fp8-a "$S4K" "${FP8[@]}" --configs co128x128x128c1x1,co128x192x128c1x1,co256x64x128c1x1,pp64x128x128c1x1,pp64x192x128c1x1
      pc core-bf16-b "$S4K" "${BF16[@]}" --configs co128x256x64c2x1,co256x128x64c2x1,co128x256x64c1x2,co256x128x64c1x2
      pc core-fp8-b "$S4K" "${FP8[@]}" --configs co128x192x128c2x1,co128x192x128c1x2,co256x64x128c2x1,co256x64x128c1x2
      pc core-bf16-c "$S4K" "${BF16[@]}" --configs co128x128x64c2x1,co128x128x64c1x2,co128x192x64c1x1,co128x192x64c2x1
      pc core-fp8-c "$S4K" "${FP8[@]}" --configs co128x128x128c2x1,co128x128x128c1x2
      ;;
    # Everything configs_for() ranks for the suite at $GEMMTUNE_CUTLASS_MAX_CONFIGS (default 16).
    bench-bf16) pc bench-bf16 "$LLM" --m-values "$TMP/m_big.csv" "${BF16[@]}" ;;
    bench-fp8) pc bench-fp8 "$LLM" --m-values "$TMP/m_big.csv" "${FP8[@]}" ;;
    tests)
      # The correctness set: tests/gpu/test_cutlass.cpp's cases() (same instance classes, same
      # config ids). Sizes here only need to admit the configs (check()); the instance does not
      # depend on them.
      S=$(shapes t-bf16 "296,520,200")
      pc t-bf16-bias-gelu "$S" "${BF16[@]}" --bias --act gelu --configs co128x128x64c1x1
      pc t-bf16-beta-c "$S" "${BF16[@]}" --alpha 0.5 --beta 0.75 --configs pp64x128x64c1x1
      pc t-bf16-dcol-relu "$S" --dtype bf16 --layout rc --d-layout c --act relu --configs co128x128x64c1x2
      pc t-bf16-dcol-beta-bias "$S" --dtype bf16 --layout rc --d-layout c --beta=-1 --bias --configs co256x128x64c2x1
      pc t-fp16-crr-bias-silu "$S" --dtype fp16 --layout cr --d-layout r --bias --act silu --configs pp128x64x64c2x1
      pc t-fp16-beta-c "$S" --dtype fp16 --layout rc --d-layout r --alpha 1.5 --beta 0.5 --configs co128x256x64c1x1
      S8=$(shapes t-fp8 "300,528,464")
      pc t-e4m3-tw-bias-relu-fp16 "$S8" --dtype e4m3 --scale tensorwise --out-dtype fp16 --layout rc --d-layout r \
        --bias --act relu --configs co128x192x128c1x2
      pc t-e4m3-rowwise "$S8" --dtype e4m3 --scale rowwise --out-dtype bf16 --layout rc --d-layout r \
        --configs co128x128x128c2x1,pp64x128x128c1x1
      # swap-AB at m = 16 (kernel M = n, kernel N = m)
      S16=$(shapes t-m16 "16,1000,512")
      pc t-swap-bf16 "$S16" "${BF16[@]}" --configs pp64x64x64c1x1s,co128x64x64c1x1s
      pc t-swap-bf16-bias-silu "$S16" "${BF16[@]}" --bias --act silu --configs co128x64x64c1x1s
      pc t-swap-e4m3-rowwise "$S16" --dtype e4m3 --scale rowwise --out-dtype bf16 --layout rc --d-layout r \
        --configs pp64x64x128c1x1s
      ;;
    *) echo "precompile-cutlass: unknown part '$part'" >&2; exit 2 ;;
  esac
done

python3 - "$STORE" <<'EOF'
# nvcc seconds per instance from the store's metadata (every build records its own).
import json, pathlib, statistics, sys
store = pathlib.Path(sys.argv[1])
metas = [json.loads(p.read_text()) for p in store.glob("??/*.json")]
metas = [m for m in metas if m.get("backend") == "cutlass"]
size = sum(m.get("size", 0) for m in metas)
print(f"== store {store}: {len(metas)} CUTLASS instances, {size / 2**20:.1f} MiB")
s = sorted(m["nvcc_s"] for m in metas if m.get("nvcc_s"))
if s:
    print(f"== nvcc per instance: median {statistics.median(s):.1f} s, min {s[0]:.1f} s, max {s[-1]:.1f} s, "
          f"total {sum(s) / 60:.1f} min ({len(s)} builds; wall times, so they include CPU contention)")
EOF
PACK="$STORE-pack/$(basename "$STORE").tar.xz"
mkdir -p "$STORE-pack"
tar -C "$(dirname "$STORE")" --exclude=cutlass/tmp -cJf "$PACK.tmp" "$(basename "$STORE")" && mv "$PACK.tmp" "$PACK"
echo "== packed $PACK: $(du -h "$PACK" | cut -f1); $(($(date +%s) - T0)) s in all"
exit "$FAILED"
