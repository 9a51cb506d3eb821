#!/usr/bin/env bash
# Lays out build-dev/ for a device call (docs/kernel-packs.md, scripts/device-check.sh): the stripped binaries of
# BUILD (default build/) as build-dev/bin.tar.xz (libgemmtune_c.so, gemmtune, gemmtune_gpu_tests:
# ~8 MB instead of ~40, the carry limit is 64 MiB with the working tree) and build-dev/snap/, a
# `git archive HEAD` of bench/ and python/ that the call script copies over the tree on the
# device, so that only committed code travels.
#
#   scripts/stage-device.sh [BUILD]     # then: run(command="bash build-dev/callN.sh", carry=["build-dev", packs...])
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath "${1:-$ROOT/build}")
DEV=$ROOT/build-dev
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for f in libgemmtune_c.so gemmtune tests/gemmtune_gpu_tests; do
  [ -f "$BUILD/$f" ] || { echo "stage-device: $BUILD/$f is missing (build first)" >&2; exit 2; }
  strip -o "$TMP/$(basename "$f")" "$BUILD/$f"
done
mkdir -p "$DEV"
tar -C "$TMP" -cJf "$DEV/bin.tar.xz" libgemmtune_c.so gemmtune gemmtune_gpu_tests
rm -rf "$DEV/snap" && mkdir -p "$DEV/snap"
git -C "$ROOT" archive HEAD bench python | tar -C "$DEV/snap" -x
echo "stage-device: $(du -sh "$DEV/bin.tar.xz" | cut -f1) of binaries from $BUILD at $(git -C "$ROOT" rev-parse --short HEAD)"
