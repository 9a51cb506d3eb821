#!/usr/bin/env bash
# On the GPU machine: crash isolation (docs/isolation.md), in about 3 minutes.
#   1. the fault-injection GPU tests (tests/gpu/test_isolation.cpp): each injected fault costs only
#      its candidate, the tune picks a correct kernel, the test process then runs 1,000 GEMMs
#      correctly, a second tune never retries a quarantined candidate;
#   2. the engine GPU tests (GEMM and softmax), whose tunes now run in the tuning helper;
#   3. the helper's cost: cold tunes (cuBLASLt 4096^3 and 16x4096x4096; all default backends on
#      16x4096x4096 with a fresh artifact store) in process vs in-process mode, alternating, and a
#      cache hit in a second process (select_ms, which must stay under 1 ms: a hit starts no helper).
#
#   scripts/gpu/isolate.sh        # from the repo root; binaries in build/ (build/gemmtune,
#                                 # build/tests/gemmtune_gpu_tests), or BUILD=dir; results in $OUT
#
# $OUT gets isolate-summary.txt (the numbers and each step's verdict), isolation-tests.log,
# engine-tests.log and measure.tar.gz (every JSON and log of step 3). Exit status 0 when every
# step passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
CLI=$BUILD/gemmtune
TESTS=$BUILD/tests/gemmtune_gpu_tests
[ -x "$TESTS" ] || TESTS=$BUILD/gemmtune_gpu_tests
OUT=${OUT:-$PWD/isolate-out}
mkdir -p "$OUT"
SUMMARY=$OUT/isolate-summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
for f in "$CLI" "$TESTS"; do [ -x "$f" ] || { say "isolate: $f is missing"; exit 2; }; done

# Private caches and stores: nothing of an earlier run counts.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TMPDIR=$WORK XDG_CACHE_HOME=$WORK/xdg GEMMTUNE_CACHE=$WORK/tests.sqlite GEMMTUNE_ARTIFACTS=$WORK/store
export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v python3)} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
unset GEMMTUNE_ISOLATION GEMMTUNE_TUNER
# Binaries linked on the build machine: find cuBLASLt here if their run path misses it.
. scripts/gpu/cublaslt-path.sh
cublaslt_path "$CLI"
say "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(git rev-parse --short HEAD 2>/dev/null)"
rc=0

# ---- 1 + 2: GPU tests ------------------------------------------------------------------------
gtest() {  # name, time limit s, filter
  local name=$1 lim=$2 filter=$3 t0 r
  t0=$(date +%s)
  timeout "$lim" "$TESTS" --gtest_filter="$filter" >"$OUT/$name.log" 2>&1
  r=$?
  [ $r -eq 0 ] || rc=1
  say "== $name: exit $r in $(($(date +%s) - t0)) s: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$name.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|^\[ (fault|warm)' "$OUT/$name.log" | tee -a "$SUMMARY"
}
gtest isolation-tests 150 '*FaultKind*:Isolation.*'
gtest engine-tests 150 'Engine.*:SoftmaxEngine.*'

# ---- 3: the helper's cost ----------------------------------------------------------------------
M=$OUT/measure
mkdir -p "$M"
# tune NAME MODE SHAPE [flags]: one CLI process; the JSON gives select_ms and from_cache.
tune() {
  local name=$1 mode=$2 shape=$3
  shift 3
  local extra=()
  [ "$mode" = in-process ] && extra=(--in-process)
  local t0 t1
  t0=$(date +%s.%N)
  timeout 120 "$CLI" tune "$shape" "$@" "${extra[@]}" --json "$M/$name.json" >"$M/$name.txt" 2>&1 || { say "== $name: exit $?"; rc=1; }
  t1=$(date +%s.%N)
  echo "$name $mode $shape $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >>"$M/wall.txt"
}
: >"$M/wall.txt"
for rep in 1 2 3; do
  for mode in process in-process; do
    for shape in 4096x4096x4096 16x4096x4096; do
      c=$WORK/lt-$mode-$shape-$rep.sqlite
      tune "lt-cold-$mode-$shape-$rep" $mode $shape --backends cublaslt --cache "$c" --log-level debug
      [ "$mode" = process ] && tune "lt-hit-$shape-$rep" process $shape --backends cublaslt --cache "$c" --log-level debug
    done
  done
done
for mode in process in-process; do
  GEMMTUNE_ARTIFACTS=$WORK/store-$mode tune "all-cold-$mode" $mode 16x4096x4096 --cache "$WORK/all-$mode.sqlite"
  tune "all-hit-$mode" process 16x4096x4096 --cache "$WORK/all-$mode.sqlite"
done
python3 - "$M" <<'PY' | tee -a "$SUMMARY" || rc=1
import json, os, statistics, sys
m = sys.argv[1]
wall = {}
for line in open(os.path.join(m, "wall.txt")):
    name, mode, shape, secs = line.split()
    wall[name] = float(secs)
def load(name):
    try:
        return json.load(open(os.path.join(m, name + ".json")))
    except Exception as e:
        return None
ok = True
print("== helper cost (median of 3; select = Engine::select in the CLI, wall = the whole CLI process)")
for shape in ("4096x4096x4096", "16x4096x4096"):
    row = {}
    for mode in ("process", "in-process"):
        sel = [load(f"lt-cold-{mode}-{shape}-{r}") for r in (1, 2, 3)]
        sel = [j["select_ms"] for j in sel if j]
        w = [wall.get(f"lt-cold-{mode}-{shape}-{r}", float("nan")) for r in (1, 2, 3)]
        row[mode] = (statistics.median(sel) if sel else float("nan"), statistics.median(w))
    d_sel = row["process"][0] - row["in-process"][0]
    d_wall = row["process"][1] - row["in-process"][1]
    print(f"cuBLASLt cold {shape}: select {row['process'][0]:.0f} ms isolated vs {row['in-process'][0]:.0f} ms in-process "
          f"(+{d_sel:.0f} ms); process wall {row['process'][1]:.2f} s vs {row['in-process'][1]:.2f} s (+{d_wall:.2f} s)")
    hits = [load(f"lt-hit-{shape}-{r}") for r in (1, 2, 3)]
    hits = [j for j in hits if j]
    hit_ms = [j["select_ms"] for j in hits]
    cached = all(j.get("from_cache") for j in hits) and len(hits) == 3
    under = bool(hit_ms) and max(hit_ms) < 1.0
    ok &= cached and under
    print(f"cuBLASLt cache hit {shape} in a second process: select_ms {', '.join(f'{x:.3f}' for x in hit_ms)} "
          f"(from_cache: {cached}) -> {'PASS' if cached and under else 'FAIL'} (< 1 ms); process wall "
          + ", ".join("%.2f" % wall.get("lt-hit-%s-%d" % (shape, r), float("nan")) for r in (1, 2, 3)) + " s")
for mode in ("process", "in-process"):
    j = load(f"all-cold-{mode}")
    h = load(f"all-hit-{mode}")
    if j:
        n = len(j.get("results", []))
        print(f"all backends cold 16x4096x4096 {mode}: select {j['select_ms']:.0f} ms, {n} candidates, wall {wall.get('all-cold-' + mode, float('nan')):.2f} s; "
              f"winner {next((r['backend'] + ' ' + r['name'] for r in j['results'] if r.get('winner')), '?')}")
    if h:
        print(f"all backends cache hit after the {mode} tune: select_ms {h['select_ms']:.3f} from_cache {h.get('from_cache')}")
import re
hello = []
for f in sorted(os.listdir(m)):
    if f.startswith("lt-cold-process") and f.endswith(".txt"):
        hello += [float(x) for x in re.findall(r"hello after ([0-9.]+) ms", open(os.path.join(m, f)).read())]
if hello:
    print(f"helper start to hello (exec + static init): median {statistics.median(hello):.1f} ms over {len(hello)}")
sys.exit(0 if ok else 1)
PY
tar -C "$OUT" -czf "$OUT/measure.tar.gz" measure && rm -rf "$M"
say "== isolate.sh: exit $rc"
exit $rc
