#!/usr/bin/env python3
"""GPU smoke test of gemmtune's Triton templates, without the C++ engine.

Runs python/gemmtune/kernels/triton_gemm.py's kernels on an sm_90 GPU two ways, both with torch
tensors, and compares D with a float64 torch reference:
  jit  an ordinary @triton.jit launch (Triton specializes on the actual arguments);
  aot  the exact compile of the C++ path (gemmtune.triton_compile.build_source_args ->
       triton.compile for GPUTarget("cuda", 90, 32)), launched through Triton's launcher.
A case that fails here is a template bug; one that passes here but fails through the engine
points at the C++ launch (argument order, scratch buffers, grid).

    PYTHONPATH=python python3 tests/python/gpu_smoke_triton.py [-k SUBSTRING] [-v]
    PYTHONPATH=python python3 tests/python/gpu_smoke_triton.py --interpret   # CPU, Triton's interpreter

Exit 0 all passed, 1 a case failed, 77 skipped (no torch, no CUDA GPU, or not sm_90).
Also every check: D outside its logical region (padding of the leading dimension) must stay
untouched, and NaN-poisoned padding of A, B, C must never be read.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import traceback

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SKIP = 77


def cdiv(a, b):
    return (a + b - 1) // b


# --------------------------------------------------------------------------------------------
# Cases: template params (as in a compile request, minus ld_div16 / dims_div16, which are
# derived from the shapes) plus the problem.

def _case(name, kernel, dtype, m, n, k, *, out=None, layout="rc", c_row=True, d_row=True, pad=(0, 0, 0, 0),
          alpha=1.0, beta=0.0, has_bias=False, act="none", scale="none", tf32=False, tile=(64, 64, 32),
          warps=4, stages=3, split_k=1, group_m=8, fast_accum=False, b_dtype=None):
    a_dt = dtype
    b_dt = b_dtype or dtype
    if out is None:
        out = "bf16" if a_dt in ("e4m3", "e5m2") else a_dt
    return {
        "name": name, "m": m, "n": n, "k": k, "pad": pad, "alpha": alpha, "beta": beta,
        "params": {
            "kernel": kernel, "a_dtype": a_dt, "b_dtype": b_dt, "out_dtype": out,
            "a_row": layout[0] == "r", "b_row": layout[1] == "r", "c_row": c_row, "d_row": d_row,
            "has_c": beta != 0.0, "has_bias": has_bias, "act": act, "scale": scale, "tf32": tf32,
            "fp8_fast_accum": fast_accum,
            "block_m": tile[0], "block_n": tile[1], "block_k": tile[2], "group_m": group_m,
            "split_k": split_k, "num_sms": 0, "num_warps": warps, "num_stages": stages,
        },
    }


CASES = [
    # Odd shapes, no divisibility anywhere: masks on M, N, K.
    _case("tiled_bf16_linear_odd", "gemm_tiled", "bf16", 300, 200, 264, has_bias=True, act="gelu_tanh"),
    _case("tiled_fp16_cc_colD_padded", "gemm_tiled", "fp16", 129, 77, 95, layout="cr", c_row=False, d_row=False,
          pad=(8, 16, 3, 5), beta=0.5, act="silu", tile=(128, 64, 32)),
    _case("tiled_bf16_rr_big_tiles", "gemm_tiled", "bf16", 512, 384, 512, layout="rr", beta=-1.0, has_bias=True,
          act="relu", tile=(128, 128, 64), warps=8),
    _case("tiled_fp16_group1", "gemm_tiled", "fp16", 1000, 1000, 128, group_m=1, tile=(128, 128, 32), warps=8),
    _case("splitk_bf16", "gemm_tiled", "bf16", 64, 256, 4096, split_k=4, beta=0.25, alpha=0.5, has_bias=True,
          act="relu", tile=(64, 64, 64)),
    _case("splitk_fp16_odd", "gemm_tiled", "fp16", 33, 70, 1000, split_k=3, layout="cc", d_row=False, act="silu"),
    _case("persistent_bf16_linear", "gemm_persistent", "bf16", 500, 384, 512, has_bias=True, act="relu",
          tile=(128, 128, 64), warps=8),
    _case("persistent_fp16_cr_padded", "gemm_persistent", "fp16", 256, 320, 320, layout="cr", pad=(16, 32, 0, 8),
          beta=1.0, act="gelu_tanh", tile=(128, 64, 64)),
    _case("persistent_bf16_rr_small", "gemm_persistent", "bf16", 17, 48, 64, layout="rr", tile=(64, 64, 64)),
    _case("persistent_bf16_many_tiles", "gemm_persistent", "bf16", 2048, 2048, 256, tile=(128, 128, 64), warps=8),
    _case("fp32_ieee_tiled", "gemm_tiled", "fp32", 100, 90, 130, beta=2.0, tile=(64, 64, 32)),
    _case("fp32_tf32_tiled", "gemm_tiled", "fp32", 256, 256, 512, tf32=True, tile=(128, 128, 32), warps=8),
    _case("fp32_tf32_persistent", "gemm_persistent", "fp32", 256, 256, 512, tf32=True, tile=(128, 128, 32),
          warps=8),
    _case("e4m3_tensorwise_persistent", "gemm_persistent", "e4m3", 256, 512, 1024, scale="tensorwise",
          tile=(128, 128, 128), warps=8, has_bias=True, act="gelu_tanh"),
    _case("e4m3_rowwise_tiled_rr", "gemm_tiled", "e4m3", 200, 160, 512, layout="rr", scale="rowwise",
          tile=(64, 64, 64), has_bias=True),
    _case("e4m3_rowwise_tiled_linear", "gemm_tiled", "e4m3", 96, 1024, 2048, scale="rowwise", tile=(64, 128, 128),
          warps=8),
    _case("e4m3_fast_accum", "gemm_tiled", "e4m3", 128, 256, 1024, scale="tensorwise", tile=(64, 128, 128),
          warps=8, fast_accum=True),
    _case("e5m2_tensorwise", "gemm_tiled", "e5m2", 128, 128, 256, scale="tensorwise", tile=(64, 64, 64)),
    _case("e4m3_e5m2_mixed", "gemm_tiled", "e4m3", 128, 128, 256, b_dtype="e5m2", scale="tensorwise",
          tile=(64, 64, 64)),
    _case("e4m3_persistent_col_a", "gemm_persistent", "e4m3", 256, 256, 512, layout="cc", scale="tensorwise",
          tile=(128, 128, 128), warps=8),
    _case("e4m3_splitk_rowwise", "gemm_tiled", "e4m3", 32, 512, 8192, scale="rowwise", split_k=8,
          tile=(32, 64, 128), beta=1.0, out="fp16"),
    _case("bf16_out_fp32", "gemm_tiled", "bf16", 128, 128, 128, out="fp32", beta=1.0, act="silu"),
    # Block scales (1x128 of A, 128x128 of B): m, n past a block, k with a partial last block.
    _case("e4m3_block_tiled_odd", "gemm_tiled", "e4m3", 200, 328, 1000, scale="block", tile=(64, 128, 128),
          warps=8, has_bias=True, act="gelu_tanh"),
    _case("e4m3_block_persistent", "gemm_persistent", "e4m3", 256, 384, 1024, scale="block", tile=(128, 128, 128),
          warps=8, beta=0.5),
    _case("e4m3_block_splitk_bk64", "gemm_tiled", "e4m3", 32, 512, 4096, scale="block", split_k=4,
          tile=(32, 64, 64), out="fp16"),
]

# For Triton's interpreter (CPU, numpy): fp16 / fp32 only, small shapes.
INTERPRET_CASES = [
    _case("i_tiled_fp16_odd", "gemm_tiled", "fp16", 37, 45, 70, has_bias=True, act="gelu_tanh", tile=(16, 32, 16)),
    _case("i_tiled_fp32_cc", "gemm_tiled", "fp32", 33, 20, 40, layout="cc", c_row=False, d_row=False,
          pad=(3, 5, 2, 1), beta=0.5, act="silu", tile=(16, 16, 16)),
    _case("i_tiled_fp16_rr", "gemm_tiled", "fp16", 40, 24, 50, layout="rr", beta=-1.0, act="relu",
          tile=(32, 16, 16), group_m=2),
    _case("i_splitk_fp32", "gemm_tiled", "fp32", 20, 30, 200, split_k=3, beta=1.0, has_bias=True, act="relu",
          tile=(16, 16, 32), d_row=False),
    _case("i_splitk_fp16_cr", "gemm_tiled", "fp16", 24, 40, 150, layout="cr", split_k=2, act="silu",
          tile=(16, 16, 16), pad=(2, 3, 0, 4)),
    _case("i_tiled_fp32_many_tiles", "gemm_tiled", "fp32", 70, 90, 20, group_m=3, tile=(16, 16, 16),
          beta=1.0, c_row=False),
    _case("i_persistent_fp16", "gemm_persistent", "fp16", 40, 48, 64, has_bias=True, act="relu",
          tile=(16, 16, 16), pad=(16, 0, 0, 0)),
    _case("i_persistent_fp32_cr", "gemm_persistent", "fp32", 33, 40, 48, layout="cr", beta=2.0, tile=(16, 16, 16),
          pad=(15, 8, 0, 0)),
]


# --------------------------------------------------------------------------------------------


class Env:
    def __init__(self, interpret: bool):
        import torch
        self.torch = torch
        self.device = "cpu" if interpret else "cuda"
        self.dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                       "e4m3": getattr(torch, "float8_e4m3fn", None), "e5m2": getattr(torch, "float8_e5m2", None)}
        self.gen = torch.Generator(device="cpu").manual_seed(1234)


def make_matrix(env, rows, cols, row_major, pad, dtype_name, nan_pad=True, scale=1.0):
    """Logical [rows, cols] view with the given layout and ld = (cols or rows) + pad; the
    padding holds NaN. Returns (view, storage, ld)."""
    torch = env.torch
    dt = env.dtypes[dtype_name]
    outer, inner = (rows, cols) if row_major else (cols, rows)
    ld = inner + pad
    store32 = torch.full((outer, ld), float("nan") if nan_pad else 0.0, dtype=torch.float32)
    vals = torch.randn((outer, inner), generator=env.gen, dtype=torch.float32) * scale
    store32[:, :inner] = vals
    store = store32.to(dt).to(env.device)
    view = store[:, :inner] if row_major else store[:, :inner].T
    return view, store, ld


def reference(env, case, a, b, c, bias, sa, sb):
    torch = env.torch
    p = case["params"]
    f64 = lambda t: t.to(torch.float32).to(torch.float64).cpu()  # noqa: E731
    A, B = f64(a), f64(b)
    acc = A @ B
    mag = A.abs() @ B.abs()
    mult = case["alpha"]
    v = acc * mult
    mag = mag * abs(mult)
    if p["scale"] == "tensorwise":
        s = f64(sa)[0] * f64(sb)[0]
        v, mag = v * s, mag * abs(s)
    elif p["scale"] == "rowwise":
        s = f64(sa)[:, None] * f64(sb)[None, :]
        v, mag = v * s, mag * s.abs()
    elif p["scale"] == "block":  # the inputs times their block's scales (layouts: gemmtune/problem.hpp)
        M, K = A.shape
        N = B.shape[1]
        kb = -(-K // 128)
        SA = f64(sa).reshape(kb, M).t().repeat_interleave(128, dim=1)[:, :K]
        SB = f64(sb).reshape(-(-N // 128), -1)[:, :kb].t().repeat_interleave(128, dim=0)[:K]
        SB = SB.repeat_interleave(128, dim=1)[:, :N]
        A, B = A * SA, B * SB
        v = (A @ B) * mult
        mag = (A.abs() @ B.abs()) * abs(mult)
    if p["has_c"]:
        C = f64(c)
        v = v + case["beta"] * C
        mag = mag + abs(case["beta"]) * C.abs()
    if p["has_bias"]:
        bb = f64(bias)[None, :]
        v, mag = v + bb, mag + bb.abs()
    if p["act"] == "relu":
        v = v.clamp_min(0.0)
    elif p["act"] == "gelu_tanh":
        v = 0.5 * v * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    elif p["act"] == "silu":
        v = v * torch.sigmoid(v)
    return v, mag


def tolerance(p):
    """(relative to the result, relative to sum |a||b| + |terms|): output rounding and input /
    accumulation precision."""
    out_eps = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -20}.get(p["out_dtype"], 2.0 ** -3)
    a = p["a_dtype"]
    if a == "fp32":
        in_eps = 2.0 ** -10 if p["tf32"] else 2.0 ** -19
    elif a in ("e4m3", "e5m2"):
        in_eps = 2.0 ** -8 if p.get("fp8_fast_accum") else 2.0 ** -10
    else:
        in_eps = 2.0 ** -16
    return 1.5 * out_eps, 1.5 * in_eps


def run_case(env, case, mode, verbose=False):
    import triton
    from gemmtune import triton_compile as tc
    torch = env.torch
    p = dict(case["params"])
    M, N, K = case["m"], case["n"], case["k"]
    pad_a, pad_b, pad_c, pad_d = case["pad"]
    for name in (p["a_dtype"], p["b_dtype"], p["out_dtype"]):
        if env.dtypes[name] is None:
            return "skip", f"torch lacks {name}"
    fp8 = p["a_dtype"] in ("e4m3", "e5m2")
    a, _, lda = make_matrix(env, M, K, p["a_row"], pad_a, p["a_dtype"])
    b, _, ldb = make_matrix(env, K, N, p["b_row"], pad_b, p["b_dtype"], scale=1.0 if fp8 else K ** -0.5)
    c, _, ldc = make_matrix(env, M, N, p["c_row"], pad_c, p["out_dtype"])
    d, d_store, ldd = make_matrix(env, M, N, p["d_row"], pad_d, p["out_dtype"])
    d.fill_(float("nan"))
    out_t = env.dtypes[p["out_dtype"]]
    bias = (torch.randn(N, generator=env.gen) * 0.5).to(out_t).to(env.device)
    n_sa = M if p["scale"] == "rowwise" else 1
    n_sb = N if p["scale"] == "rowwise" else 1
    if p["scale"] == "block":  # sa [kb, M]; sb [nb, round_up(kb, 4)]
        n_sa = cdiv(K, 128) * M
        n_sb = cdiv(N, 128) * cdiv(cdiv(K, 128), 4) * 4
    sa = (torch.rand(n_sa, generator=env.gen) + 0.5).to(env.device)
    sb = (torch.rand(n_sb, generator=env.gen) * 0.05 + 0.01).to(env.device)
    if p["scale"] == "none":
        sa = torch.ones(1, device=env.device)
        sb = torch.ones(1, device=env.device)
    split_k = p["split_k"] if p["kernel"] == "gemm_tiled" else 1
    workspace = torch.full((max(1, split_k * M * N), ), float("nan"), dtype=torch.float32, device=env.device)

    p["ld_div16"] = {"a": lda % 16 == 0, "b": ldb % 16 == 0, "c": ldc % 16 == 0, "d": ldd % 16 == 0}
    p["dims_div16"] = {"m": M % 16 == 0, "n": N % 16 == 0, "k": K % 16 == 0}
    if p["kernel"] == "gemm_persistent":
        sms = torch.cuda.get_device_properties(0).multi_processor_count if env.device == "cuda" else 4
        p["num_sms"] = sms
        if not (p["ld_div16"]["a"] and p["ld_div16"]["b"]):
            return "skip", "persistent needs 16-element leading dimensions"
    norm = tc.normalize_params(p)
    tiles = cdiv(M, norm["block_m"]) * cdiv(N, norm["block_n"])
    if norm["kernel"] == "gemm_persistent":
        grid = (min(norm["num_sms"], tiles), 1, 1)
    else:
        grid = (tiles, split_k, 1)
    alpha, beta = float(case["alpha"]), float(case["beta"])
    runtime = [a, b, c, d, bias, sa, sb, workspace, M, N, K, lda, ldb, ldc, ldd, alpha, beta]
    reduce_p = dict(norm, kernel="splitk_reduce", num_warps=4)
    reduce_grid = (cdiv(M * N, tc.REDUCE_BLOCK), 1, 1)
    reduce_runtime = [workspace, c, d, bias, sa, sb, M, N, ldc, ldd, alpha, beta]

    if mode == "jit":
        fn, _, constexprs, _ = tc.build_source_args(norm)
        fn[grid](*runtime, **constexprs, num_warps=norm["num_warps"], num_stages=norm["num_stages"])
        if split_k > 1:
            rfn, _, rce, _ = tc.build_source_args(tc.normalize_params(reduce_p))
            rfn[reduce_grid](*reduce_runtime, **rce, num_warps=4)
    else:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        def aot(params, grid_, args):
            fn, sig, ce, attrs = tc.build_source_args(params)
            k = triton.compile(ASTSource(fn, sig, ce, attrs), target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": params["num_warps"], "num_stages": params["num_stages"]})
            extra = [ce[name] for name in fn.arg_names[len(args):]]
            k[grid_](*args, *extra)
        aot(norm, grid, runtime)
        if split_k > 1:
            aot(tc.normalize_params(reduce_p), reduce_grid, reduce_runtime)
    if env.device == "cuda":
        torch.cuda.synchronize()

    ref, mag = reference(env, case, a, b, c, bias, sa, sb)
    got = d.to(torch.float32).to(torch.float64).cpu()
    r_out, r_in = tolerance(norm)
    act_gain = 1.2 if norm["act"] in ("gelu_tanh", "silu") else 1.0
    bound = r_out * ref.abs() + act_gain * r_in * mag + 1e-30
    err = (got - ref).abs()
    bad = ~(err <= bound)  # NaN counts as bad
    # The padding of D (columns / rows beyond the logical extent) must stay NaN.
    inner = N if norm["d_row"] else M
    pad_region = d_store[:, inner:].to(torch.float32).cpu()
    pad_ok = bool(torch.isnan(pad_region).all()) if pad_region.numel() else True
    worst = float((err / bound).nan_to_num(float("inf")).max())
    info = f"max err/bound {worst:.3g}, max |ref| {float(ref.abs().max()):.3g}"
    if bad.any() or not pad_ok:
        idx = bad.nonzero()[:3].tolist()
        samples = ", ".join(f"D[{i},{j}]={float(got[i, j]):.5g} ref={float(ref[i, j]):.5g}" for i, j in idx)
        why = f"{int(bad.sum())}/{bad.numel()} elements out of bound ({samples})"
        if not pad_ok:
            why += "; D's padding was written"
        return "fail", f"{why}; {info}"
    return "pass", info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", default="", help="run only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print the traceback of an error")
    ap.add_argument("--interpret", action="store_true", help="CPU: Triton's interpreter (jit mode only)")
    ap.add_argument("--modes", default="jit,aot", help="jit, aot or both (default)")
    args = ap.parse_args(argv)

    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    sys.path.insert(0, os.path.join(REPO, "python"))
    try:
        import torch
    except ImportError:
        print("gpu_smoke_triton: SKIP: torch is not installed")
        return SKIP
    try:
        import triton
    except ImportError:
        print("gpu_smoke_triton: SKIP: triton is not installed")
        return SKIP
    if args.interpret:
        cases, modes = INTERPRET_CASES, ["jit"]
    else:
        if not torch.cuda.is_available():
            print("gpu_smoke_triton: SKIP: no CUDA GPU")
            return SKIP
        cap = torch.cuda.get_device_capability()
        if cap != (9, 0):
            print(f"gpu_smoke_triton: SKIP: the templates target sm_90a, this GPU is sm_{cap[0]}{cap[1]}")
            return SKIP
        cases, modes = CASES, [m for m in args.modes.split(",") if m]
    env = Env(args.interpret)
    if env.device == "cuda":
        # Device-side TMA descriptors (gemm_persistent) live in Triton's global scratch.
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    print(f"gpu_smoke_triton: triton {triton.__version__}, torch {torch.__version__}, "
          f"{'interpreter' if args.interpret else torch.cuda.get_device_name()}")
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for case in cases:
        if args.k not in case["name"]:
            continue
        for mode in modes:
            try:
                status, info = run_case(env, case, mode, args.v)
            except Exception as exc:  # noqa: BLE001
                status, info = "fail", f"error: {type(exc).__name__}: {str(exc).splitlines()[-1] if str(exc) else ''}"
                if args.v:
                    traceback.print_exc()
            counts[status] += 1
            print(f"{status.upper():4} {case['name']} [{mode}] {info}", flush=True)
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
