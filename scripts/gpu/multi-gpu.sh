#!/usr/bin/env bash
# On the GPU machine: `gemmtune suite --gpus` (docs/multi-gpu.md) against the plain suite, same
# problems, fresh caches: wall times, and whether both pick the same kernel (else how far apart the
# two picks' medians are, against the larger p20..p80 spread). With one GPU this checks the
# worker path end to end; with several it measures the speed-up. A third run answers everything
# from the --gpus run's cache.
#
#   scripts/gpu/multi-gpu.sh [SUITE] [FLAGS...]   # default: 8 llama3-8b-sized problems (m 16 and
#                                                 # 2048, bf16); results in $OUT
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
CLI=${BUILD:-build}/gemmtune
OUT=${OUT:-$PWD/multi-gpu-out}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TMPDIR=$WORK XDG_CACHE_HOME=$WORK/xdg GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} \
  GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
SUITE=${1:-}
shift || true
if [ -z "$SUITE" ]; then
  SUITE=$WORK/suite.csv
  { echo "m,n,k"; for m in 16 2048; do for nk in 6144,4096 4096,4096 28672,4096 4096,14336; do echo "$m,$nk"; done; done; } >"$SUITE"
fi
FLAGS=("$@")
[ ${#FLAGS[@]} -gt 0 ] || FLAGS=(--backends cublaslt,triton,native)
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $(nvidia-smi -L | wc -l); CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}" | tee "$OUT/summary.txt"
run() {  # name, extra flags...
  local name=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$CLI" suite "$SUITE" "${FLAGS[@]}" --json "$OUT/$name.jsonl" "$@" 2>"$OUT/$name.log"
  echo "$name: exit $? in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s; $(tail -1 "$OUT/$name.log")" | tee -a "$OUT/summary.txt"
}
run plain --cache "$WORK/plain.sqlite"
run gpus --cache "$WORK/gpus.sqlite" --gpus all
run gpus-hit --cache "$WORK/gpus.sqlite" --gpus all
python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
out = sys.argv[1]
def winners(name):
    w = {}
    for line in open(f"{out}/{name}.jsonl"):
        r = json.loads(line)
        if r.get("winner"):
            w[(r["m"], r["n"], r["k"])] = r
    return w
a, b, c = winners("plain"), winners("gpus"), winners("gpus-hit")
same = near = far = 0
for key, ra in sorted(a.items()):
    rb = b.get(key)
    if rb is None:
        print(f"{key}: no --gpus result"); far += 1; continue
    if ra["candidate_id"] == rb["candidate_id"] and ra["backend"] == rb["backend"]:
        same += 1; continue
    ratio = rb["median_us"] / ra["median_us"]
    spread = max((ra["p80_us"] - ra["p20_us"]) / ra["median_us"], (rb["p80_us"] - rb["p20_us"]) / rb["median_us"])
    ok = abs(ratio - 1) <= spread
    near += ok; far += not ok
    print(f"{key}: {ra['backend']} {ra['candidate']} {ra['median_us']:.2f} us vs {rb['backend']} {rb['candidate']} "
          f"{rb['median_us']:.2f} us: ratio {ratio:.3f}, spread {spread:.3f} -> {'within noise' if ok else 'OUTSIDE noise'}")
hits = sum(1 for r in c.values() if r.get("from_cache"))
print(f"picks: {same} same kernel, {near} other within noise, {far} outside noise or missing, of {len(a)}; "
      f"third run from the cache: {hits}/{len(c)}")
sys.exit(0 if far == 0 and len(b) == len(a) and hits == len(a) else 1)
PY
