#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds examples/consumer against it with
# find_package(gemmtune): the exported package must be usable by another project.
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" -j 2 >/dev/null
test -x "$tmp/consumer/consumer"
echo "find_package(gemmtune) consumer built"
