#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/: the .npy reader, the C API's problem and options
# JSON, suite CSVs, tuning-cache import) with clang, ASan and UBSan, then runs each one: first on
# the inputs that once crashed it (tests/fuzz/regressions/<name>/), then for a bounded time on its
# seed corpus (tests/fuzz/corpus/<name>/; new inputs go to a scratch folder in the build, the
# committed corpus is left as it is).
#   scripts/fuzz.sh                      # every harness, $GEMMTUNE_FUZZ_SECONDS (default 20) each
#   scripts/fuzz.sh npy cache_import     # some of them
# Exit 0: no crash; 1: a harness crashed (its input is in <build>/crashes/: fix the cause, then keep
# the input in tests/fuzz/regressions/<name>/); 77 (ctest: skipped): no clang >= 15 with libFuzzer and lld.
# ctest runs this as the test `fuzz` (label fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${GEMMTUNE_FUZZ_BUILD:-${GEMMTUNE_BUILD:-build}/fuzz}
SECS=${GEMMTUNE_FUZZ_SECONDS:-20}
JOBS=${GEMMTUNE_JOBS:-$(nproc)}
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(npy capi_json suite_csv cache_import)

# clang 15 or newer (std::source_location), with the libFuzzer runtime (libclang-rt-NN-dev) and lld.
CXX=""
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
for c in ${GEMMTUNE_FUZZ_CXX:-clang++-16 clang++-17 clang++-18 clang++-19 clang++-15 clang++}; do
  command -v "$c" >/dev/null || continue
  major=$("$c" -dumpversion 2>/dev/null | cut -d. -f1)
  [ "${major:-0}" -ge 15 ] || continue
  if "$c" -fsanitize=fuzzer,address,undefined -fuse-ld=lld "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1; then CXX=$(command -v "$c"); break; fi
done
if [ -z "$CXX" ]; then
  echo "fuzz: skipped: no clang++ >= 15 with libFuzzer (scripts/setup.sh installs clang-16, libclang-rt-16-dev, lld-16)"
  exit 77
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cmake -S tests/fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX" -DCUDAToolkit_ROOT="$CUDA_HOME" >/dev/null
cmake --build "$BUILD" -j "$JOBS" >/dev/null

status=0
for name in "${NAMES[@]}"; do
  bin="$BUILD/fuzz_$name"
  [ -x "$bin" ] || { echo "fuzz: no harness '$name'" >&2; exit 2; }
  mkdir -p "$BUILD/scratch/$name" "$BUILD/crashes"
  log="$BUILD/$name.log"
  regress=(tests/fuzz/regressions/"$name"/*)
  if [ -e "${regress[0]}" ]; then
    if ! "$bin" "${regress[@]}" >"$log" 2>&1; then
      echo "fuzz $name: a kept regression input crashes again:"; tail -n 40 "$log"; status=1; continue
    fi
    echo "fuzz $name: ${#regress[@]} regression inputs pass"
  fi
  dict=(); [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  if "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
      -artifact_prefix="$BUILD/crashes/$name-" "${dict[@]}" "$BUILD/scratch/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    echo "fuzz $name: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${SECS} s, no crash"
  else
    echo "fuzz $name: CRASH (input in $BUILD/crashes/):"; tail -n 60 "$log"; status=1
  fi
done
exit $status
