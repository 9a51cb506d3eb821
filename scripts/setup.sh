#!/usr/bin/env bash
# Installs what gemmtune needs on Debian 12 / Ubuntu with the CUDA toolkit, then configures
# and builds into build/. Idempotent: installs only what is missing.
#   scripts/setup.sh            # deps + build
#   GEMMTUNE_BUILD=dir scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages (pinned by the distribution release).
PKGS=(cmake g++ make libsqlite3-dev nlohmann-json3-dev libcli11-dev libgtest-dev python3)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

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
