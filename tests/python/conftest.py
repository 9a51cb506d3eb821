"""Shared helpers of the Python tests (CPU only: Triton compiles for sm_90a without a GPU).

Run through tests/python/run.sh (the project's .venv, PYTHONPATH=python)."""

import os
import statistics
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if os.path.join(REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "python"))

# compile_s of every successful compile in this session (reported at the end).
COMPILE_TIMES = []


def base_params(**overrides):
    """A linear-layer GEMM (A row-major, B column-major), bf16, 128x128x64, 8 warps."""
    p = {
        "kernel": "gemm_tiled",
        "a_dtype": "bf16", "b_dtype": "bf16", "out_dtype": "bf16",
        "a_row": True, "b_row": False, "c_row": True, "d_row": True,
        "has_c": False, "has_bias": False, "act": "none", "scale": "none", "tf32": False,
        "block_m": 128, "block_n": 128, "block_k": 64, "group_m": 8, "split_k": 1, "num_sms": 132,
        "num_warps": 8, "num_stages": 3,
        "ld_div16": {"a": True, "b": True, "c": True, "d": True},
        "dims_div16": {"m": True, "n": True, "k": True},
    }
    p.update(overrides)
    return p


@pytest.fixture
def out_dir(tmp_path):
    return str(tmp_path / "artifacts")


def pytest_terminal_summary(terminalreporter):
    if COMPILE_TIMES:
        t = sorted(COMPILE_TIMES)
        terminalreporter.write_line(
            f"triton compile times: {len(t)} compiles, median {statistics.median(t):.3f} s, "
            f"max {t[-1]:.3f} s, total {sum(t):.1f} s")
