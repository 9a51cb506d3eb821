#!/usr/bin/env bash
# Compares the engine's race with and without the GPU spin between flush and timed launch
# (TuneOptions::spin_us, $GEMMTUNE_RACE_SPIN_US), alternating, on the problems whose re-tune
# pick differed beyond noise in bench/results/2026-11-30-h200-cublaslt.json. Writes one JSON
# per tune (gemmtune tune --json) into $OUT/race-method/ and prints each tune's ranking.
# Runs on the GPU machine with build/ carried: bash bench/race-method.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/bench-out}/race-method
mkdir -p "$OUT"
# RACE_METHOD_VARIANTS: "spin" (default) compares spin 0 / 50; "sets" compares the rotated input
# copies with one input (GEMMTUNE_RACE_SETS=1), both with the spin, e.g. on the pair the last
# stability run disagreed on:
#   RACE_METHOD_VARIANTS=sets RACE_METHOD_PROBLEMS=512x10240x8192 bash bench/race-method.sh
# (A "duel" variant, single-launch duels, measured the same as the default and was removed with
# the option: bench/results/2026-11-30-s4-race-duel-single.md.)
problems=(${RACE_METHOD_PROBLEMS:-"1x128256x4096" "128x8192x1024" "64x8192x3584"})
variants=${RACE_METHOD_VARIANTS:-spin}
for rep in ${RACE_METHOD_REPS:-1 2}; do
  for spin in 0 50; do
    sets=""
    if [ "$variants" = sets ]; then sets=$([ "$spin" = 0 ] && echo 1 || echo ""); spin=50; fi
    for shape in "${problems[@]}"; do
      f="$OUT/${shape}-spin${spin}-sets${sets:-all}-rep${rep}.json"
      GEMMTUNE_RACE_SETS=$sets GEMMTUNE_RACE_SPIN_US=$spin build/gemmtune tune "$shape" --dtype e4m3 --backends cublaslt \
        --no-cache --json "$f" >/dev/null 2>"$f.err" || { echo "tune $shape failed"; cat "$f.err"; }
      python3 - "$f" "$spin" "$rep" "${sets:-all}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
res = [r for r in d["results"] if r.get("median_us")]
res.sort(key=lambda r: r["median_us"])
top = ", ".join(f'{r["name"].split(" stages")[0].replace("algo=66 ","")}:{r["median_us"]:.2f}' for r in res[:6])
win = d["kernel"]["name"].split(" stages")[0].replace("algo=66 ", "")
duels = "; ".join(n.split(": paired time ", 1)[-1] for n in d.get("notes", []) if n.startswith("duel:"))
print(f'{d["problem"]["m"]}x{d["problem"]["n"]}x{d["problem"]["k"]} spin={sys.argv[2]} sets={sys.argv[4]} rep={sys.argv[3]}: pick {win} | {top} | duels: {duels or "-"}')
PY
    done
  done
done
