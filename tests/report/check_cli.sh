#!/usr/bin/env bash
# `gemmtune report` through the C++ CLI (it runs `python -m gemmtune.report` in its place): a page
# from the real SQLite tuning cache (the bench sample's tune rows exported, then imported with
# `gemmtune cache import`), the exit codes of a usage error and of bad input, --help passed on.
#   tests/report/check_cli.sh BUILD/gemmtune
# Exit 77 (CTest skip) when the checkout has no .venv with matplotlib (scripts/setup.sh makes it).
set -uo pipefail
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=$SRC/.venv/bin/python
if ! [ -x "$PY" ] || ! "$PY" -c "import matplotlib" >/dev/null 2>&1; then
  echo "report_cli: SKIP: no $PY with matplotlib (run scripts/setup.sh)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "report_cli: FAIL: $*"; [ -f "$T/out.txt" ] && cat "$T/out.txt"; exit 1; }

PYTHONPATH=$SRC/python "$PY" -m gemmtune.report.cache_export "$SRC/tests/report/bench-sample.json" -o "$T/cache.json" \
  >"$T/out.txt" 2>&1 || fail "cache_export"
"$BIN" cache --cache "$T/cache.sqlite" import "$T/cache.json" >"$T/out.txt" 2>&1 || fail "cache import"
grep -q "imported 10 entries" "$T/out.txt" || fail "cache import: not 10 entries"

"$BIN" report --cache "$T/cache.sqlite" -o "$T/cache.html" --format svg --out-dir "$T/figs" >"$T/out.txt" 2>&1 \
  || fail "report --cache (exit $?)"
grep -q "$T/cache.sqlite: cache, 10 problems (10 GEMM)" "$T/out.txt" || fail "no text summary of the cache"
grep -q "wrote $T/cache.html" "$T/out.txt" || fail "the page was not written"
for f in roofline-bf16 roofline-fp8 backend-map scorecard correctness; do
  grep -q "id=\"fig-$f\"><img alt=\"[^\"]*\" src=\"data:image/png;base64," "$T/cache.html" || fail "figure $f not in the page"
  grep -q "<svg" "$T/figs/$f.svg" || fail "figure $f.svg not written"
done
grep -q "Made .* by <code>gemmtune report --cache $T/cache.sqlite" "$T/cache.html" || fail "the page does not name its command"
grep -Eqi "(src|href)=[\"']?(https?:)?//" "$T/cache.html" && fail "the page links an external URL"

"$BIN" report >"$T/out.txt" 2>&1; [ $? = 2 ] || fail "no input: exit 2 expected"
echo '{' >"$T/bad.json"
"$BIN" report "$T/bad.json" -o "$T/bad.html" >"$T/out.txt" 2>&1; [ $? = 1 ] || fail "bad input: exit 1 expected"
grep -q "gemmtune report: $T/bad.json" "$T/out.txt" || fail "bad input: the message does not name the file"
"$BIN" report --help >"$T/out.txt" 2>&1 || fail "report --help"
grep -q -- "--format" "$T/out.txt" || fail "report --help does not show the report's options"
"$BIN" --help >"$T/out.txt" 2>&1
grep -q "report" "$T/out.txt" || fail "gemmtune --help does not list report"
echo "report_cli: ok"
