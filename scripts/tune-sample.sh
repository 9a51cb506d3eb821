#!/usr/bin/env bash
# The main job: installs what is missing, builds, and tunes a small sample suite.
# Without a GPU it says so and exits non-zero (3).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD=${GEMMTUNE_BUILD:-build}
exec "$BUILD/gemmtune" suite bench/suites/sample.csv "$@"
