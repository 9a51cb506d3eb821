#!/usr/bin/env bash
# Installs what gemmtune needs on Debian 12 / Ubuntu with the CUDA toolkit, then configures
# and builds into build/. Idempotent: installs only what is missing.
#   scripts/setup.sh            # deps + build
#   GEMMTUNE_BUILD=dir scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages (pinned by the distribution release). libhiredis-dev: the remote tuning cache's
# Redis client, linked statically.
PKGS=(cmake g++ make libsqlite3-dev nlohmann-json3-dev libcli11-dev libgtest-dev python3 libhiredis-dev)
# For the tests only, without their recommends: redis-server (the remote-cache tests start one on
# a loopback port) and clang 16 with its runtimes and lld (the libFuzzer harnesses, scripts/fuzz.sh; clang
# 14 lacks std::source_location). A failure here is only a warning: those tests then skip.
TEST_PKGS=(redis-server clang-16 libclang-rt-16-dev lld-16)
missing=() missing_test=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
for p in "${TEST_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing_test+=("$p"); done
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_test[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if [ ${#missing_test[@]} -gt 0 ]; then
    echo "setup: installing ${missing_test[*]} (tests)" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing_test[@]}" >/dev/null ||
      echo "setup: WARNING: could not install ${missing_test[*]}; the remote-cache and fuzz tests will skip" >&2
  fi
fi

# pins_installed VENV REQ: quick check (no network) whether every `name==version` pin of the
# requirements file REQ is installed in the venv VENV; true when all are.
pins_installed() {
  "$1/bin/python" - "$2" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, want = line.partition("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}

# --- Python compile worker (Triton backend): the project's own venv .venv -------------------
# Pinned in python/requirements.txt; installs only what is missing. A failure here is only a
# warning: the Triton backend then reports "not available" and everything else works.
# GEMMTUNE_SKIP_VENV=1 skips this block.
setup_venv() {
  local venv=.venv req=python/requirements.txt py=${GEMMTUNE_VENV_PYTHON:-python3}
  if [ -e "$venv" ] && ! "$venv/bin/python" -c "" >/dev/null 2>&1; then
    echo "setup: $venv is broken; recreating it" >&2
    rm -rf "$venv"
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv with $py" >&2
    if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
      # Debian's python3 needs python3-venv for ensurepip.
      local SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
      if ! dpkg -s python3-venv >/dev/null 2>&1; then
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null || true
      fi
      rm -rf "$venv"
      "$py" -m venv "$venv" >/dev/null || return 1
    fi
  fi
  if pins_installed "$venv" "$req"; then return 0; fi
  echo "setup: installing python/requirements.txt into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" || return 1
  "$venv/bin/python" -c "import triton" || return 1
}
if [ "${GEMMTUNE_SKIP_VENV:-0}" != 1 ]; then
  setup_venv || echo "setup: WARNING: could not set up .venv with python/requirements.txt; the Triton backend will be unavailable" >&2
fi
# --- end of the Python compile worker block ----------------------------------------------

# --- CUTLASS C++ headers (cutlass backend): nvidia-cutlass into .venv, --no-deps ----------------
# Pinned in python/requirements-cutlass.txt. The backend finds
# .venv/lib/python3*/site-packages/cutlass_library/source/include at run time ($GEMMTUNE_CUTLASS_DIR
# overrides). A failure is only a warning: the backend then reports "not available".
# Needs the .venv of the block above; GEMMTUNE_SKIP_VENV=1 skips this block too.
setup_cutlass() {
  local venv=.venv req=python/requirements-cutlass.txt
  [ -x "$venv/bin/python" ] || return 1
  local want
  want=$(sed -n 's/^nvidia-cutlass==\([^ #]*\).*/\1/p' "$req")
  if [ -n "$want" ] && [ "$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("nvidia-cutlass"))' 2>/dev/null)" = "$want" ] \
     && compgen -G "$venv/lib/python3*/site-packages/cutlass_library/source/include/cutlass/version.h" >/dev/null; then
    return 0
  fi
  echo "setup: installing $req into $venv (--no-deps)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$req" || return 1
  compgen -G "$venv/lib/python3*/site-packages/cutlass_library/source/include/cutlass/version.h" >/dev/null
}
if [ "${GEMMTUNE_SKIP_VENV:-0}" != 1 ]; then
  setup_cutlass || echo "setup: WARNING: could not install CUTLASS headers (python/requirements-cutlass.txt); the cutlass backend will be unavailable" >&2
fi
# --- end of the CUTLASS block -------------------------------------------------------------------

# --- CuTe DSL (cutedsl backend): nvidia-cutlass-dsl, cu13 flavor only, into .venv, --no-deps ----
# Pinned in python/requirements-cutedsl.txt (docs/cutedsl.md says why cu13 only and --no-deps).
# Needed only where kernels are compiled (the GPU machine runs precompiled artifacts). A failure
# is only a warning: the backend then reports "not available". GEMMTUNE_SKIP_CUTEDSL=1 skips it.
setup_cutedsl() {
  local venv=.venv req=python/requirements-cutedsl.txt
  [ -x "$venv/bin/python" ] || return 1
  if pins_installed "$venv" "$req"; then return 0; fi
  echo "setup: installing $req into $venv (--no-deps; ~200 MB download)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$req" || return 1
  "$venv/bin/python" -c "import cutlass.cute" || return 1
}
if [ "${GEMMTUNE_SKIP_VENV:-0}" != 1 ] && [ "${GEMMTUNE_SKIP_CUTEDSL:-0}" != 1 ]; then
  setup_cutedsl || echo "setup: WARNING: could not install the CuTe DSL (python/requirements-cutedsl.txt); the cutedsl backend will be unavailable" >&2
fi
# --- end of the CuTe DSL block ------------------------------------------------------------------

# --- the report (`gemmtune report`): matplotlib into .venv, and Debian's chromium -----------------
# Pinned in python/requirements-report.txt. Chromium renders the report in its test (a screenshot,
# checked not blank); without it that one test skips and says so. Failures are only warnings: the
# report (or its screenshot test) is then unavailable. GEMMTUNE_SKIP_REPORT=1 skips this block.
setup_report() {
  local venv=.venv req=python/requirements-report.txt
  [ -x "$venv/bin/python" ] || return 1
  if pins_installed "$venv" "$req"; then return 0; fi
  echo "setup: installing $req into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" || return 1
  "$venv/bin/python" -c "import matplotlib" || return 1
}
setup_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  echo "setup: installing chromium (the report's screenshot test)" >&2
  local SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
}
if [ "${GEMMTUNE_SKIP_VENV:-0}" != 1 ] && [ "${GEMMTUNE_SKIP_REPORT:-0}" != 1 ]; then
  setup_report || echo "setup: WARNING: could not install python/requirements-report.txt; gemmtune report will be unavailable" >&2
fi
if [ "${GEMMTUNE_SKIP_REPORT:-0}" != 1 ]; then
  setup_chromium || echo "setup: WARNING: could not install chromium; the report's screenshot test will skip" >&2
fi
# --- end of the report block ----------------------------------------------------------------------

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $CUDA_HOME (set CUDA_HOME); gemmtune needs CUDA 13.0's nvcc and cuBLASLt" >&2
  exit 1
fi
export PATH="$CUDA_HOME/bin:$PATH"

BUILD=${GEMMTUNE_BUILD:-build}
JOBS=${GEMMTUNE_JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" >/dev/null
cmake --build "$BUILD" -j "$JOBS"
