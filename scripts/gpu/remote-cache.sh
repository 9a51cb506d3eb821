#!/usr/bin/env bash
# On the GPU machine: the remote tuning cache end to end through the CLI (docs/remote-cache.md).
# That machine has no redis-server: tests/support/mini_redis.py stands in (the host tests check
# the client against Debian's real one, and against this stand-in).
#
#   scripts/gpu/remote-cache.sh            # binaries from build/ ($CLI overrides build/gemmtune)
#
# Checks, each a line "ok ..." or "FAIL ..." in $OUT/remote-cache.txt (exit 1 on any FAIL; exit 0
# with "skipped" without a GPU):
#  1. process A (cache a.sqlite) tunes a problem and shares it;
#  2. process B (its own cache b.sqlite) is answered from the remote cache: no tune, the same
#     kernel, and its select time is reported;
#  3. B again without --remote: answered by its local cache (the remote hit was written locally);
#  4. the server killed: a new problem still tunes (one warning), nothing lost locally;
#  5. garbage under the shared key: one warning, tuned locally, and the tune replaces the garbage.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
CLI=${CLI:-build/gemmtune}
W=$(mktemp -d)
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$W"' EXIT
REPORT=$OUT/remote-cache.txt
: >"$REPORT"
fails=0
say() { echo "$*" | tee -a "$REPORT"; }
check() {  # check NAME PYTHON-EXPRESSION-ON-j (the JSON of FILE) FILE
  if python3 - "$3" "$2" <<'PY' >>"$REPORT" 2>&1; then say "ok   $1"; else say "FAIL $1"; fails=$((fails + 1)); fi
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
# Same cuBLASLt lookup as scripts/device-check.sh: the binaries were linked on the build machine.
. scripts/gpu/cublaslt-path.sh
cublaslt_path "$CLI"
ldd "$CLI" | grep -E "hiredis|sqlite" && say "FAIL $CLI links hiredis or SQLite dynamically"

start_server() {
  rm -f "$W/port"
  python3 tests/support/mini_redis.py serve "$W/port" &
  SERVER=$!
  for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.05; done
  PORT=$(cat "$W/port")
  URL=redis://127.0.0.1:$PORT/0
}
tune() {  # tune NAME CACHE SHAPE [flags...]: JSON in $W/NAME.json, stderr in $OUT/NAME.log
  local name=$1 cache=$2 shape=$3
  shift 3
  "$CLI" tune "$shape" --backends cublaslt --cache "$W/$cache" --json "$W/$name.json" "$@" >"$OUT/$name.log" 2>&1
}

start_server
tune a a.sqlite 384x1024x2048 --remote "$URL"
rc=$?
if [ $rc = 3 ]; then say "skipped: no GPU"; exit 0; fi
[ $rc = 0 ] || say "FAIL A exited $rc"
check "1. A tuned (not from a cache)" 'not j["from_cache"] and len(j["results"]) > 1' "$W/a.json"
keys=$(python3 tests/support/mini_redis.py call "$PORT" KEYS 'gemmtune:tuning:v1:*')
[ "$(echo "$keys" | grep -c .)" = 1 ] && say "ok   1. one shared key: $keys" || { say "FAIL 1. shared keys: $keys"; fails=$((fails + 1)); }

tune b b.sqlite 384x1024x2048 --remote "$URL"
check "2. B answered from the remote cache" \
  'j["from_cache"] and any("from the remote tuning cache" in n for n in j["notes"])' "$W/b.json"
check "2. B runs A's kernel" "j['kernel'] == json.load(open('$W/a.json'))['kernel']" "$W/b.json"
say "     B select_ms $(python3 -c "import json; print(json.load(open('$W/b.json'))['select_ms'])") (remote hit, cold process)"

tune b2 b.sqlite 384x1024x2048
check "3. B again without --remote: its local cache" \
  'j["from_cache"] and not any("remote" in n for n in j["notes"])' "$W/b2.json"
say "     B local select_ms $(python3 -c "import json; print(json.load(open('$W/b2.json'))['select_ms'])")"

kill "$SERVER"; wait "$SERVER" 2>/dev/null; SERVER=""
tune d a.sqlite 512x1024x2048 --remote "$URL"
rc=$?
check "4. server down: tuned locally" 'not j["from_cache"]' "$W/d.json"
n=$(grep -c "warning: remote tuning cache" "$OUT/d.log")
[ $rc = 0 ] && [ "$n" = 1 ] && say "ok   4. exit 0, $n warning" || { say "FAIL 4. exit $rc, $n warnings"; fails=$((fails + 1)); }
tune a2 a.sqlite 384x1024x2048
check "4. A's local cache kept its entry" 'j["from_cache"]' "$W/a2.json"

start_server
tune e0 e0.sqlite 384x1024x2048 --remote "$URL"  # shares the entry again
key=$(python3 tests/support/mini_redis.py call "$PORT" KEYS 'gemmtune:tuning:v1:*' | head -1)
python3 tests/support/mini_redis.py call "$PORT" SET "$key" '{"format": "gemmtune-cache", "entries": [garbage' >/dev/null
tune e e.sqlite 384x1024x2048 --remote "$URL"
rc=$?
check "5. garbage: tuned locally" 'not j["from_cache"]' "$W/e.json"
n=$(grep -c "warning: remote tuning cache" "$OUT/e.log")
[ $rc = 0 ] && [ "$n" = 1 ] && say "ok   5. exit 0, $n warning" || { say "FAIL 5. exit $rc, $n warnings"; fails=$((fails + 1)); }
tune f f.sqlite 384x1024x2048 --remote "$URL"
check "5. the tune replaced the garbage: a fresh process is answered remotely" \
  'j["from_cache"] and any("from the remote tuning cache" in n for n in j["notes"])' "$W/f.json"

cp "$W"/*.json "$OUT/" 2>/dev/null
tar -C "$OUT" -czf "$OUT/remote-cache-details.tar.gz" --remove-files $(cd "$OUT" && ls ./*.json ./*.log 2>/dev/null) 2>/dev/null
say "$fails failed"
[ "$fails" = 0 ]
