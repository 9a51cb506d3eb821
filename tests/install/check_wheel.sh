#!/usr/bin/env bash
# `pip install .` into a fresh venv, and the installed copy works on its own: it imports from
# outside the source tree, its version is the C++ library's, the `gemmtune` command is on the
# venv's PATH, the compile worker, the Triton / CuTe DSL kernel sources and the CUTLASS kernel
# headers are inside it, and no path of the source tree or its .venv is baked into its binaries.
#   tests/install/check_wheel.sh SOURCE_DIR [PYTHON]
# pip builds with scikit-build-core in build/wheel (kept: a rerun rebuilds only what changed).
# Exit 77 (skipped) when the build backend cannot be had (no PyPI and no pip cache).
set -euo pipefail
src=$(cd "$1" && pwd)
py=${2:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv" || { echo "check_wheel: SKIP: $py cannot make a venv"; exit 77; }
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check -q)
backend=$(sed -n 's/^requires = \["\(scikit-build-core[^"]*\)"\]/\1/p' "$src/pyproject.toml")
"${pip[@]}" download --no-deps -d "$tmp/probe" "$backend" >/dev/null 2>&1 ||
  { echo "check_wheel: SKIP: cannot get $backend (no network or pip cache)"; exit 77; }
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
t0=$(date +%s)
"${pip[@]}" install "$src"
echo "check_wheel: pip install . took $(( $(date +%s) - t0 )) s"

cd "$tmp"  # nothing of the source tree on sys.path
want=$(sed -n 's/^project(gemmtune VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
got=$("$tmp/venv/bin/python" -c 'import gemmtune; print(gemmtune.version())')
dist=$("$tmp/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("gemmtune"))')
[ "$got" = "$want" ] && [ "$dist" = "$want" ] || { echo "check_wheel: version: library $got, package $dist, CMakeLists $want"; exit 1; }
pkg=$("$tmp/venv/bin/python" -c 'import gemmtune, os; print(os.path.dirname(gemmtune.__file__))')
lib=$("$tmp/venv/bin/python" -c 'import gemmtune; print(gemmtune.library_path())')
[ "$lib" = "$pkg/libgemmtune_c.so" ] || { echo "check_wheel: loaded $lib, not the installed copy's"; exit 1; }
for f in worker.py triton_compile.py kernels/triton_gemm.py kernels/triton_softmax.py cutedsl/gemm_sm90.py \
         cutedsl/softmax_sm90.py cutlass_kernel/sm90_gemm.cuh cutlass_kernel/sm90_grouped.cuh cutlass_kernel/gt_cutlass_abi.h torch/_ops.py _bin/gemmtune; do
  [ -f "$pkg/$f" ] || { echo "check_wheel: $f missing from the installed package"; exit 1; }
done
# The command on PATH: --help (exit 0) and info (exit 0, or 3 without a GPU) with the version.
PATH="$tmp/venv/bin:$PATH" gemmtune --help >/dev/null
set +e
info=$(PATH="$tmp/venv/bin:$PATH" gemmtune info --json 2>/dev/null)
rc=$?
set -e
[ $rc = 0 ] || [ $rc = 3 ] || { echo "check_wheel: gemmtune info exited $rc"; exit 1; }
echo "$info" | "$tmp/venv/bin/python" -c "import json, sys; v = json.load(sys.stdin)['version']; sys.exit(v != '$want')" ||
  { echo "check_wheel: gemmtune info --json lacks version $want"; exit 1; }
# No build-machine path in the binaries (D20): neither the source tree nor its .venv.
for bin in "$pkg/libgemmtune_c.so" "$pkg/_bin/gemmtune"; do
  if strings "$bin" | grep -F -e "$src" -e "/.venv/" | head -5 | grep .; then
    echo "check_wheel: $bin holds the paths above"; exit 1
  fi
done
echo "check_wheel: gemmtune $got installed in a fresh venv: imports, CLI on PATH, kernel sources shipped, no source paths in its binaries"
