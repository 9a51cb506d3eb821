"""Grouped GEMM without a GPU: the Triton kernel's compile parameters and one sm_90a compile
(kernels/triton_grouped.py), and gemmtune.torch.grouped_mm's argument checks (meta tensors:
refused before anything runs)."""

import os

import pytest

from gemmtune.triton_compile import CompileFailure
from gemmtune.kernels import triton_grouped as tg

BASE = {"a_dtype": "bf16", "out_dtype": "bf16", "masked": False, "max_g": 16, "block_m": 64, "block_n": 64,
        "block_k": 64, "num_sms": 132, "num_warps": 4, "num_stages": 3, "n_div16": True, "k_div16": True}


def test_params_are_checked():
    p = tg.normalize_params(BASE, "grouped_gemm")
    assert p["act"] == "none" and p["scale"] == "none" and p["group_m"] == 8
    for bad, needle in (({"bogus": 1}, "unknown field"), ({"a_dtype": "fp32"}, "a_dtype"),
                        ({"scale": "rowwise"}, "params.scale"), ({"max_g": 24}, "max_g"),
                        ({"block_n": 96}, "block_n"), ({"num_sms": 0}, "num_sms"), ({"masked": 1}, "masked"),
                        ({"chunks": 5}, "params.chunks"), ({"chunks": 0}, "params.chunks")):
        with pytest.raises(CompileFailure) as e:
            tg.normalize_params({**BASE, **bad}, "grouped_gemm")
        assert e.value.kind == "bad_request" and needle in e.value.message, e.value.message
    with pytest.raises(CompileFailure):
        tg.normalize_params({**BASE, "a_dtype": "e4m3"}, "grouped_gemm")  # fp8 needs a scale mode
    assert tg.normalize_params({**BASE, "a_dtype": "e4m3", "scale": "rowwise"}, "grouped_gemm")["scale"] == "rowwise"
    with pytest.raises(CompileFailure) as e:  # block scales: one row slice a tile
        tg.normalize_params({**BASE, "a_dtype": "e4m3", "scale": "block", "block_k": 128, "chunks": 2}, "grouped_gemm")
    assert "params.chunks" in e.value.message


def test_resource_precheck():
    with pytest.raises(CompileFailure) as e:
        tg.compile_grouped({**BASE, "block_m": 256, "block_n": 256, "num_warps": 4}, "/tmp", "grouped_gemm")
    assert e.value.kind == "resource"


def test_compiles_for_sm90a(tmp_path):
    r = tg.compile_grouped({**BASE, "masked": True, "has_bias": True, "act": "silu"}, str(tmp_path), "grouped_gemm")
    assert os.path.exists(r["artifact"]) and r["name"] == "grouped_gemm"
    # row slices sharing B's tiles: every slice count's k loop in one kernel, without spills
    four = tg.compile_grouped({**BASE, "block_n": 128, "num_warps": 8, "chunks": 4}, str(tmp_path), "grouped_gemm")
    assert four["meta"]["spill_stores"] == 0 and four["hash"] != r["hash"]
    assert r["meta"]["num_params"] == len(tg.RUNTIME_ARGS) + 2  # Triton's two hidden scratch pointers
    assert r["meta"]["global_scratch_size"] > 0                 # the in-kernel TMA descriptors


def test_report_reads_grouped_cache_entries():
    from gemmtune.report.load import _cache_entry, parse_canonical
    canon = "grouped1;g=8;n=14336;k=4096;rows=512;layout=contiguous;a=bf16;d=bf16;scale=none;act=none;bias=0"
    assert parse_canonical(canon)["op"] == "grouped"
    p = _cache_entry({"problem": canon, "results": []}, "x", "entries[0]", 2)
    assert p.op == "grouped" and p.m == 8 * 512 and p.flops == 2.0 * 8 * 512 * 14336 * 4096


torch = pytest.importorskip("torch")


def test_grouped_mm_refuses_bad_arguments():
    import gemmtune
    import gemmtune.torch as gt

    def t(*shape, dtype=torch.bfloat16):
        return torch.empty(shape, dtype=dtype, device="meta")

    def refused(needle, *args, **kw):
        with pytest.raises(gemmtune.GemmtuneError) as e:
            gt.grouped_mm(*args, **kw)
        assert needle in str(e.value) and str(e.value).startswith("gemmtune.torch.grouped_mm: "), str(e.value)

    offs = t(8, dtype=torch.int32)
    refused("mat_a: dtype torch.float32", t(64, 32, dtype=torch.float32), t(8, 32, 16), offs=offs)
    refused("mat_b: expected 3 dimensions", t(64, 32), t(32, 16), offs=offs)
    refused("offs: required", t(64, 32), t(8, 32, 16))
    refused("offs: expected int32 [8]", t(64, 32), t(8, 32, 16), offs=t(7, dtype=torch.int32))
    refused("mat_a: k = 31", t(64, 31), t(8, 32, 16), offs=offs)
    refused("offs: not taken", t(8, 4, 32), t(8, 32, 16), offs=offs)
    refused("mat_a: expected [8, m, 32]", t(7, 4, 32), t(8, 32, 16))
    refused("out_dtype", t(64, 32), t(8, 32, 16), offs=offs, out_dtype=torch.int8)
    refused("bias: expected", t(64, 32), t(8, 32, 16), offs=offs, bias=t(8, 15))
    refused("mat_a: expected a CUDA tensor", t(64, 32), t(8, 32, 16), offs=offs)


def test_kernel_matches_float64_under_the_interpreter():
    """The kernel's tile walk, row slices (1-4) and masked epilogue, run by Triton's CPU
    interpreter (tests/python/grouped_interpreted.py, its own process) on ragged splits."""
    import subprocess
    import sys
    pytest.importorskip("torch")
    pytest.importorskip("numpy")  # the interpreter's arrays (python/requirements-report.txt)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, os.path.join(here, "grouped_interpreted.py")], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 16, out.stdout + out.stderr[-2000:]
    bad = [line for line in lines if not line.endswith(" ok")]
    assert not bad, "\n".join(bad)
