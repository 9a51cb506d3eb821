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
# The C library: its CMake target (consumer_c) and pkg-config, each linked and run from the
# install tree; the installed CLI and the kernel sources beside it.
want=$(sed -n 's/^project(gemmtune VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
libdir=$(dirname "$(find "$tmp/prefix" -name libgemmtune_c.so | head -1)")
[ "$(LD_LIBRARY_PATH=$libdir "$tmp/consumer/consumer_c")" = "$want" ]
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion gemmtune)" = "$want" ]
cc "$src/examples/consumer/consumer_c.c" $(pkg-config --cflags --libs gemmtune) -o "$tmp/consumer_pc"
[ "$(LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc")" = "$want" ]
test -x "$tmp/prefix/bin/gemmtune"
share=$tmp/prefix/share/gemmtune/python/gemmtune
for f in worker.py kernels/triton_gemm.py cutedsl/gemm_sm90.py cutlass_kernel/sm90_gemm.cuh; do test -f "$share/$f"; done
echo "C API consumers (CMake target, pkg-config) ran; CLI and kernel sources installed"
