#!/usr/bin/env bash
# Runs the Python tests (CPU only: Triton compiles for sm_90a without a GPU) with the
# project's .venv (scripts/setup.sh makes it) and PYTHONPATH=python.
# Exit 77 (CTest SKIP_RETURN_CODE) when .venv, triton or pytest is missing.
#   tests/python/run.sh [pytest args...]     e.g. -k worker, -x, -v
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${GEMMTUNE_TEST_PYTHON:-.venv/bin/python}
if [ ! -x "$PY" ]; then
  echo "tests/python: SKIP: no $PY (run scripts/setup.sh)"
  exit 77
fi
if ! "$PY" -c "import triton, pytest" >/dev/null 2>&1; then
  echo "tests/python: SKIP: $PY lacks triton or pytest (run scripts/setup.sh)"
  exit 77
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# PyPI's torch wheel (python/requirements-torch.txt, installed --no-deps) loads cuBLAS, cuDNN and
# friends at import: the CUDA toolkit's copies stand in for its nvidia-* dependencies.
CUDA_LIB=${CUDA_HOME:-/usr/local/cuda}/lib64
[ -d "$CUDA_LIB" ] && export LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$PY" -m pytest -q -p no:cacheprovider tests/python "$@"
