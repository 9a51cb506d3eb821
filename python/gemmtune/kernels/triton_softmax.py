"""gemmtune's Triton softmax templates and their ahead-of-time compilation for sm_90a.

    y[r, c] = exp(s x[r, c] - M_r) / sum_c' exp(s x[r, c'] - M_r),  M_r = max_c s x[r, c]

over the last dimension of a [rows, cols] row-major x whose rows are `ld` elements apart (y
alike); s x is formed in fp32 and everything is computed in fp32. Two kernels share one runtime
argument list (RUNTIME_ARGS: x, y, rows, cols, ld, scale; then Triton's two hidden scratch
pointers):

  softmax_rows     ROWS rows per program, each row whole in registers (BLOCK_N >= cols): reads
                   x once. Grid: cdiv(rows, ROWS).
  softmax_online   one program per row, any cols: pass 1 keeps a running (max, sum) per lane
                   over BLOCK_N-wide chunks, pass 2 re-reads the row and writes y (reads x
                   twice). Grid: rows.

Special values are torch.softmax's (tests/support/host_softmax.hpp): a row with a NaN, a +Inf
or only -Inf is NaN throughout; -Inf entries of a finite row give 0. softmax_rows gets them
from IEEE arithmetic (exp(x - M) with M = +-Inf or x = NaN is NaN and enters the sum);
softmax_online counts exp(a - b) as 1 when a == b (so a leading run of -Inf does not poison a
row whose max comes later) and writes NaN when the final max is +-Inf. Columns past cols are
-Inf after scaling (never scaled themselves: s = 0 or s < 0 would turn them into NaN / +Inf).

compile_softmax(params, out_dir) is the compile worker's entry for kernels named softmax_*
(gemmtune.worker). Params (all required unless a default is given):
  kernel        "softmax_rows" | "softmax_online"
  in_dtype      "bf16" | "fp16" | "fp32";   out_dtype likewise
  block_n       power of two, 16 .. 65536 (softmax_rows: >= cols)
  rows          rows per program, power of two 1 .. 64 (softmax_rows; default 1)
  num_warps     power of two 1 .. 32 (default 4)
  ld_div16      whether ld is a multiple of 16 elements (divisibility hint; default false)
  cols_div16    whether cols is (lets the column mask keep 16-byte vector accesses; default false)
  template      digest of this file, sent by the C++ side so that it keys the artifact (ignored)
"""

from __future__ import annotations

import time
from typing import Any, Optional

import triton
import triton.language as tl

RUNTIME_ARGS = ("x", "y", "rows", "cols", "ld", "scale")
KERNEL_NAMES = ("softmax_rows", "softmax_online")
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
LOG2E = 1.4426950408889634


@triton.jit
def softmax_rows(x, y, rows, cols, ld, scale, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    r = pid * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_N)
    mask = (r < rows)[:, None] & (c < cols)[None, :]
    off = r[:, None].to(tl.int64) * ld + c[None, :]
    v = tl.load(x + off, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    v = tl.where(mask, v * scale, float("-inf"))
    m = tl.max(v, axis=1)
    e = tl.exp2((v - m[:, None]) * 1.4426950408889634)
    e = tl.where(mask, e, 0.0)
    s = tl.sum(e, axis=1)
    out = e * (1.0 / s)[:, None]
    tl.store(y + off, out.to(y.dtype.element_ty), mask=mask, eviction_policy="evict_first")


@triton.jit
def softmax_online(x, y, rows, cols, ld, scale, BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * ld
    yr = y + row * ld
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for c0 in range(0, cols, BLOCK_N):
        c = c0 + tl.arange(0, BLOCK_N)
        mask = c < cols
        v = tl.load(xr + c, mask=mask, other=0.0).to(tl.float32)
        v = tl.where(mask, v * scale, float("-inf"))
        mn = tl.maximum(m, v)
        keep = tl.where(m == mn, 1.0, tl.exp2((m - mn) * 1.4426950408889634))
        add = tl.where(v == mn, 1.0, tl.exp2((v - mn) * 1.4426950408889634))
        s = s * keep + tl.where(mask, add, 0.0)
        m = mn
    big = tl.max(m, axis=0)
    s = tl.where(m == big, s, s * tl.exp2((m - big) * 1.4426950408889634))
    total = tl.sum(s, axis=0)
    inf_max = (big == float("inf")) | (big == float("-inf"))
    inv = tl.where(inf_max, float("nan"), 1.0 / total)
    for c0 in range(0, cols, BLOCK_N):
        c = c0 + tl.arange(0, BLOCK_N)
        mask = c < cols
        v = tl.load(xr + c, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        out = tl.exp2((v * scale - big) * 1.4426950408889634) * inv
        tl.store(yr + c, out.to(yr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


KERNELS = {"softmax_rows": softmax_rows, "softmax_online": softmax_online}

_SCHEMA = {
    "kernel": (str, None),
    "in_dtype": (str, None),
    "out_dtype": (str, None),
    "block_n": (int, None),
    "rows": (int, 1),
    "num_warps": (int, 4),
    "ld_div16": (bool, False),
    "cols_div16": (bool, False),
    "template": (str, ""),
}


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def normalize_params(params: Any, kernel: Optional[str] = None) -> dict:
    """Checks types and values, fills defaults; raises CompileFailure("bad_request")."""
    from ..triton_compile import CompileFailure, checked_fields

    def bad(msg):
        return CompileFailure("bad_request", msg)

    out = checked_fields(params, _SCHEMA, kernel)
    if out["kernel"] not in KERNEL_NAMES:
        raise bad(f"params.kernel: {out['kernel']!r} is not one of {', '.join(KERNEL_NAMES)}")
    for key in ("in_dtype", "out_dtype"):
        if out[key] not in DTYPES:
            raise bad(f"params.{key}: {out[key]!r} is not one of {', '.join(DTYPES)}")
    if not _pow2(out["block_n"]) or not 16 <= out["block_n"] <= 65536:
        raise bad(f"params.block_n: {out['block_n']} is not a power of two in [16, 65536]")
    if not _pow2(out["rows"]) or out["rows"] > 64:
        raise bad(f"params.rows: {out['rows']} is not a power of two in [1, 64]")
    if out["kernel"] == "softmax_online" and out["rows"] != 1:
        raise bad("params.rows: softmax_online takes one row per program (rows = 1)")
    if not _pow2(out["num_warps"]) or out["num_warps"] > 32:
        raise bad(f"params.num_warps: {out['num_warps']} is not a power of two in [1, 32]")
    return out


def build_source_args(p: dict):
    """(fn, signature, constexprs, attrs) for triton.compiler.ASTSource from normalized params."""
    fn = KERNELS[p["kernel"]]
    types = {"x": "*" + DTYPES[p["in_dtype"]], "y": "*" + DTYPES[p["out_dtype"]],
             "rows": "i32", "cols": "i32", "ld": "i64", "scale": "fp32"}
    constexprs = {"BLOCK_N": p["block_n"], "ROWS": p["rows"]}
    arg_names = list(fn.arg_names)
    assert arg_names[:len(RUNTIME_ARGS)] == list(RUNTIME_ARGS), arg_names
    signature = {n: types[n] for n in RUNTIME_ARGS}
    signature.update({n: "constexpr" for n in arg_names[len(RUNTIME_ARGS):]})
    div16 = ["x", "y"] + (["ld"] if p["ld_div16"] else []) + (["cols"] if p["cols_div16"] else [])
    attrs = {(arg_names.index(n),): [["tt.divisibility", 16]] for n in div16}
    return fn, signature, constexprs, attrs


def _precheck(p: dict) -> None:
    from ..triton_compile import MAX_THREADS, CompileFailure
    if p["num_warps"] * 32 > MAX_THREADS:
        raise CompileFailure("resource", f"{p['num_warps']} warps exceed {MAX_THREADS} threads per block")
    # The row block stays in registers: more than 128 fp32 values a thread spill (and compile slowly).
    per_thread = p["block_n"] * p["rows"] // (32 * p["num_warps"])
    if per_thread > 128:
        raise CompileFailure("resource", f"a {p['rows']}x{p['block_n']} block over {p['num_warps']} warps holds "
                             f"{per_thread} values a thread (at most 128)")


def compile_softmax(params: Any, out_dir: str, kernel: Optional[str] = None) -> dict:
    """Compiles one softmax kernel for sm_90a, writes <out_dir>/<name>-<hash16>.cubin and returns
    {"artifact", "name", "kernel", "hash", "meta", "compile_s"} (as compile_gemm). Raises
    CompileFailure."""
    from .. import triton_compile as tc
    t0 = time.perf_counter()
    p = normalize_params(params, kernel)
    if not isinstance(out_dir, str) or not out_dir:
        raise tc.CompileFailure("bad_request", "out_dir: expected a path")
    _precheck(p)
    out = tc.build_cubin(build_source_args(p), {"num_warps": p["num_warps"], "num_stages": 1}, out_dir)
    return {**out, "kernel": p["kernel"], "compile_s": round(time.perf_counter() - t0, 4)}
