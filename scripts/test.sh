#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite. GPU tests skip cleanly
# (reported as skipped) on a machine without an NVIDIA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${GEMMTUNE_BUILD:-build}
ctest --test-dir "$BUILD" --output-on-failure
