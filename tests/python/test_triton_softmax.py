"""The Triton softmax templates (python/gemmtune/kernels/triton_softmax.py) compile for sm_90a
on the CPU, with 16-byte vector accesses where the hints allow; bad params are refused with
the field's name; the compile worker routes softmax_* kernels to them."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

from gemmtune.kernels.triton_softmax import compile_softmax, normalize_params
from gemmtune.triton_compile import CompileFailure


def params(**kw):
    p = {"kernel": "softmax_rows", "in_dtype": "bf16", "out_dtype": "bf16", "block_n": 1024, "rows": 4,
         "num_warps": 4, "ld_div16": True, "cols_div16": True, "template": "t"}
    p.update(kw)
    return p


@pytest.mark.parametrize("kw", [
    {},
    {"in_dtype": "fp32", "out_dtype": "fp32", "block_n": 4096, "rows": 1, "num_warps": 8},
    {"in_dtype": "fp16", "out_dtype": "fp32", "block_n": 32768, "rows": 1, "num_warps": 16},
    {"block_n": 32768, "rows": 1, "num_warps": 32},
    {"kernel": "softmax_online", "block_n": 4096, "rows": 1, "num_warps": 16},
    {"kernel": "softmax_online", "in_dtype": "fp32", "out_dtype": "bf16", "block_n": 1024, "rows": 1,
     "num_warps": 4, "ld_div16": False, "cols_div16": False},
])
def test_compiles_without_spills(tmp_path, kw):
    r = compile_softmax(params(**kw), str(tmp_path))
    meta = r["meta"]
    assert os.path.getsize(r["artifact"]) > 0
    assert meta["num_params"] == 8  # x, y, rows, cols, ld, scale + two hidden scratch pointers
    assert meta["num_ctas"] == 1
    assert meta["spill_stores"] == 0, meta
    assert r["kernel"] == params(**kw)["kernel"]


def test_vector_accesses_with_hints(tmp_path):
    """With ld and cols multiples of 16, bf16 rows load and store 16 bytes at a time."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from gemmtune.kernels.triton_softmax import build_source_args
    p = normalize_params(params(rows=1, block_n=4096, num_warps=8))
    fn, sig, ce, attrs = build_source_args(p)
    k = triton.compile(ASTSource(fn, sig, ce, attrs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 8, "num_stages": 1})
    ptx = k.asm["ptx"]
    assert "ld.global" in ptx and ".v4.b32" in ptx, "expected 16-byte vector loads"


@pytest.mark.parametrize("kw,field", [
    ({"kernel": "softmax_cols"}, "params.kernel"),
    ({"in_dtype": "e4m3"}, "params.in_dtype"),
    ({"block_n": 1000}, "params.block_n"),
    ({"rows": 3}, "params.rows"),
    ({"num_warps": 64}, "params.num_warps"),
    ({"kernel": "softmax_online", "rows": 2}, "params.rows"),
    ({"bogus": 1}, "unknown field"),
    ({"block_n": True}, "params.block_n"),
])
def test_bad_params_name_the_field(kw, field):
    with pytest.raises(CompileFailure) as e:
        normalize_params(params(**kw))
    assert e.value.kind == "bad_request"
    assert field in e.value.message


def test_too_many_values_a_thread_is_a_resource_failure(tmp_path):
    with pytest.raises(CompileFailure) as e:
        compile_softmax(params(block_n=65536, rows=1, num_warps=4), str(tmp_path))
    assert e.value.kind == "resource"


def test_worker_routes_softmax_kernels(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    req = {"id": 1, "op": "compile", "backend": "triton", "kernel": "softmax_rows", "params": params(),
           "out_dir": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "gemmtune.worker"], input=json.dumps(req) + "\n", env=env,
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.strip()]
    assert lines[0]["ready"] is True
    assert lines[1]["ok"] is True, lines[1]
    assert lines[1]["kernel"] == "softmax_rows"
    assert os.path.exists(lines[1]["artifact"])
