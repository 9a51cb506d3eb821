#!/usr/bin/env bash
# Compile time per candidate and per backend, from empty caches: `gemmtune precompile` of the
# given problems into a fresh artifact store, one backend at a time (then, with --together, all
# of them in one run, as a cold tune's compile stage runs them), and a summary of the seconds
# each artifact took: wall in its compiler, and CPU (user + system of the worker or nvcc and
# their child processes, which other work on the machine does not inflate as much as wall).
#
#   scripts/compile-time.sh [--backends cutedsl,triton,cutlass] [--max-configs N] [--workers N]
#                           [--compile-budget N] [--together] [--out FILE.md] PROBLEMS
#
# PROBLEMS is what `gemmtune precompile` takes: a suite CSV (header m,n,k), or a .jsonl of
# problems as the C API takes them. --compile-budget N builds what a cold tune with that budget
# would (the default tune budget is 8; without the flag, every candidate). Problem flags (--dtype, --bias, ...) go after `--`:
#   scripts/compile-time.sh --max-configs 6 /tmp/p.csv -- --dtype bf16
#
# Caches, all empty or unused for every run (the report says so): the artifact store (a fresh
# temporary folder per run), Triton's file cache (each worker's own temporary folder, emptied
# after every compile: python/gemmtune/triton_compile.py; ~/.triton is never read), the CuTe DSL's
# file cache (off: CUTE_DSL_DISABLE_FILE_CACHING=1, forced here), nvcc (no ccache in the
# engine). What stays warm: the OS page cache (files read by an earlier run) and Python's
# bytecode of the installed packages.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKENDS=cutedsl,triton,cutlass MAX_CONFIGS="" WORKERS="" BUDGET="" TOGETHER=0 OUT="" PROBLEMS=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --backends) BACKENDS=$2; shift 2 ;;
    --max-configs) MAX_CONFIGS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --compile-budget) BUDGET=$2; shift 2 ;;
    --together) TOGETHER=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) echo "compile-time.sh: unknown option $1" >&2; exit 2 ;;
    *) PROBLEMS=$1; shift ;;
  esac
done
[ -n "$PROBLEMS" ] || { sed -n '2,20p' "$0" >&2; exit 2; }
CLI=${GEMMTUNE_CLI:-build/gemmtune}
[ -x "$CLI" ] || { echo "compile-time.sh: no $CLI (scripts/setup.sh builds it)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/gemmtune-compile-time-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export CUTE_DSL_DISABLE_FILE_CACHING=1
export GEMMTUNE_STORE_KEY="$WORK/store.key"  # a fresh machine key: nothing from another store verifies
unset GEMMTUNE_ARTIFACTS GEMMTUNE_LOAD_ONLY

FLAGS=()
[ -n "$MAX_CONFIGS" ] && FLAGS+=(--max-configs "$MAX_CONFIGS")
[ -n "$BUDGET" ] && FLAGS+=(--compile-budget "$BUDGET")
[ -n "$WORKERS" ] && FLAGS+=(--compile-workers "$WORKERS" --nvcc-jobs "$WORKERS")

REPORT="$WORK/report.md"
{
  echo "machine: $(nproc) cores, $(uname -sr); $(${GEMMTUNE_PYTHON:-.venv/bin/python} -c 'import sys; print("python", sys.version.split()[0])' 2>/dev/null || true)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')"
  echo "Python kernel sources: ${GEMMTUNE_PYTHON_DIR:-python/ of this checkout}"
  echo "problems: $PROBLEMS ${EXTRA[*]:-}; flags: ${FLAGS[*]:-(defaults)}"
  echo "caches: artifact store empty (fresh folder per run); Triton file cache per worker, emptied after each compile; CuTe DSL file cache off; no ccache"
  echo
  echo "| run | backend | built | median wall s | median CPU s | max wall s | CPU s in all | run wall s | load before | load after |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$REPORT"

# run NAME BACKENDS: one precompile into a fresh store; appends its rows to the report.
run() {
  local name=$1 backends=$2 store="$WORK/store-$1"
  local load0 load1 t0 t1
  load0=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  "$CLI" precompile "$PROBLEMS" "${EXTRA[@]}" --backends "$backends" --artifacts "$store" "${FLAGS[@]}" \
      --json "$WORK/$name.jsonl" 2> "$WORK/$name.log" || echo "compile-time.sh: $name: precompile failed (see below)" >&2
  t1=$(date +%s.%N)
  load1=$(cut -d' ' -f1 /proc/loadavg)
  grep -E "^gemmtune: " "$WORK/$name.log" >&2 || true
  grep -E "FAILED" "$WORK/$name.log" | head -5 >&2 || true
  python3 - "$WORK/$name.jsonl" "$name" "$(echo "$t1 - $t0" | bc)" "$load0" "$load1" >> "$REPORT" <<'PY'
import json, statistics, sys
path, name, wall, load0, load1 = sys.argv[1:6]
rows = [json.loads(l) for l in open(path) if l.strip()]
by = {}
for r in rows:
    if r["skipped"] or r["error"] or r["store_hit"]:
        continue
    by.setdefault(r["backend"], []).append(r)
if not by:
    print(f"| {name} | - | 0 | - | - | - | - | {float(wall):.1f} | {load0} | {load1} |")
for b, rs in sorted(by.items()):
    w = [r["compile_s"] for r in rs]
    c = [r["cpu_s"] for r in rs if r.get("cpu_s") is not None]
    med_c = f"{statistics.median(c):.2f}" if c else "-"
    tot_c = f"{sum(c):.1f}" if c else "-"
    print(f"| {name} | {b} | {len(rs)} | {statistics.median(w):.2f} | {med_c} | {max(w):.2f} | {tot_c} | "
          f"{float(wall):.1f} | {load0} | {load1} |")
PY
}

IFS=, read -r -a LIST <<< "$BACKENDS"
for b in "${LIST[@]}"; do run "$b" "$b"; done
[ "$TOGETHER" = 1 ] && run together "$BACKENDS"

{
  echo
  echo "wall: each artifact's seconds in its compiler (a worker's answer time, or its share of the"
  echo "nvcc run of its CUTLASS group), not the wait for a free worker; run wall: the whole"
  echo "precompile, worker starts included."
} >> "$REPORT"
cat "$REPORT"
if [ -n "$OUT" ]; then cp "$REPORT" "$OUT"; mkdir -p "$OUT.d" && cp "$WORK"/*.jsonl "$WORK"/*.log "$OUT.d/"; fi
