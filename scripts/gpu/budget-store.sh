#!/usr/bin/env bash
# On the GPU machine: does a tune from the kernels a compile budget builds pick as well as a tune
# from every candidate's kernel? (docs/compile-stage.md, "Compile budget")
#
#   scripts/gpu/budget-store.sh PACK.tar.xz BUDGET.list PROBLEMS.csv [tune flags...]
#
# PACK.tar.xz: an artifact store holding every CUTLASS, CuTe DSL and Triton candidate of the
# problems (`gemmtune precompile PROBLEMS` on the build machine), packed from inside the store
# folder; BUDGET.list: the store-relative paths of the artifacts that `gemmtune precompile
# --compile-budget N PROBLEMS` builds into an empty store (what a cold tune with that budget
# compiles). Both stores are unpacked private and trusted here (`gemmtune store trust`), then every
# problem (CSV header m,n,k) is tuned load-only for every toolchain (nothing compiles here), with
# no tuning cache: the full store twice, the budgeted store once. Every tune is one race
# (candidates interleaved), so the budgeted pick's median in a full race against that race's
# winner is a side-by-side comparison; the two full races' winners against each other give the
# noise, as does the winner's spread (p80 - p20) / median. Writes $OUT/budget-store.{md,json}
# and each tune's JSON; exit 0, or 1 when a tune failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 3 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
PACK=$(realpath "$1") LIST=$(realpath "$2") PROBLEMS=$(realpath "$3"); shift 3
OUT=${OUT:-$PWD/budget-out}
mkdir -p "$OUT"
CLI=${GEMMTUNE_CLI:-build/gemmtune}
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
. scripts/gpu/cublaslt-path.sh
cublaslt_path "$CLI"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The full store, and the budgeted one: the same store less the artifacts not in the list (the
# toolchain records and other non-artifact files kept).
for s in full budget; do
  mkdir -p -m 700 "$WORK/$s"
  tar -C "$WORK/$s" -xJf "$PACK" || { echo "budget-store: cannot unpack $PACK" >&2; exit 1; }
done
(cd "$WORK/budget" && find . -type f \( -name '*.bin' -o -name '*.json' \) -path './??/*' | sed 's|^\./||' | sort) >"$WORK/all.list"
sort "$LIST" | sed 's|^\./||' | grep -E '\.(bin|json)$' >"$WORK/keep.list"
comm -23 "$WORK/all.list" "$WORK/keep.list" | (cd "$WORK/budget" && xargs -r rm -f)
for s in full budget; do
  chmod -R go-w "$WORK/$s"
  "$CLI" store trust "$WORK/$s" >"$WORK/trust-$s.log" 2>&1 || { cat "$WORK/trust-$s.log"; exit 1; }
  echo "== $s store: $(find "$WORK/$s" -name '*.bin' | wc -l) artifacts"
done

rc=0
tail -n +2 "$PROBLEMS" | while IFS=, read -r m n k; do
  p=${m}x${n}x${k}
  for run in full1 budget full2; do
    s=${run%[12]}
    "$CLI" tune "$p" --no-cache --artifacts "$WORK/$s" --load-only cutlass,triton,cutedsl \
      --json "$OUT/tune-$p-$run.json" "$@" >"$OUT/tune-$p-$run.log" 2>&1 || { echo "== $p $run: tune failed"; tail -5 "$OUT/tune-$p-$run.log"; }
  done
  echo "== $p: $(grep -c . "$OUT/tune-$p-full1.log") lines (full1)"
done

python3 - "$OUT" "$PROBLEMS" <<'PY' || rc=1
import json, os, sys
out, problems = sys.argv[1], sys.argv[2]
rows, lines = [], []
for line in open(problems).read().split()[1:]:
    m, n, k = line.split(",")
    p = f"{m}x{n}x{k}"
    t = {r: json.load(open(f"{out}/tune-{p}-{r}.json")) for r in ("full1", "budget", "full2")}
    win = {r: next(x for x in t[r]["results"] if x["winner"]) for r in t}
    ran = {r: sum(x["status"] == "ok" for x in t[r]["results"]) for r in t}
    b = win["budget"]
    def in_full(r):  # the budgeted pick's median in full race r over that race's winner's
        x = next((x for x in t[r]["results"] if x["backend"] == b["backend"] and x["name"] == b["name"]), None)
        return None if x is None or x["median_us"] is None else x["median_us"] / win[r]["median_us"]
    row = {"problem": p, "budget_pick": f'{b["backend"]} {b["name"]}', "full_pick_1": f'{win["full1"]["backend"]} {win["full1"]["name"]}',
           "full_pick_2": f'{win["full2"]["backend"]} {win["full2"]["name"]}', "candidates_ok": ran,
           "budget_pick_over_full_winner_1": in_full("full1"), "budget_pick_over_full_winner_2": in_full("full2"),
           "full_winner_2_over_1": win["full2"]["median_us"] / win["full1"]["median_us"],
           "winner_us": {r: win[r]["median_us"] for r in t},
           "winner_spread_1": (win["full1"]["p80_us"] - win["full1"]["p20_us"]) / win["full1"]["median_us"]}
    rows.append(row)
    f = lambda v: "-" if v is None else f"{v:.3f}"
    lines.append(f'| {p} | {row["budget_pick"]} | {row["full_pick_1"]} | {row["full_pick_2"]} | {ran["budget"]} / {ran["full1"]} | '
                 f'{f(row["budget_pick_over_full_winner_1"])} | {f(row["budget_pick_over_full_winner_2"])} | {f(row["full_winner_2_over_1"])} | {f(row["winner_spread_1"])} |')
json.dump(rows, open(f"{out}/budget-store.json", "w"), indent=1)
md = ["| problem | budgeted store's pick | full store's pick (race 1) | (race 2) | candidates run: budgeted / full | budget pick / winner, race 1 | race 2 | full winner race 2 / race 1 | winner's spread, race 1 |",
      "|---|---|---|---|---|---|---|---|---|"] + lines
open(f"{out}/budget-store.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
exit $rc
