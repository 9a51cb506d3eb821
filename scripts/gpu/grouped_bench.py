#!/usr/bin/env python3
"""Issue 18 on the H200: gemmtune's Triton grouped GEMM (python/gemmtune/kernels/triton_grouped.py)
checked and timed against torch._grouped_mm and a loop of torch.mm, in one run (~3 minutes).

    python3 scripts/gpu/grouped_bench.py --out "$OUT"      # from the repo root; torch + triton

1. Checks: every config of CONFIGS and SHORT_CONFIGS (bf16) and FP8_CONFIGS and FP8_SHORT_CONFIGS
   (e4m3, tensorwise and rowwise) on small
   odd cases (ragged and empty groups, n and k not multiples of the tile, contiguous and masked,
   bias and activations), then every bf16 config on every benchmark case (balanced and skewed):
   D poisoned with NaN, compared per group with a float64 reference of the same inputs (the
   project's tolerances: norm-wise and element-wise, NaN never passes), and the rows no group
   owns must still hold the poison.
2. Timing, per shape (Mixtral-8x7B G=8 n=14336 k=4096 and n=4096 k=14336; DeepSeek-V3 G=32
   n=4096 k=7168 and n=7168 k=2048) and rows per group (64, 512, 4096): the config is picked once
   per shape and rows, as the engine's tune picks (the least mean of its medians on the balanced
   and the skewed split), and used unchanged on both (a split never re-tunes). Contenders interleaved, each run on a cold L2 (a 512 MiB buffer is
   written between runs), CUDA events, medians: triton (the pick), torch._grouped_mm (offs on
   the GPU), loop (torch.mm per group, split known on the host). FP8 (e4m3 rowwise) beside
   torch._scaled_grouped_mm where it exists and the dense torch._scaled_mm of the same total
   size. Writes <out>/grouped.json and <out>/grouped.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "triton_grouped", os.path.join(ROOT, "python", "gemmtune", "kernels", "triton_grouped.py"))
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)

DEV = "cuda"
# (block_m, block_n, block_k, num_warps, num_stages, group_m[, chunks]): the engine's configs
# (src/backends/triton/triton_grouped.cpp). Also tried on the H200, none better than these by more
# than run-to-run noise: 64x128x64 with 8 stages, 64x64x128 with 6, 64x256x64 with 5, 256x128x64
# (bf16); 128x256x128 with 4 stages (fp8).
CONFIGS = [
    (128, 256, 64, 8, 4, 8),
    (128, 256, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 8),
    (128, 128, 64, 4, 4, 8),
    (64, 256, 64, 4, 4, 8),
    (64, 128, 128, 4, 4, 8),
]
FP8_CONFIGS = [
    (128, 256, 128, 8, 3, 8),
    (128, 128, 128, 8, 4, 8),
    (128, 128, 128, 4, 4, 8),
    (64, 256, 128, 4, 4, 8),
    (64, 128, 128, 4, 5, 8),
]
# Added where groups are short (<= 128 rows a group): tiles of 2-4 row slices of 64 that load each
# weight tile once for all of them (the kernel's CHUNKS). The first is in the engine's configs at
# <= 128 rows a group (measured here the fastest for DeepSeek-V3's up projection at 64 rows); the
# others are timed here only.
SHORT_CONFIGS = [(64, 256, 64, 8, 4, 8, 2), (64, 128, 128, 8, 3, 8, 2), (64, 128, 64, 8, 4, 8, 4)]
FP8_SHORT_CONFIGS = [(64, 256, 128, 8, 3, 8, 2), (64, 128, 128, 8, 4, 8, 3)]
SHAPES = [  # (name, G, n, k)
    ("mixtral-up", 8, 14336, 4096),
    ("mixtral-down", 8, 4096, 14336),
    ("deepseek-up", 32, 4096, 7168),
    ("deepseek-down", 32, 7168, 2048),
]
ROWS = [64, 512, 4096]
SKEW = 1.0  # Zipf exponent of the skewed split


def _alloc(size, align, stream):
    return torch.empty(size, dtype=torch.int8, device=DEV)


triton.set_allocator(_alloc)  # global scratch for the in-kernel TMA descriptors
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count


# ---- the memory's limit ------------------------------------------------------------------------
@triton.jit
def _stream_read(x, out, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    """Reads x[0:n] (int32) once, grid-strided; one value per program so nothing is dropped."""
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in tl.range(tl.program_id(0) * BLOCK, n, PROGRAMS * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc ^= tl.load(x + offs, mask=offs < n, other=0, eviction_policy="evict_first")
    tl.store(out + tl.program_id(0), tl.xor_sum(acc, 0))


_stream_buf = None
STREAM_CONFIGS = [(4096, 8, 2), (4096, 8, 4), (8192, 16, 2), (2048, 4, 8)]  # (BLOCK, warps, programs per SM)


def stream_ms(nbytes, iters):
    """How long this GPU takes to read nbytes once from a cold L2 (ms): the best median over
    STREAM_CONFIGS of a streaming-read kernel, launch included (as a GEMM's time is)."""
    global _stream_buf
    n = nbytes // 64 * 16  # int32 elements, a multiple of 16 (vector loads; <64 bytes short)
    if _stream_buf is None or _stream_buf.numel() < n:
        _stream_buf = torch.ones(n, dtype=torch.int32, device=DEV)
    out = torch.empty(8 * NUM_SMS, dtype=torch.int32, device=DEV)
    fns = [lambda b=b, w=w, p=p: _stream_read[(p * NUM_SMS,)](_stream_buf, out, n, BLOCK=b, PROGRAMS=p * NUM_SMS,
                                                              num_warps=w)
           for b, w, p in STREAM_CONFIGS]
    return min(timed(fns, iters))


# ---- splits ----------------------------------------------------------------------------------
def make_split(G, per_group, skew, gen, multiple=1):
    """G row counts summing to G * per_group: equal when skew == 0, else Zipf(skew) weights in a
    random order; counts rounded to `multiple` (the sum kept)."""
    total = G * per_group
    if skew == 0:
        return [per_group] * G
    w = torch.tensor([(i + 1) ** -skew for i in range(G)], dtype=torch.float64)
    w = w[torch.randperm(G, generator=gen)]
    counts = [int(x) // multiple * multiple for x in (w / w.sum() * total).tolist()]
    counts[int(torch.argmax(w))] += total - sum(counts)
    return counts


# ---- the kernel ------------------------------------------------------------------------------
def grouped(a, w, rows, d, cfg, masked, max_m=0, scale=None, bias=None, act="none", alpha=1.0, fast_accum=False):
    """D per group = act(alpha * scales * A_g @ W[g]^T + bias[g]). a [M_ROWS, K] (contiguous) or
    [G, max_m, K] (masked); w [G, N, K]; rows int32 [G] (ends, or counts); d like a with N."""
    bm, bn, bk, nw, ns, gm, chunks = (tuple(cfg) + (1,))[:7]
    G, N, K = w.shape
    fp8 = a.dtype == torch.float8_e4m3fn
    sa, sb = scale if scale else (None, None)
    mode = 0 if scale is None else (1 if sa.numel() == 1 else 2)
    m_rows = a.shape[0] if not masked else G * max_m
    tg.grouped_gemm[(NUM_SMS,)](
        a, w, d, rows, bias, sa, sb, G, m_rows, max_m, N, K, a.stride(-2), d.stride(-2), alpha,
        MASKED=masked, HAS_BIAS=bias is not None, ACT=tg.ACT_CODES[act], SCALE=mode,
        MAX_IMPRECISE=(bk if fp8 and not fast_accum else None), MAX_G=max(64, triton.next_power_of_2(G)),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, CHUNKS=chunks, GROUP_M=gm, NUM_SMS=NUM_SMS, num_warps=nw, num_stages=ns)


# ---- reference and check ---------------------------------------------------------------------
def tolerance(k, fp8, act):
    o = 2.0 ** -8  # bf16 output
    a = 16 * 2.0 ** -24 * math.sqrt(max(k, 16))
    f = 2.0 ** -11 if act in ("gelu_tanh", "silu") else 0.0
    q = 2.0 ** -13 if fp8 else 0.0
    return 2.5 * o + 2 * a + f + 2 * q, 4 * o + f, 2 * o + 4 * a + f + 4 * q


def act_f64(v, act):
    if act == "relu":
        return torch.relu(v)
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(v, approximate="tanh")
    if act == "silu":
        return torch.nn.functional.silu(v)
    return v


def check(a, w, counts, d, masked, max_m=0, scale=None, bias=None, act="none", alpha=1.0):
    """Per-group float64 comparison; returns (ok, worst rel err, reason)."""
    G, N, K = w.shape
    fp8 = a.dtype == torch.float8_e4m3fn
    rel_tol, elem_rel, elem_abs = tolerance(K, fp8, act)
    worst = 0.0
    start = 0
    a2 = a.reshape(-1, K)
    d2 = d.reshape(-1, N)
    owned = torch.zeros(d2.shape[0], dtype=torch.bool, device=DEV)
    for g, m in enumerate(counts):
        r0 = g * max_m if masked else start
        start += m
        if m == 0:
            continue
        owned[r0:r0 + m] = True
        ref = a2[r0:r0 + m].double() @ w[g].double().T
        if scale is not None:
            sa, sb = scale
            if sa.numel() == 1:
                ref = ref * sa.double() * sb[g].double()
            else:
                ref = ref * sa.reshape(-1)[r0:r0 + m].double()[:, None] * sb[g].double()[None, :]
        ref = ref * alpha
        if bias is not None:
            ref = ref + bias[g].double()[None, :]
        ref = act_f64(ref, act)
        got = d2[r0:r0 + m].double()
        if not torch.isfinite(got).all():
            return False, float("inf"), f"group {g}: {int((~torch.isfinite(got)).sum())} non-finite values"
        rms = ref.pow(2).mean().sqrt().item()
        norm = ref.norm().item()
        rel = (got - ref).norm().item() / norm if norm > 0 else (got - ref).norm().item()
        worst = max(worst, rel)
        bad = int(((got - ref).abs() > elem_rel * ref.abs() + elem_abs * rms).sum())
        if rel > rel_tol or bad:
            return False, rel, f"group {g} (m={m}): rel err {rel:.3g} (limit {rel_tol:.3g}), {bad} elements over bound"
    untouched = d2[~owned]
    if untouched.numel() and not torch.isnan(untouched.float()).all():
        return False, worst, "rows owned by no group were written"
    return True, worst, ""


def make_case(G, N, K, counts, masked, dtype, gen, max_m=0):
    """A, W, rows (int32 on the GPU), D poisoned."""
    wb = torch.randn(G, N, K, generator=gen, device=DEV, dtype=torch.float32)
    if masked:
        max_m = max_m or max(max(counts), 1)
        a = torch.randn(G, max_m, K, generator=gen, device=DEV, dtype=torch.float32)
        for g, m in enumerate(counts):  # the padding rows hold NaN: they must never reach D
            a[g, m:] = float("nan")
        rows = torch.tensor(counts, dtype=torch.int32, device=DEV)
        d = torch.full((G, max_m, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    else:
        total = sum(counts)
        a = torch.randn(total + 37, K, generator=gen, device=DEV, dtype=torch.float32)  # 37 unowned rows
        rows = torch.tensor(list(_cumsum(counts)), dtype=torch.int32, device=DEV)
        d = torch.full((total + 37, N), float("nan"), device=DEV, dtype=torch.bfloat16)
    return a.to(dtype), wb.to(dtype), rows, d, max_m


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


# Small cases: (G, N, K, counts, masked, act, bias). PLAIN ones run with every config; EPILOGUE
# ones (activations, bias, n not a multiple of 16) with the first config of each dtype.
PLAIN = [
    (4, 384, 320, [100, 0, 257, 3], False, "none", False),
    (4, 384, 320, [100, 0, 257, 3], True, "none", False),
    (33, 256, 512, [i * 7 % 50 for i in range(33)], False, "none", False),
    (3, 256, 256, [0, 0, 0], False, "none", False),
    (1, 512, 1024, [777], True, "none", False),
]
EPILOGUE = [
    (7, 200, 144, [1, 64, 65, 0, 129, 300, 17], False, "silu", True),
    (7, 200, 144, [1, 64, 65, 0, 129, 300, 17], True, "gelu_tanh", True),
    (2, 512, 1024, [777, 5], False, "relu", False),
]
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn


def small_runs():
    """(dtype, case, scale mode, cfg) of every small check."""
    runs = []
    for dtype, configs, modes in ((BF16, CONFIGS + SHORT_CONFIGS, ["none"]),
                                  (FP8, FP8_CONFIGS + FP8_SHORT_CONFIGS, ["tensorwise", "rowwise"])):
        for mode in modes:
            runs += [(dtype, case, mode, cfg) for case in PLAIN for cfg in configs]
            runs += [(dtype, case, mode, configs[0]) for case in EPILOGUE]
    return runs


def run_small(dtype, case, mode, cfg, seed):
    """One small check: (ok, rel, reason, name)."""
    G, N, K, counts, masked, act, has_bias = case
    gen = torch.Generator(device=DEV).manual_seed(seed)
    a, w, rows, d, max_m = make_case(G, N, K, counts, masked, dtype, gen)
    bias = torch.randn(G, N, generator=gen, device=DEV).to(BF16) if has_bias else None
    m_all = a.reshape(-1, K).shape[0]
    scale = None
    if mode == "tensorwise":
        scale = (torch.rand(1, generator=gen, device=DEV) + 0.5, torch.rand(G, generator=gen, device=DEV) + 0.5)
    elif mode == "rowwise":
        scale = (torch.rand(m_all, generator=gen, device=DEV) + 0.5, torch.rand(G, N, generator=gen, device=DEV) + 0.5)
    grouped(a, w, rows, d, cfg, masked, max_m, scale=scale, bias=bias, act=act, alpha=0.75)
    ok, rel, why = check(a, w, counts, d, masked, max_m, scale=scale, bias=bias, act=act, alpha=0.75)
    name = (f"{str(dtype)[6:]} G={G} n={N} k={K} {'masked' if masked else 'contiguous'} act={act} "
            f"bias={has_bias} scale={mode} cfg={cfg}")
    return ok, rel, why, name


def _warm(job):
    """In a worker process: compiles one kernel variant into the shared Triton cache by running it
    on a tiny case of the same specialization."""
    dtype_name, case, mode, cfg = job
    G, N, K, counts, masked, act, has_bias = case
    tiny = (min(G, 2), N, K, [3, 1][:min(G, 2)], masked, act, has_bias)
    try:
        run_small(getattr(torch, dtype_name), tiny, mode, cfg, 0)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the real run reports it
        return f"{job}: {type(exc).__name__}: {exc}"
    return ""


def warm_cache(log):
    """Compiles every variant the run uses in parallel processes (Triton compiles one kernel at a
    time per process; the cache directory is shared), so the checks and timings below only load."""
    import multiprocessing as mp
    seen, jobs = set(), []
    for dtype, case, mode, cfg in small_runs() + [(BF16, PLAIN[0], "none", c) for c in CONFIGS + SHORT_CONFIGS] + \
            [(FP8, PLAIN[0], "rowwise", c) for c in FP8_CONFIGS]:
        G, N, K, counts, masked, act, has_bias = case
        key = (str(dtype)[6:], N % 16 == 0, masked, act, has_bias, mode, cfg)
        if key not in seen:
            seen.add(key)
            jobs.append((str(dtype)[6:], case, mode, cfg))
    workers = max(1, min(12, (os.cpu_count() or 2) - 2))
    with mp.get_context("spawn").Pool(workers) as pool:
        errors = [e for e in pool.map(_warm, jobs) if e]
    for e in errors:
        log(f"warm: {e}")
    log(f"warm: {len(jobs)} kernel variants compiled by {workers} processes")


def small_checks(log):
    results = []
    for i, (dtype, case, mode, cfg) in enumerate(small_runs()):
        ok, rel, why, name = run_small(dtype, case, mode, cfg, 100 + i)
        results.append({"case": name, "ok": ok, "rel_err": rel, "reason": why})
        if not ok:
            log(f"FAIL {name}: {why}")
    log(f"small checks: {sum(r['ok'] for r in results)}/{len(results)} passed")
    return results


# ---- timing ----------------------------------------------------------------------------------
_flush = None


def timed(fns, iters):
    """Median ms of each fn, interleaved, cold L2."""
    global _flush
    if _flush is None:
        _flush = torch.ones(512 << 20, dtype=torch.int8, device=DEV)  # read, never written again: clean L2
    times = [[] for _ in fns]
    for f in fns:  # warm-up (compiles, cuBLAS heuristics)
        f()
    for _ in range(iters):
        for i, f in enumerate(fns):
            _flush.amax()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            times[i].append((s, e))
    torch.cuda.synchronize()
    return [statistics.median(s.elapsed_time(e) for s, e in t) for t in times]


def try_fn(fn):
    """fn if one call works, else (None, the error)."""
    try:
        fn()
        torch.cuda.synchronize()
        return fn, ""
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def engine_contenders(log):
    """gemmtune through its engine (libgemmtune_c.so, $GEMMTUNE_LIB): gemmtune.torch.grouped_mm (the
    engine's tuned pick, selected on first use) and a dense loop of the cuBLASLt pick per group
    (an engine limited to cuBLASLt: one dense tune per group size). None when not importable."""
    try:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import gemmtune
        import gemmtune.torch as gt
        from gemmtune.torch import _grouped
        quick = {"warmup_ms": 10, "min_rounds": 3, "max_rounds": 5}  # tunes kept short (the run's budget)
        gt.configure(backends=["triton", "cublaslt", "cutlass", "cutedsl"], log_level="warning", tune=quick)
        dense = gemmtune.Engine(backends=["cublaslt"], log_level="warning", tune=quick)
    except Exception as exc:  # noqa: BLE001 - reported
        log(f"engine: not used: {type(exc).__name__}: {exc}")
        return None
    return gt, _grouped, dense


def bench(log, iters, check_all, eng=None, rows_per_group=ROWS):
    gen = torch.Generator(device=DEV).manual_seed(2)
    cpu_gen = torch.Generator().manual_seed(3)
    rows_out, checks = [], []
    for name, G, N, K in SHAPES:
        w = torch.randn(G, N, K, generator=gen, device=DEV, dtype=torch.bfloat16)
        wt = w.transpose(-2, -1)  # [G, K, N], K contiguous: torch._grouped_mm's mat_b
        for per in rows_per_group:
            # Both splits first: the config is picked as the engine picks it, by the mean of its
            # times on the balanced and the skewed split, and then kept for both.
            splits = []
            for skew in (0.0, SKEW):
                counts = make_split(G, per, skew, cpu_gen, multiple=16 if skew else 1)
                total = sum(counts)
                a = torch.randn(total, K, generator=gen, device=DEV, dtype=torch.bfloat16)
                offs = torch.tensor(list(_cumsum(counts)), dtype=torch.int32, device=DEV)
                d = torch.full((total, N), float("nan"), device=DEV, dtype=torch.bfloat16)
                splits.append((skew, counts, total, a, offs, d))
            configs = CONFIGS + (SHORT_CONFIGS if per <= 128 else [])
            t = timed([lambda c=c, s=s: grouped(s[3], w, s[4], s[5], c, False) for s in splits for c in configs],
                      max(3, iters // 3))
            per_split = [t[i * len(configs):(i + 1) * len(configs)] for i in range(len(splits))]
            mean = [sum(ts[j] for ts in per_split) / len(splits) for j in range(len(configs))]
            pick = configs[min(range(len(configs)), key=mean.__getitem__)]
            tune_ms = {str(c): [ts[j] for ts in per_split] for j, c in enumerate(configs)}  # [balanced, skewed]
            for skew, counts, total, a, offs, d in splits:
                label = f"{name} G={G} n={N} k={K} rows/group={per} {'skewed' if skew else 'balanced'}"
                if check_all:
                    for cfg in configs:
                        d.fill_(float("nan"))
                        grouped(a, w, offs, d, cfg, False)
                        ok, rel, why = check(a, w, counts, d, False)
                        checks.append({"case": label, "cfg": list(cfg), "ok": ok, "rel_err": rel, "reason": why})
                        if not ok:
                            log(f"FAIL {label} cfg={cfg}: {why}")
                tri = lambda: grouped(a, w, offs, d, pick, False)
                tgm, err = try_fn(lambda: torch._grouped_mm(a, wt, offs=offs))
                bounds = [0] + list(_cumsum(counts))

                def loop():
                    for g in range(G):
                        if counts[g]:
                            torch.mm(a[bounds[g]:bounds[g + 1]], wt[g], out=d[bounds[g]:bounds[g + 1]])
                fns = [tri, loop] + ([tgm] if tgm else [])
                extra = {}
                if eng is not None:
                    gt, grouped_mod, dense = eng
                    before = len(grouped_mod._kernels)
                    t_sel = time.time()
                    d2 = gt.grouped_mm(a, wt, offs=offs)
                    torch.cuda.synchronize()
                    extra["engine_select_s"] = time.time() - t_sel
                    extra["engine_new_kernels"] = len(grouped_mod._kernels) - before
                    # The kernel the engine picked: the newest of this shape (the skewed split has
                    # the balanced one's bucket, so its kernel).
                    picked = [k for key, k in grouped_mod._kernels.items()
                              if (dict(key[1]).get("groups"), dict(key[1]).get("n"), dict(key[1]).get("k")) == (G, N, K)]
                    extra["engine_pick"] = None
                    if picked:
                        desc = picked[-1].describe()
                        extra["engine_pick"] = f"{desc['backend']}:{desc['id']}"
                    ok, rel, why = check(a, w, counts, d2, False)
                    extra["engine_check"] = why or "ok"
                    if not ok:
                        log(f"FAIL {label} gemmtune.torch.grouped_mm: {why}")
                    checks.append({"case": label, "cfg": "engine", "ok": ok, "rel_err": rel, "reason": why})
                    fns.append(lambda: gt.grouped_mm(a, wt, offs=offs))
                    if skew == 0:  # the dense loop of the engine's cuBLASLt pick (one m for every group)
                        kd, _ = dense.select({"m": per, "n": N, "k": K, "dtype": "bf16"})
                        stream = torch.cuda.current_stream().cuda_stream
                        esz = a.element_size()

                        def dense_loop(kd=kd, stream=stream, esz=esz):
                            for g in range(G):
                                kd.run(a.data_ptr() + bounds[g] * K * esz, w.data_ptr() + g * N * K * esz, 0,
                                       d.data_ptr() + bounds[g] * N * esz, stream_ptr=stream)
                        fns.append(dense_loop)
                t = timed(fns, iters)
                flops = 2.0 * total * N * K
                row = {"shape": name, "G": G, "n": N, "k": K, "rows_per_group": per, "skew": skew,
                       "counts": counts, "pick": list(pick), "triton_ms": t[0], "loop_ms": t[1],
                       "grouped_mm_ms": t[2] if tgm else None, "grouped_mm_error": err,
                       "triton_tflops": flops / t[0] / 1e9, "tune_ms": tune_ms if skew == 0 else None}
                if eng is not None:
                    i = 3 if tgm else 2
                    row["engine_ms"] = t[i]
                    row["engine_dense_loop_ms"] = t[i + 1] if skew == 0 else None
                    row.update(extra)
                    row["engine_vs_grouped_mm"] = row["grouped_mm_ms"] / t[i] if tgm else None
                    row["engine_vs_loop"] = t[1] / t[i]
                row["vs_grouped_mm"] = row["grouped_mm_ms"] / t[0] if tgm else None
                row["vs_loop"] = t[1] / t[0]
                if per <= 64:  # memory-bound: the time to read the case's bytes once (B, A, D)
                    row["bytes"] = (G * N * K + total * (K + N)) * a.element_size()
                    row["stream_ms"] = stream_ms(row["bytes"], iters)
                rows_out.append(row)
                log(f"{label}: triton {t[0]:.3f} ms ({row['triton_tflops']:.0f} TFLOP/s, cfg {pick}), "
                    f"torch._grouped_mm {row['grouped_mm_ms'] if tgm else err}, loop {t[1]:.3f} ms"
                    + (f", engine {row['engine_ms']:.3f} ms ({row['engine_pick']}; new kernels {row['engine_new_kernels']}, "
                       f"select {row['engine_select_s']:.1f} s), dense loop {row['engine_dense_loop_ms']}" if eng else ""))
                del a, d
            del splits
            torch.cuda.empty_cache()
        del w, wt
    return rows_out, checks


def bench_fp8(log, iters, eng=None):
    """e4m3 rowwise, balanced splits of 512 and 4096 rows: the Triton kernel (configs timed here
    too), torch._scaled_grouped_mm, the dense torch._scaled_mm of the same total size, and with
    `eng` the engine's grouped pick (its tune: every backend with fp8 grouped candidates; checked
    like the Triton configs)."""
    gen = torch.Generator(device=DEV).manual_seed(4)
    out = []
    for name, G, N, K in SHAPES:
        w = (torch.randn(G, N, K, generator=gen, device=DEV) * 0.5).to(torch.float8_e4m3fn)
        sb = torch.rand(G, N, generator=gen, device=DEV) + 0.5
        for per in (512, 4096):
            total = G * per
            a = (torch.randn(total, K, generator=gen, device=DEV) * 0.5).to(torch.float8_e4m3fn)
            sa = torch.rand(total, generator=gen, device=DEV) + 0.5
            offs = torch.tensor(list(_cumsum([per] * G)), dtype=torch.int32, device=DEV)
            d = torch.full((total, N), float("nan"), device=DEV, dtype=torch.bfloat16)
            label = f"fp8 {name} rows/group={per}"
            fails = []
            for cfg in FP8_CONFIGS:
                d.fill_(float("nan"))
                grouped(a, w, offs, d, cfg, False, scale=(sa, sb))
                ok, rel, why = check(a, w, [per] * G, d, False, scale=(sa, sb))
                if not ok:
                    fails.append(f"{cfg}: {why}")
                    log(f"FAIL {label} cfg={cfg}: {why}")
            t = timed([lambda c=c: grouped(a, w, offs, d, c, False, scale=(sa, sb)) for c in FP8_CONFIGS], iters)
            best = min(range(len(FP8_CONFIGS)), key=t.__getitem__)
            sgm, err = try_fn(lambda: torch._scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, offs=offs,
                                                                out_dtype=torch.bfloat16))
            # dense of the same total size: [total, K] x [K, N] (B = the first expert's weight)
            dense, derr = try_fn(lambda: torch._scaled_mm(a, w[0].T, scale_a=sa[:, None], scale_b=sb[0][None, :],
                                                          out_dtype=torch.bfloat16))
            fns = [lambda: grouped(a, w, offs, d, FP8_CONFIGS[best], False, scale=(sa, sb)),
                   # the same config accumulating in the tensor cores' own precision (no promotion
                   # every k block): how much of the time the promotion costs
                   lambda: grouped(a, w, offs, d, FP8_CONFIGS[best], False, scale=(sa, sb), fast_accum=True)]
            fns += [f for f in (sgm, dense) if f]
            kernel, pick = None, None
            if eng is not None:
                gt = eng[0]
                problem = {"groups": G, "n": N, "k": K, "rows_per_group": per, "layout": "contiguous",
                           "dtype": "e4m3", "out_dtype": "bf16", "scale": "rowwise"}
                stream = torch.cuda.current_stream().cuda_stream
                try:
                    from gemmtune.torch._ops import engine as torch_engine
                    kernel, _ = torch_engine(torch.cuda.current_device()).select_grouped(problem)
                    desc = kernel.describe()
                    pick = f"{desc['backend']}:{desc['id']}"
                    run_engine = lambda: kernel.run(a.data_ptr(), w.data_ptr(), d.data_ptr(), offs.data_ptr(), total,  # noqa: E731
                                                    0, sa.data_ptr(), sb.data_ptr(), stream_ptr=stream)
                    d.fill_(float("nan"))
                    run_engine()
                    ok, rel, why = check(a, w, [per] * G, d, False, scale=(sa, sb))
                    if not ok:
                        fails.append(f"engine {pick}: {why}")
                        log(f"FAIL {label} engine {pick}: {why}")
                    fns.append(run_engine)
                except Exception as exc:  # noqa: BLE001 - reported in the row
                    kernel, pick = None, f"error: {type(exc).__name__}: {exc}"
            t2 = timed(fns, iters)
            i = 2
            row = {"shape": name, "G": G, "n": N, "k": K, "rows_per_group": per, "pick": list(FP8_CONFIGS[best]),
                   "triton_ms": t2[0], "triton_fast_accum_ms": t2[1], "checks_failed": fails, "scaled_grouped_mm_error": err, "scaled_mm_error": derr,
                   "triton_tflops": 2.0 * total * N * K / t2[0] / 1e9}
            if sgm:
                row["scaled_grouped_mm_ms"] = t2[i]
                i += 1
            if dense:
                row["dense_scaled_mm_ms"] = t2[i]
                i += 1
            row["engine_pick"] = pick
            if kernel is not None:
                row["engine_ms"] = t2[i]
            out.append(row)
            log(f"{label}: triton {t2[0]:.3f} ms ({row['triton_tflops']:.0f} TFLOP/s; fast accumulation {t2[1]:.3f}), "
                f"_scaled_grouped_mm {row.get('scaled_grouped_mm_ms', err)}, dense _scaled_mm {row.get('dense_scaled_mm_ms', derr)}, "
                f"engine {row.get('engine_ms')} ({pick})")
            del a, d
        del w
        torch.cuda.empty_cache()
    return out


def _f(v, decimals=3):
    return "n/a" if v is None else f"{v:.{decimals}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-check-all", action="store_true", help="check only the small cases")
    ap.add_argument("--skip-fp8", action="store_true")
    ap.add_argument("--rows", default=",".join(map(str, ROWS)), help="rows per group to bench (CSV)")
    ap.add_argument("--configs", help="bf16 configs to run instead of CONFIGS and SHORT_CONFIGS: "
                    "bm,bn,bk,warps,stages,group_m[,chunks];...")
    ap.add_argument("--engine", action="store_true",
                    help="also time gemmtune.torch.grouped_mm (the engine's pick) and a dense cuBLASLt-pick loop")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.configs:
        CONFIGS[:] = [tuple(int(v) for v in c.split(",")) for c in args.configs.split(";")]
        SHORT_CONFIGS[:] = []
    t0 = time.time()
    lines = []

    def log(s):
        s = f"[{time.time() - t0:6.1f}s] {s}"
        print(s, flush=True)
        lines.append(s)

    log(f"{torch.cuda.get_device_name(0)}, {NUM_SMS} SMs, torch {torch.__version__}, triton {triton.__version__}")
    warm_cache(log)
    small = small_checks(log)
    eng = engine_contenders(log) if args.engine else None
    rows, checks = bench(log, args.iters, not args.no_check_all, eng, [int(x) for x in args.rows.split(",")])
    fp8 = [] if args.skip_fp8 else bench_fp8(log, args.iters, eng)
    summary = {
        "small_checks_passed": sum(r["ok"] for r in small), "small_checks": len(small),
        "bench_checks_passed": sum(c["ok"] for c in checks), "bench_checks": len(checks),
        "geomean_vs_grouped_mm": geomean([r["vs_grouped_mm"] for r in rows]),
        "geomean_vs_loop": geomean([r["vs_loop"] for r in rows]),
        "engine_geomean_vs_grouped_mm": geomean([r.get("engine_vs_grouped_mm") for r in rows]),
        "engine_geomean_vs_loop": geomean([r.get("engine_vs_loop") for r in rows]),
        "engine_kernels_selected": sum(r.get("engine_new_kernels", 0) for r in rows),
        "seconds": time.time() - t0,
    }
    log(f"summary: {json.dumps(summary)}")
    with open(os.path.join(args.out, "grouped.json"), "w") as f:
        json.dump({"summary": summary, "bf16": rows, "fp8": fp8, "small_checks": small, "bench_checks": checks,
                   "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__},
                  f, indent=1)
    with open(os.path.join(args.out, "grouped.md"), "w") as f:
        f.write("| shape | rows/group | split | triton ms | TFLOP/s | torch._grouped_mm ms | loop ms | vs grouped_mm | vs loop | config "
                "| engine ms | engine pick | engine vs grouped_mm | engine vs loop | dense cuBLASLt-pick loop ms | reading its bytes ms | engine / reading |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            gm = f"{r['grouped_mm_ms']:.3f}" if r["grouped_mm_ms"] else "n/a"
            vg = f"{r['vs_grouped_mm']:.2f}" if r["vs_grouped_mm"] else "n/a"
            f.write(f"| {r['shape']} | {r['rows_per_group']} | {'skewed' if r['skew'] else 'balanced'} | {r['triton_ms']:.3f} | "
                    f"{r['triton_tflops']:.0f} | {gm} | {r['loop_ms']:.3f} | {vg} | {r['vs_loop']:.2f} | {r['pick']} | "
                    f"{_f(r.get('engine_ms'))} | {r.get('engine_pick') or 'n/a'} | {_f(r.get('engine_vs_grouped_mm'), 2)} | {_f(r.get('engine_vs_loop'), 2)} | "
                    f"{_f(r.get('engine_dense_loop_ms'))} | {_f(r.get('stream_ms'))} | "
                    f"{_f(r['engine_ms'] / r['stream_ms'] if r.get('stream_ms') and r.get('engine_ms') else None, 2)} |\n")
        f.write(f"\ngeomean vs torch._grouped_mm: {summary['geomean_vs_grouped_mm']}, vs loop: {summary['geomean_vs_loop']}; "
                f"engine: {summary['engine_geomean_vs_grouped_mm']}, {summary['engine_geomean_vs_loop']}\n\n")
        f.write("Every config's tune times (ms, medians; balanced / skewed split), from which the pick above "
                "was made:\n\n| shape | rows/group | config | balanced ms | skewed ms | mean ms |\n|---|---|---|---|---|---|\n")
        for r in rows:
            for cfg, (tb, ts) in sorted((r.get("tune_ms") or {}).items(), key=lambda kv: sum(kv[1])):
                f.write(f"| {r['shape']} | {r['rows_per_group']} | {cfg} | {tb:.3f} | {ts:.3f} | {(tb + ts) / 2:.3f} |\n")
        f.write("\n")
        if fp8:
            f.write("| fp8 shape | rows/group | triton ms | TFLOP/s | triton fast-accum ms | _scaled_grouped_mm ms | dense _scaled_mm ms | config "
                    "| engine ms | engine pick | engine vs _scaled_grouped_mm |\n")
            f.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
            for r in fp8:
                sg, em = r.get("scaled_grouped_mm_ms"), r.get("engine_ms")
                f.write(f"| {r['shape']} | {r['rows_per_group']} | {r['triton_ms']:.3f} | {r['triton_tflops']:.0f} | "
                        f"{r['triton_fast_accum_ms']:.3f} | {_f(sg)} | {_f(r.get('dense_scaled_mm_ms'))} | {r['pick']} | "
                        f"{_f(em)} | {r.get('engine_pick') or 'n/a'} | {_f(sg / em if sg and em else None, 2)} |\n")
    ok = summary["small_checks_passed"] == summary["small_checks"] and summary["bench_checks_passed"] == summary["bench_checks"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
