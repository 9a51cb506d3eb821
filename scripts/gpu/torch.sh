#!/usr/bin/env bash
# On the GPU machine: gemmtune.torch's GPU checks and measurements (scripts/gpu/torch_check.py):
# every op against float64 (dtypes, layouts, views, epilogues), torch.compile(fullgraph=True),
# CUDA-graph capture and replay, optimize() on a Llama-3-8B decoder block at 1, 16 and 2048
# tokens (eager and torch.compile, against plain PyTorch) and the eager host overhead beside
# torch's. Writes $OUT/torch.{md,json,log}. Runs in about 3-5 minutes (tuning kept short:
# cuBLASLt + native + Triton, a fresh tuning cache and artifact store).
#
#   scripts/gpu/torch.sh                 # the package from python/ and build/libgemmtune_c.so
#   WHEEL=dist/gemmtune-*.whl scripts/gpu/torch.sh   # or an installed wheel (needs no build/)
#   ARGS="--no-compile" scripts/gpu/torch.sh          # skip the torch.compile rows of the block
#   ARGS="--no-compile --max-autotune" scripts/gpu/torch.sh   # a second call: torch max-autotune beside it
#
# Exit: 0 all checks pass, 1 a check failed, 77 no GPU.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GEMMTUNE_CACHE=$work/tuning.sqlite GEMMTUNE_ARTIFACTS=$work/artifacts
if [ -n "${WHEEL:-}" ]; then
  # A venv that sees the machine's torch and triton, with the wheel installed into it.
  "$PY" -m venv --system-site-packages "$work/venv" && "$work/venv/bin/pip" install -q --no-deps --no-index $WHEEL || exit 1
  PY=$work/venv/bin/python
  lib=$("$PY" -c 'import os, gemmtune; print(os.path.dirname(gemmtune.__file__))')/libgemmtune_c.so
else
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
  export GEMMTUNE_LIB=${GEMMTUNE_LIB:-$PWD/build/libgemmtune_c.so}
  export GEMMTUNE_PYTHON=${GEMMTUNE_PYTHON:-$(command -v "$PY")} GEMMTUNE_PYTHON_DIR=${GEMMTUNE_PYTHON_DIR:-$PWD/python}
  lib=$GEMMTUNE_LIB
fi
# The library was linked on the build machine: find cuBLASLt here if its run path misses it.
. scripts/gpu/cublaslt-path.sh
cublaslt_path "$lib" "$PY"
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); python $("$PY" --version 2>&1)"
"$PY" scripts/gpu/torch_check.py --out "$OUT" ${ARGS:-} 2>&1 | tee "$OUT/torch.log"
exit "${PIPESTATUS[0]}"
