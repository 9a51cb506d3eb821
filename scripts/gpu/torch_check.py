"""gemmtune.torch on the GPU: every op against float64, torch.compile, CUDA graphs, optimize() on a
Llama-style decoder block (llama3-8b sizes, bf16, random weights) against plain PyTorch, and the
eager host overhead beside torch's. Run by scripts/gpu/torch.sh; writes torch.json and torch.md to
--out. Exits 77 without a GPU, 1 when a check fails.

A check fails when: an op's output has a NaN or an element outside its float64 reference's
bound (|err| <= tol(dtype) * (|A| @ |B|) + tiny, the epilogue applied to the reference); a wrong
argument is not refused with its name; torch.compile(fullgraph=True) breaks or differs; a CUDA
graph replay differs from eager; the optimized block's error against float64 exceeds
max(2 x plain PyTorch's, 1e-2) (relative Frobenius).
"""

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

FAILS: list = []
RESULTS: dict = {"checks": [], "block": [], "overhead": [], "optimize": None}
T0 = time.perf_counter()


def log(*a):
    print(f"[{time.perf_counter() - T0:7.1f}s]", *a, flush=True)


def check(name: str, ok: bool, detail: str = "") -> None:
    RESULTS["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    if not ok:
        FAILS.append(f"{name}: {detail}")
    log(("ok   " if ok else "FAIL ") + name + (f"  ({detail})" if detail else ""))


TOL = {torch.bfloat16: 2 ** -7 * 2, torch.float16: 2 ** -10 * 4, torch.float32: 1e-4}


def close(name: str, out: torch.Tensor, ref64: torch.Tensor, bound64: torch.Tensor, dtype) -> None:
    """Element-wise: |out - ref| <= tol * bound + tiny; NaN never passes."""
    o = out.double()
    err = (o - ref64).abs()
    lim = TOL[dtype] * bound64 + 1e-6
    nan = torch.isnan(o).any().item()
    worst = (err / lim).max().item() if err.numel() else 0.0
    check(name, (not nan) and worst <= 1.0, f"worst err/bound {worst:.3f}{', NaN' if nan else ''}")


def act64(y, act):
    if act in (None, "none"):
        return y
    if act == "relu":
        return F.relu(y)
    if act == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if act == "silu":
        return F.silu(y)
    raise ValueError(act)


def guarded(name: str, fn) -> None:
    """Runs one case; an exception is that case's failure, and the next case still runs."""
    try:
        fn()
    except Exception as e:
        check(name, False, f"{type(e).__name__}: {str(e)[:300]}")


def refused(name: str, fn, needle: str) -> None:
    try:
        fn()
    except Exception as e:  # the message must name the argument
        check(name, needle in str(e), f"{type(e).__name__}: {str(e)[:160]}")
        return
    check(name, False, "no error raised")


# ---- ops against float64 -----------------------------------------------------------------------

def ops_checks(gt):
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=dev, generator=g).to(dtype)

    m, n, k = 96, 256, 192
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        dn = str(dtype).replace("torch.", "")
        base_a, base_b = rnd(m, k, dtype=dtype), rnd(k, n, dtype=dtype)
        pad_a = rnd(m, k + 24, dtype=dtype)[:, :k]          # row-major, lda = k + 24
        variants = {
            "rr": (base_a, base_b),
            "cr": (rnd(k, m, dtype=dtype).t(), base_b),        # a column-major (a transposed view)
            "rc": (base_a, rnd(n, k, dtype=dtype).t()),        # b column-major (nn.Linear's weight.t())
            "cc": (rnd(k, m, dtype=dtype).t(), rnd(n, k, dtype=dtype).t()),
            "r(ld)r": (pad_a, base_b),
        }
        for lay, (a, b) in variants.items():
            def one(a=a, b=b, lay=lay):
                out = gt.mm(a, b)
                ok_layout = out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
                check(f"mm {dn} {lay} shape/dtype", ok_layout, f"{tuple(out.shape)} {out.dtype}")
                close(f"mm {dn} {lay} vs float64", out, a.double() @ b.double(), a.double().abs() @ b.double().abs(), dtype)
            guarded(f"mm {dn} {lay}", one)
        # linear: 3-D x (leading dims flattened), bias, every activation
        x, w, bias = rnd(2, 48, k, dtype=dtype), rnd(n, k, dtype=dtype), rnd(n, dtype=dtype)
        for act in (None, "relu", "gelu_tanh", "silu"):
            for with_bias in (False, True):
                def one(act=act, with_bias=with_bias):
                    bb = bias if with_bias else None
                    out = gt.linear(x, w, bb, act)
                    y64 = x.double() @ w.double().t() + (bb.double() if with_bias else 0)
                    bound = x.double().abs() @ w.double().abs().t() + (bb.double().abs() if with_bias else 0)
                    close(f"linear {dn} act={act} bias={with_bias}", out, act64(y64, act), bound, dtype)
                guarded(f"linear {dn} act={act} bias={with_bias}", one)
        # softmax: 2-D, 3-D, padded rows, scale
        for shape, pad, scale in (((64, 1000), 0, 1.0), ((4, 16, 512), 0, 0.125), ((33, 768), 64, 0.5)):
            def one(shape=shape, pad=pad, scale=scale):
                xs = rnd(*shape[:-1], shape[-1] + pad, dtype=dtype)
                if pad:
                    xs = xs[..., : shape[-1]]
                y = gt.softmax(xs, -1, scale)
                ref = torch.softmax(xs.double() * scale, -1)
                err = (y.double() - ref).abs().max().item()
                tol = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}[dtype]
                check(f"softmax {dn} {shape} pad={pad} scale={scale}", not torch.isnan(y).any().item() and err <= tol
                      and y.stride() == xs.stride(), f"max err {err:.2e}, strides {y.stride()}")
            guarded(f"softmax {dn} {shape} pad={pad}", one)

    # scaled_mm: e4m3, tensorwise and rowwise, bias, vs float64 and torch._scaled_mm
    a = rnd(m, k, dtype=torch.float32).to(torch.float8_e4m3fn)
    wq = rnd(n, k, dtype=torch.float32).to(torch.float8_e4m3fn)
    b = wq.t()
    for mode in ("tensorwise", "rowwise"):
        if mode == "tensorwise":
            sa, sb = torch.tensor(0.5, device=dev), torch.tensor(2.0, device=dev)
        else:
            sa = torch.rand(m, 1, device=dev, generator=g) + 0.5
            sb = torch.rand(1, n, device=dev, generator=g) + 0.5
        for with_bias in (False, True):
            bias = rnd(n, dtype=torch.bfloat16) if with_bias else None
            try:
                out = gt.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias)
            except Exception as e:
                check(f"scaled_mm e4m3 {mode} bias={with_bias}", False, f"{type(e).__name__}: {str(e)[:300]}")
                continue
            ref = (a.double() @ b.double()) * sa.double() * sb.double()
            bound = (a.double().abs() @ b.double().abs()) * sa.double().abs() * sb.double().abs()
            if with_bias:
                ref, bound = ref + bias.double(), bound + bias.double().abs()
            close(f"scaled_mm e4m3 {mode} bias={with_bias}", out, ref, bound, torch.bfloat16)
            try:  # information only: torch's own fp8 GEMM on the same operands
                tref = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
                d = (out.double() - tref.double()).abs().max().item()
                log(f"     scaled_mm {mode} bias={with_bias}: max |gemmtune - torch._scaled_mm| = {d:.3e}")
            except Exception as e:
                log(f"     torch._scaled_mm {mode} bias={with_bias}: {type(e).__name__}: {str(e)[:120]}")

    # block scales (DeepSeek-V3 style): sa [m, kb] M-major, W's scales [nb, kb] with row stride round_up(kb, 4)
    def block():
        mb, nbk, kbk = 128, 384, 640
        kb, nb = (kbk + 127) // 128, (nbk + 127) // 128
        ab = rnd(mb, kbk, dtype=torch.float32).to(torch.float8_e4m3fn)
        wb = rnd(nbk, kbk, dtype=torch.float32).to(torch.float8_e4m3fn)
        sa = (torch.rand(kb, mb, device=dev, generator=g) + 0.5).t()
        sb = (torch.rand(nb, (kb + 3) // 4 * 4, device=dev, generator=g) + 0.5)[:, :kb]
        out = gt.scaled_mm(ab, wb.t(), sa, sb, out_dtype=torch.bfloat16)
        sa_full = sa.double().repeat_interleave(128, 1)[:, :kbk]                       # [m, k]
        sb_full = sb.double().repeat_interleave(128, 0)[:nbk].repeat_interleave(128, 1)[:, :kbk]  # [n, k]
        deq_a, deq_w = ab.double() * sa_full, wb.double() * sb_full
        close("scaled_mm e4m3 block", out, deq_a @ deq_w.t(), deq_a.abs() @ deq_w.abs().t(), torch.bfloat16)
    guarded("scaled_mm e4m3 block", block)

    # autograd (plain torch ops) through linear and softmax, against torch's own
    def grads():
        xg = rnd(4, 64, k, dtype=torch.float32).requires_grad_()
        wg = rnd(n, k, dtype=torch.float32).requires_grad_()
        gt.softmax(gt.linear(xg, wg), -1, 0.5).square().sum().backward()
        ref_x, ref_w = xg.detach().clone().requires_grad_(), wg.detach().clone().requires_grad_()
        torch.softmax(F.linear(ref_x, ref_w) * 0.5, -1).square().sum().backward()
        d = max(rel(xg.grad, ref_x.grad), rel(wg.grad, ref_w.grad))
        check("autograd linear + softmax (fp32) vs torch", d <= 1e-3, f"rel diff {d:.2e}")
    guarded("autograd linear + softmax", grads)

    # refusals name the argument
    x, w = rnd(16, k), rnd(n, k)
    refused("refuse cpu weight", lambda: gt.linear(x, w.cpu()), "weight")
    refused("refuse misaligned x", lambda: gt.linear(rnd(16, k + 8)[:, 1:k + 1], w), "x:")
    refused("refuse non-unit inner stride", lambda: gt.mm(rnd(16, 2 * k)[:, ::2], rnd(k, n)), "a:")
    refused("refuse dtype mix", lambda: gt.linear(x, w.half()), "weight")
    refused("refuse softmax dim", lambda: gt.softmax(rnd(8, 64), dim=0), "dim")
    refused("refuse bad activation", lambda: gt.linear(x, w, None, "tanh"), "activation")


def compile_checks(gt):
    x = torch.randn(4, 32, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16) * 0.05
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16)

    def fn(x, w, b):
        return gt.softmax(gt.linear(x, w, b, "silu"), -1, 0.5) + 1

    eager = fn(x, w, b)
    torch._dynamo.reset()
    try:
        comp = torch.compile(fn, fullgraph=True)
        out = comp(x, w, b)
        d = (out.float() - eager.float()).abs().max().item()
        check("torch.compile fullgraph (inductor) linear+softmax", d <= 1e-2, f"max |compiled - eager| {d:.2e}")
    except Exception as e:
        check("torch.compile fullgraph (inductor) linear+softmax", False, f"{type(e).__name__}: {str(e)[:300]}")
    guarded("C++ op run_abd", lambda: cpp_op_checks(gt))


def cpp_op_checks(gt):
    """The C++ op (src/torch/ops.cpp) compiled code calls: loaded for this torch; a linear key
    (silu epilogue, bias) and an mm key bound to it, run against float64, operands of other
    strides passed to the Python op (still right), captured into a CUDA graph and replayed."""
    from gemmtune.torch import _ops
    check("C++ op loaded (libgemmtune_torch for this torch)", _ops._Cpp.load(), _ops._Cpp.reason or _ops._Cpp.path())
    if not _ops._Cpp.loaded:
        return
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(2, 24, 512, device="cuda", generator=g).bfloat16()
    w = (torch.randn(768, 512, device="cuda", generator=g) * 0.05).bfloat16()
    b = torch.randn(768, device="cuda", generator=g).bfloat16()
    kid = _ops._traced_route("linear", _ops._linear_key(x, w, b, "silu"), False)
    check("C++ op: a linear key (silu, bias) binds", kid >= 0, f"route {kid}")
    if kid < 0:
        return
    y64 = x.double() @ w.double().t() + b.double()
    bound = x.double().abs() @ w.double().abs().t() + b.double().abs()
    run = torch.ops.gemmtune.run_abd.default
    y = run(x, w, b, kid)
    close("C++ op linear silu+bias vs float64", y, F.silu(y64), bound, torch.bfloat16)
    xc = x.transpose(0, 1).contiguous().transpose(0, 1)  # the same values, other strides
    close("C++ op, operands of other strides (the Python op) vs float64", run(xc, w, b, kid), F.silu(y64), bound,
          torch.bfloat16)
    a, m = x[0], w.t()
    mk = _ops._traced_route("mm", _ops._mm_key(a, m), False)
    if mk >= 0:  # mm defers where the pick is torch's kernel
        close("C++ op mm vs float64", run(a, m, None, mk), a.double() @ m.double(), a.double().abs() @ m.double().abs(),
              torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run(x, w, b, kid)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        yg = run(x, w, b, kid)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    check("C++ op captured in a CUDA graph replays == eager", torch.equal(yg, run(x, w, b, kid)))


def graph_checks(gt):
    x = torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16) * 0.03
    b = torch.randn(2048, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            gt.softmax(gt.linear(x, w, b, "gelu_tanh"))  # warm-up: selects the kernels
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = gt.softmax(gt.linear(x, w, b, "gelu_tanh"))
    worst = 0.0
    for i in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        ref = gt.softmax(gt.linear(x, w, b, "gelu_tanh"))
        worst = max(worst, (y.float() - ref.float()).abs().max().item())
    # The same kernels on the same inputs: equal, up to a reduction order that may vary (split-k).
    check("CUDA graph capture + replay (linear+softmax) == eager", worst <= 1e-3, f"max |replay - eager| {worst:.2e}")
    # A problem never seen before, first met under capture: a clear error, not a tune.
    graph2 = torch.cuda.CUDAGraph()
    x3 = torch.randn(24, 1024, device="cuda", dtype=torch.bfloat16)
    msg = ""
    try:
        with torch.cuda.graph(graph2):
            gt.linear(x3, w)
    except Exception as e:
        msg = str(e)
    check("untuned problem under capture refused", "captured" in msg, msg[:200])


# ---- the Llama-style decoder block ----------------------------------------------------------------

class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + self.eps)).to(x.dtype) * self.weight


def rope(x, pos, theta=500000.0):
    # x [b, h, t, d]
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = pos[:, None].float() * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class DecoderBlock(torch.nn.Module):
    """llama3-8b's decoder layer: hidden 4096, 32 heads, 8 KV heads, MLP 14336 (SwiGLU)."""

    def __init__(self, d=4096, heads=32, kv=8, ff=14336):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv, d // heads
        self.q_proj = torch.nn.Linear(d, d, bias=False)
        self.k_proj = torch.nn.Linear(d, kv * self.hd, bias=False)
        self.v_proj = torch.nn.Linear(d, kv * self.hd, bias=False)
        self.o_proj = torch.nn.Linear(d, d, bias=False)
        self.gate_proj = torch.nn.Linear(d, ff, bias=False)
        self.up_proj = torch.nn.Linear(d, ff, bias=False)
        self.down_proj = torch.nn.Linear(ff, d, bias=False)
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q_proj(h).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        pos = torch.arange(t, device=x.device)
        q, k = rope(q, pos), rope(k, pos)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def host_us(fns, n, repeats):
    """Host microseconds a call of each of fns: n back-to-back calls timed after a synchronize,
    the functions interleaved repeat by repeat; the median of `repeats` a function."""
    acc = [[] for _ in fns]
    for _ in range(repeats):
        for fn, a in zip(fns, acc):
            torch.cuda.synchronize()
            t = time.perf_counter_ns()
            for _ in range(n):
                fn()
            a.append((time.perf_counter_ns() - t) / n / 1000)
    torch.cuda.synchronize()
    return [statistics.median(a) for a in acc]


def layer_host(plain, opt, T, row):
    """Host time per call of each Linear layer of the block alone (eager, no_grad): gt.Linear
    (gemmtune's kernel, or torch's op where the layer defers) beside the plain nn.Linear; N
    back-to-back calls timed on the host, median of 5 interleaved repeats."""
    N = 40 if T <= 16 else 10
    ins = {d: torch.randn(1, T, d, device="cuda", dtype=torch.bfloat16) for d in (4096, 14336)}
    out = {}
    with torch.no_grad():
        for name in LAYERS:
            lp, lo = getattr(plain, name), getattr(opt, name)
            x = ins[lp.in_features]
            lp(x), lo(x)
            torch_us, gemmtune_us = host_us([lambda: lp(x), lambda: lo(x)], N, 5)
            out[name] = {"torch_us": torch_us, "gemmtune_us": gemmtune_us, "kernel": row["kernels"].get(name, "?")}
            log(f"     layer host T={T} {name}: nn.Linear {out[name]['torch_us']:.2f} us, gt.Linear "
                f"{out[name]['gemmtune_us']:.2f} us ({out[name]['kernel']})")
    row["layer_host"] = out


def gpu_ms(fn):
    """One call of fn timed by CUDA events on the current stream (ms)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return statistics.median([gpu_ms(fn) for _ in range(iters)])


def time_pair(fa, fb, iters):
    """Medians (ms) of fa and fb timed interleaved, a b b a a b ... (each sample of one beside one
    of the other), after a warm-up of both: drift of the GPU's clocks and power state falls on
    both alike. Timed one after the other instead (time_ms, the s8-s13 rows), the second of two
    blocks running the same kernels measured slower (the control rows say by how much)."""
    for _ in range(3):
        fa(), fb()
    torch.cuda.synchronize()
    sa, sb = [], []
    for i in range(iters):
        for fn, acc in (((fa, sa), (fb, sb)) if i % 2 == 0 else ((fb, sb), (fa, sa))):
            acc.append(gpu_ms(fn))
    return statistics.median(sa), statistics.median(sb)


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def block_checks(gt, tokens, do_compile, budget_s, max_autotune=False, max_autotune_budget_s=0.0):
    torch.manual_seed(0)
    plain = DecoderBlock().to("cuda", torch.bfloat16)
    with torch.no_grad():
        for p in plain.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.02)
    plain.eval()
    opt = copy.deepcopy(plain)
    ex = torch.randn(1, max(tokens), 4096, device="cuda", dtype=torch.bfloat16)
    t = time.perf_counter()
    report = gt.optimize(opt, (ex,), m_buckets=tokens)
    log(f"optimize: {time.perf_counter() - t:.1f} s\n{report}")
    RESULTS["optimize"] = report.as_dict()
    check("optimize replaced the 7 Linear layers", len(report.replaced) == 7
          and all(type(getattr(opt, n)) is gt.Linear for n in report.replaced), ", ".join(report.replaced))
    check("optimize keeps the state_dict", list(opt.state_dict()) == list(plain.state_dict())
          and all(torch.equal(opt.state_dict()[k], v) for k, v in plain.state_dict().items()))
    f64 = copy.deepcopy(plain).double()
    twin = copy.deepcopy(plain)  # the control: plain PyTorch against itself (the same kernels)
    for T in tokens:
        x = torch.randn(1, T, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            y_ref = f64(x.double())
            y_plain, y_opt = plain(x), opt(x)
            e_plain, e_opt = rel(y_plain, y_ref), rel(y_opt, y_ref)
            check(f"block T={T}: optimized output vs float64", e_opt <= max(2 * e_plain, 1e-2),
                  f"rel err {e_opt:.2e} (plain torch {e_plain:.2e})")
            iters = 50 if T <= 16 else 20
            row = {"tokens": T, "rel_err_gemmtune": e_opt, "rel_err_plain": e_plain}
            row["eager_plain_ms"], row["eager_gemmtune_ms"] = time_pair(lambda: plain(x), lambda: opt(x), iters)
            row["eager_speedup"] = row["eager_plain_ms"] / row["eager_gemmtune_ms"]
            a, b = time_pair(lambda: plain(x), lambda: twin(x), iters)
            row["control_eager_x"] = a / b
            # The kernels each layer runs at this m.
            row["kernels"] = {n: _kernel_of(gt, getattr(opt, n), x) for n in LAYERS}
            row["deferred"] = [n for n, k in row["kernels"].items() if k.endswith("(torch's op)")]
            from gemmtune.torch import _ops
            row["eager_cpp_keys"] = sum(1 for key, e in _ops._State.entries["linear"].items()
                                        if key[0][:-1] == (1, T) and e.cpp >= 0)  # eager calls through the C++ op
            RESULTS["block"].append(row)
            log(f"block T={T}: eager plain {row['eager_plain_ms']:.3f} ms, gemmtune {row['eager_gemmtune_ms']:.3f} ms "
                f"(x{row['eager_speedup']:.3f}; {row['eager_cpp_keys']} layer keys through the C++ op) kernels {row['kernels']}")
            layer_host(plain, opt, T, row)
            write_now()
    # Deferring to torch: exactly the entries whose pick is the cuBLASLt torch baseline (its id
    # torch-..., docs/cublaslt.md), or a cuBLASLt algo within the defer margin of it in the tune
    # (describe()'s median_us and torch_baseline_us, from the tuning cache), run torch's op.
    from gemmtune.torch import _ops
    margin = _ops._State.defer_margin
    ents = list(_ops._State.entries["linear"].values())
    infos = [e.kernel.describe() for e in ents]

    def rule(e, i):
        if e.plan.problem.get("act", "none") != "none":
            return False
        if i["torch_baseline"]:
            return True
        return i["backend"] == "cublaslt" and bool(i["median_us"] and i["torch_baseline_us"]) and \
            i["median_us"] * (1 + margin) >= i["torch_baseline_us"]
    bad = [i["id"][:40] for e, i in zip(ents, infos)
           if "torch_baseline" not in i or "median_us" not in i or "torch_baseline_us" not in i
           or i["torch_baseline"] != (i["backend"] == "cublaslt" and i["id"].startswith("torch-"))
           or e.defer != rule(e, i)]
    RESULTS["deferred"] = [{"m": e.plan.problem["m"], "n": e.plan.problem["n"], "k": e.plan.problem["k"],
                            "backend": e.backend, "torch_baseline": i.get("torch_baseline"),
                            "median_us": i.get("median_us"), "torch_baseline_us": i.get("torch_baseline_us"),
                            "defer": e.defer} for e, i in zip(ents, infos)]
    for r in RESULTS["deferred"]:
        log(f"     defer m={r['m']} n={r['n']} k={r['k']} {r['backend']} torch_baseline={r['torch_baseline']} "
            f"median {r['median_us']} us, torch's {r['torch_baseline_us']} us -> {'torch op' if r['defer'] else 'gemmtune'}")
    # The tuned sizes of the block (optimize's problems) all have both medians: the rule is decided on them.
    tuned = [r for r in RESULTS["deferred"] if r["m"] in tokens and r["n"] in (1024, 4096, 14336)]
    missing = [(r["m"], r["n"], r["k"]) for r in tuned if r["median_us"] is None]
    check(f"linear runs torch's op exactly where the pick is torch's baseline or a cuBLASLt algo within "
          f"{margin:.0%} of it", ents and not bad and not missing,
          f"{sum(e.defer for e in ents)}/{len(ents)} keys defer; wrong: {bad}; no median: {missing}")
    # CUDA graphs of the blocks: the optimized block (eager gemmtune) and plain PyTorch's, each
    # captured the same way and replayed (the like-for-like row beside max-autotune, which
    # replays CUDA graphs too); the optimized replay checked against eager.
    for T in tokens:
        x = torch.randn(1, T, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            graphs = {}
            for name, mod in (("plain", plain), ("gemmtune", opt), ("twin", twin)):
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    mod(x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    y = mod(x)
                graphs[name] = (g, y)
            x.copy_(torch.randn_like(x))
            graphs["gemmtune"][0].replay()
            torch.cuda.synchronize()
            d = rel(graphs["gemmtune"][1], opt(x))
            check(f"CUDA graph of the optimized block (T={T}) replays == eager", d <= 1e-3, f"rel diff {d:.2e}")
            iters = 50 if T <= 16 else 20
            row = next(r for r in RESULTS["block"] if r["tokens"] == T)
            gp, go, gt2 = (graphs[n][0].replay for n in ("plain", "gemmtune", "twin"))
            row["graph_plain_ms"], row["graph_gemmtune_ms"] = time_pair(gp, go, iters)
            row["graph_speedup"] = row["graph_plain_ms"] / row["graph_gemmtune_ms"]
            # Controls: the two blocks, and plain PyTorch against its twin, timed one after the
            # other as the s8-s13 rows were (time_ms), and the twins interleaved.
            row["graph_speedup_sequential"] = time_ms(gp, iters) / time_ms(go, iters)
            row["control_graph_sequential_x"] = time_ms(gp, iters) / time_ms(gt2, iters)
            a, b = time_pair(gp, gt2, iters)
            row["control_graph_x"] = a / b
            log(f"block T={T}: CUDA graph plain {row['graph_plain_ms']:.3f} ms, gemmtune {row['graph_gemmtune_ms']:.3f} ms "
                f"(x{row['graph_speedup']:.3f}; timed one after the other x{row['graph_speedup_sequential']:.3f}); "
                f"control plain vs its twin: interleaved x{row['control_graph_x']:.3f}, one after the other "
                f"x{row['control_graph_sequential_x']:.3f}; eager interleaved x{row['control_eager_x']:.3f}")
            del graphs, g, y, gp, go, gt2
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            write_now()
    for T in (tokens if do_compile else []):
        if time.perf_counter() - T0 > budget_s:
            log(f"torch.compile rows skipped from T={T}: past the {budget_s:.0f} s budget")
            break
        x = torch.randn(1, T, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            torch._dynamo.reset()
            # Both compiled by the same call: a module compiled with fullgraph=True measured 1.5-2.5%
            # slower than the same Inductor code compiled without it (or from a lambda) at 2048
            # tokens (s16), which had put the optimized block (fullgraph) behind plain (not).
            cp = torch.compile(plain, dynamic=False, fullgraph=True)
            co = torch.compile(opt, dynamic=False, fullgraph=True)
            t = time.perf_counter()
            yp, yo = cp(x), co(x)
            torch.cuda.synchronize()
            ct = time.perf_counter() - t
            y_ref = f64(x.double())
            check(f"block T={T} compiled: output vs float64", rel(yo, y_ref) <= max(2 * rel(yp, y_ref), 1e-2),
                  f"rel err {rel(yo, y_ref):.2e} (plain compiled {rel(yp, y_ref):.2e})")
            iters = 50 if T <= 16 else 20
            row = next(r for r in RESULTS["block"] if r["tokens"] == T)
            row["compiled_plain_ms"], row["compiled_gemmtune_ms"] = time_pair(lambda: cp(x), lambda: co(x), iters)
            row["compiled_speedup"] = row["compiled_plain_ms"] / row["compiled_gemmtune_ms"]
            row["compile_s"] = ct
            # The layers traced as the C++ op, and the same block compiled with the Python op
            # instead (the C++ op hidden while dynamo traces it), timed beside it; each through
            # its own lambda (an entry point of its own to dynamo, compiled alike).
            row["compiled_cpp_keys"] = sum(1 for (op, key, *_) in _ops._Cpp.bound if key[0][:-1] == (1, T))
            saved = _ops._Cpp.loaded, _ops._Cpp.bound
            _ops._Cpp.loaded, _ops._Cpp.bound = False, {}
            try:
                cpy = torch.compile(lambda x: opt(x), dynamic=False, fullgraph=True)
                ypy = cpy(x)
            finally:
                _ops._Cpp.loaded, _ops._Cpp.bound = saved
            ccp = torch.compile(lambda x: opt(x), dynamic=False, fullgraph=True)
            ycp = ccp(x)
            check(f"block T={T} compiled, Python op: == compiled with the C++ op", rel(ypy, ycp) <= 1e-3,
                  f"rel diff {rel(ypy, ycp):.2e}")
            row["compiled_pyop_ms"], row["compiled_cppop_ms"] = time_pair(lambda: cpy(x), lambda: ccp(x), iters)
            row["compiled_cpp_vs_pyop"] = row["compiled_pyop_ms"] / row["compiled_cppop_ms"]
            # The control: plain PyTorch compiled against its compiled twin, interleaved.
            ctw = torch.compile(twin, dynamic=False, fullgraph=True)
            ctw(x)
            a, b = time_pair(lambda: cp(x), lambda: ctw(x), iters)
            row["control_compiled_x"] = a / b
            log(f"block T={T}: compiled plain {row['compiled_plain_ms']:.3f} ms, gemmtune "
                f"{row['compiled_gemmtune_ms']:.3f} ms (x{row['compiled_speedup']:.3f}), compiles {ct:.1f} s; "
                f"{row['compiled_cpp_keys']} layer keys on the C++ op: x{row['compiled_cpp_vs_pyop']:.3f} against the "
                f"Python op ({row['compiled_pyop_ms']:.3f} / {row['compiled_cppop_ms']:.3f} ms); control, plain vs its "
                f"twin compiled: x{row['control_compiled_x']:.3f}")
            write_now()

    if max_autotune:
        # Plain PyTorch under torch.compile(mode="max-autotune") (Inductor's own GEMM tuning),
        # after everything else: minutes of compiles, each row started only within its budget.
        for T in tokens:
            if time.perf_counter() - T0 > max_autotune_budget_s:
                log(f"max-autotune rows skipped from T={T}: past the {max_autotune_budget_s:.0f} s budget")
                break
            x = torch.randn(1, T, 4096, device="cuda", dtype=torch.bfloat16)
            with torch.no_grad():
                torch._dynamo.reset()
                cm = torch.compile(plain, mode="max-autotune", dynamic=False)
                t = time.perf_counter()
                cm(x)
                torch.cuda.synchronize()
                row = next(r for r in RESULTS["block"] if r["tokens"] == T)
                row["max_autotune_compile_s"] = time.perf_counter() - t
                row["max_autotune_plain_ms"] = time_ms(lambda: cm(x), 50 if T <= 16 else 20)
                row["gemmtune_vs_max_autotune"] = row["max_autotune_plain_ms"] / row["eager_gemmtune_ms"]
                if "compiled_gemmtune_ms" in row:
                    row["compiled_gemmtune_vs_max_autotune"] = row["max_autotune_plain_ms"] / row["compiled_gemmtune_ms"]
                if "graph_gemmtune_ms" in row:
                    row["graph_gemmtune_vs_max_autotune"] = row["max_autotune_plain_ms"] / row["graph_gemmtune_ms"]
                log(f"block T={T}: torch max-autotune {row['max_autotune_plain_ms']:.3f} ms "
                    f"(compiles {row['max_autotune_compile_s']:.0f} s); gemmtune eager {row['eager_gemmtune_ms']:.3f} ms, "
                    f"compiled {row.get('compiled_gemmtune_ms', float('nan')):.3f} ms")
                write_now()


def _kernel_of(gt, mod, x):
    from gemmtune.torch import _ops
    # linear's keys: (x.shape, x.stride(), x.dtype, x device, weight.shape, ...)
    for key, ent in _ops._State.entries["linear"].items():
        if key[4] == mod.weight.shape and key[0][:-1] == x.shape[:-1]:
            return f"{ent.backend}:{ent.name}" + (" (torch's op)" if getattr(ent, "defer", False) else "")
    return "?"


# ---- host overhead -------------------------------------------------------------------------------

def overhead(gt):
    """Host time per call, Python call to kernel enqueued: N back-to-back calls timed on the
    host, the GPU kept ahead by a tiny problem; median of 7 interleaved repeats, each beside
    torch's call. Checked (<= torch + 5 us): gt.mm, gt.linear, gt.Linear in eager no_grad. The
    other rows answer where the time goes: the op through the dispatcher (what torch.compile's
    code calls), the registrations it replaced (bench/torch_host.py's variants), the autograd
    path, and the pieces of the hot path on their own."""
    from gemmtune.torch import _ops
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import torch_host
    keep, mm_autograd, mm_custom = torch_host.variants("CUDA")
    m, n, k = 16, 512, 512
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    wt = w.t()
    lin_t = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
    lin_g = gt.Linear.from_linear(lin_t)
    wg = w.clone().requires_grad_()
    # name -> (torch's call, gemmtune's, checked, grad mode)
    cases = {
        "mm": (lambda: torch.mm(x, wt), lambda: gt.mm(x, wt), True, False),
        "linear": (lambda: F.linear(x, w), lambda: gt.linear(x, w), True, False),
        "nn.Linear": (lambda: lin_t(x), lambda: lin_g(x), True, False),
        "mm op torch.ops.gemmtune.mm (compiled code's call)": (lambda: torch.mm(x, wt), lambda: _ops._mm_op(x, wt),
                                                                False, False),
        "linear op torch.ops.gemmtune.linear": (lambda: F.linear(x, w), lambda: _ops._linear_op(x, w, None, None),
                                                False, False),
        "mm op as a custom_op (s8's registration)": (lambda: torch.mm(x, wt), lambda: mm_custom(x, wt), False, False),
        "mm op with register_autograd": (lambda: torch.mm(x, wt), lambda: mm_autograd(x, wt), False, False),
        "linear, weight requiring grad (autograd.Function)": (lambda: F.linear(x, wg), lambda: gt.linear(x, wg),
                                                              False, True),
    }
    N = 300
    # The rows time gemmtune's kernel launched (the keys' entries set not to defer, whatever the
    # pick), then the deferred path: the same three calls with their entries set to defer (as
    # where the pick is torch's kernel or within the margin of it): the cost over torch's op is a
    # key and a dict lookup (both checked against the bound, + 5 us).
    deferred = {
        "mm, deferred to torch.mm": (cases["mm"][0], cases["mm"][1], True, False),
        "linear, deferred to F.linear": (cases["linear"][0], cases["linear"][1], True, False),
        "nn.Linear, deferred": (cases["nn.Linear"][0], cases["nn.Linear"][1], True, False),
    }
    with torch.no_grad():
        gt.mm(x, wt), gt.linear(x, w), lin_g(x)
    defer_keys = [(_ops._State.entries["mm"], _ops._mm_key(x, wt)),
                  (_ops._State.entries["linear"], _ops._linear_key(x, w, None, None)),
                  (_ops._State.entries["linear"], _ops._linear_key(x, lin_g.weight, None, None))]
    was = [d[k].defer for d, k in defer_keys]
    if _ops._Cpp.load():  # the C++ op on the mm key's kernel, whatever its pick
        mkey = _ops._mm_key(x, wt)
        kid = _ops._Cpp.route("mm", mkey, _ops._State.entries["mm"][mkey])
        if kid >= 0:
            run_abd = torch.ops.gemmtune.run_abd.default
            cases["mm through the C++ op torch.ops.gemmtune.run_abd (compiled code's call)"] = (
                lambda: torch.mm(x, wt), lambda: run_abd(x, wt, None, kid), False, False)

    def set_defer(flags):
        for (d, k), f in zip(defer_keys, flags):
            d[k].defer = f

    for name, (ft, fg, checked, grad) in [*cases.items(), *deferred.items()]:
        set_defer([name in deferred] * 3)
        with torch.set_grad_enabled(grad):
            ft(), fg()
            torch_us, gemmtune_us = host_us([ft, fg], N, 7)
        row = {"op": name, "torch_us": torch_us, "gemmtune_us": gemmtune_us, "checked": checked}
        row["delta_us"] = row["gemmtune_us"] - row["torch_us"]
        RESULTS["overhead"].append(row)
        msg = f"host overhead {name}: gemmtune {row['gemmtune_us']:.2f} us vs torch {row['torch_us']:.2f} us"
        if checked:
            check(msg, row["delta_us"] <= 5.0, f"delta {row['delta_us']:+.2f} us (target <= +5)")
        else:
            log(f"     {msg} (delta {row['delta_us']:+.2f} us)")
    set_defer([False] * 3)  # the pieces: gemmtune's launch path
    # The pieces of the hot path, each on its own (no kernel launched; a NULL kernel makes the C
    # call return at its first check, so that row is ctypes' argument conversion and the call).
    key = (16, 512)
    dev, bf16 = x.device, torch.bfloat16
    _ops._bind()
    abd, ex = _ops._State.run_abd, _ops._State.run
    pieces = {
        "_plain(x, wt)": lambda: _ops._plain(x, wt),
        "key tuple (_mm_key)": lambda: _ops._mm_key(x, wt),
        "key + dict lookup": lambda: _ops._State.entries["mm"].get(_ops._mm_key(x, wt)),
        "torch.empty(shape, dtype=, device=)": lambda: torch.empty(key, dtype=bf16, device=dev),
        "x.new_empty(shape)": lambda: x.new_empty(key),
        "data_ptr() x3": lambda: (x.data_ptr(), wt.data_ptr(), x.data_ptr()),
        "current raw stream": lambda: _ops._raw_stream(0),
        "ctypes gt_kernel_run_abd (6 args, NULL kernel)": lambda: abd(None, 1 << 40, 1 << 41, 1 << 42, None, 1 << 43),
        "ctypes gt_kernel_run_ex (10 args, NULL kernel)": lambda: ex(None, 1 << 40, 1 << 41, None, 1 << 42, None, None,
                                                                     None, 1 << 43, 0),
        "gt.mm hot path, whole": lambda: gt.mm(x, wt),
    }
    RESULTS["pieces"] = []
    with torch.no_grad():
        meds = host_us(list(pieces.values()), N, 7)
    for name, us in zip(pieces, meds):
        RESULTS["pieces"].append({"piece": name, "us": us})
        log(f"     piece {name}: {us:.3f} us")
    set_defer(was)
    del keep


OUT_DIR = None


def write_now():
    """Results so far to --out (a run killed at its time limit keeps what it measured)."""
    if OUT_DIR:
        write(OUT_DIR)


def write(out_dir):
    RESULTS["fails"] = FAILS
    RESULTS["seconds"] = time.perf_counter() - T0
    RESULTS["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    RESULTS["torch"] = torch.__version__
    with open(os.path.join(out_dir, "torch.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    lines = ["# gemmtune.torch on the GPU", "", f"device {RESULTS['device']}, torch {torch.__version__}, "
             f"{RESULTS['seconds']:.0f} s, {sum(c['ok'] for c in RESULTS['checks'])}/{len(RESULTS['checks'])} checks ok", ""]
    if RESULTS["block"]:
        lines += ["## Llama-3-8B decoder block (bf16, random weights)", ""]
        lines += [f"- T={r['tokens']}: layers running torch's op: {', '.join(r.get('deferred') or []) or 'none'}; "
                  f"kernels: {r.get('kernels')}" for r in RESULTS["block"] if "kernels" in r]
        lines += ["", "Plain and optimized blocks timed interleaved (a b b a ..., medians; time_pair).", "",
                  "| tokens | eager torch ms | eager gemmtune ms | x | compiled torch ms | compiled gemmtune ms | x | rel err gemmtune / torch |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in RESULTS["block"]:
            c = lambda k: f"{r[k]:.3f}" if k in r else "-"
            if "max_autotune_plain_ms" in r:
                lines.append(f"| {r['tokens']} (torch max-autotune, compiled in {r['max_autotune_compile_s']:.0f} s) | | | | "
                             f"{c('max_autotune_plain_ms')} | | {c('compiled_gemmtune_vs_max_autotune')} (compiled "
                             f"gemmtune), {c('gemmtune_vs_max_autotune')} (eager gemmtune) | |")
            lines.append(f"| {r['tokens']} | {c('eager_plain_ms')} | {c('eager_gemmtune_ms')} | {c('eager_speedup')} | "
                         f"{c('compiled_plain_ms')} | {c('compiled_gemmtune_ms')} | {c('compiled_speedup')} | "
                         f"{r['rel_err_gemmtune']:.2e} / {r['rel_err_plain']:.2e} |")
        lines.append("")
        cpp_rows = [r for r in RESULTS["block"] if "compiled_cpp_vs_pyop" in r]
        if cpp_rows:
            lines += ["The compiled optimized block with its layers on the C++ op (gemmtune::run_abd) against the "
                      "same block compiled with the Python op, interleaved:", "",
                      "| tokens | layer keys (shapes, strides) on the C++ op | compiled, Python op ms | compiled, C++ op ms | x "
                      "| control: compiled plain vs its compiled twin, x |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {r['tokens']} | {r['compiled_cpp_keys']} | {r['compiled_pyop_ms']:.3f} | "
                      f"{r['compiled_cppop_ms']:.3f} | {r['compiled_cpp_vs_pyop']:.3f} | {r['control_compiled_x']:.3f} |"
                      for r in cpp_rows]
            lines.append("")
        graph_rows = [r for r in RESULTS["block"] if "graph_gemmtune_ms" in r]
        if graph_rows:
            lines += ["CUDA-graph replay of the block (eager modules captured the same way) beside torch "
                      "max-autotune (which replays CUDA graphs):", "",
                      "| tokens | graph torch ms | graph gemmtune ms | x | torch max-autotune ms | x (max-autotune / graph gemmtune) |",
                      "|---|---|---|---|---|---|"]
            for r in graph_rows:
                c = lambda k: f"{r[k]:.3f}" if k in r else "-"
                lines.append(f"| {r['tokens']} | {c('graph_plain_ms')} | {c('graph_gemmtune_ms')} | {c('graph_speedup')} | "
                             f"{c('max_autotune_plain_ms')} | {c('graph_gemmtune_vs_max_autotune')} |")
            lines.append("")
    ctl = [r for r in RESULTS["block"] if "control_graph_x" in r]
    if ctl:
        lines += ["Controls (x = first / second; the same kernels give 1): plain PyTorch against its twin (a deep "
                  "copy) interleaved in eager mode and in CUDA-graph replay, and timed one after the other "
                  "(the s8-s13 method); the optimized block against plain timed that way:", "",
                  "| tokens | twin eager interleaved | twin graph interleaved | twin graph one after the other | "
                  "gemmtune graph one after the other |", "|---|---|---|---|---|"]
        for r in ctl:
            lines.append(f"| {r['tokens']} | {r['control_eager_x']:.3f} | {r['control_graph_x']:.3f} | "
                         f"{r['control_graph_sequential_x']:.3f} | {r['graph_speedup_sequential']:.3f} |")
        lines.append("")
    lh = [r for r in RESULTS["block"] if "layer_host" in r]
    if lh:
        lines += ["## Host time per call of each layer (eager, no_grad): nn.Linear vs gt.Linear", "",
                  "| tokens | layer | kernel | nn.Linear us | gt.Linear us | delta |", "|---|---|---|---|---|---|"]
        for r in lh:
            for name, v in r["layer_host"].items():
                lines.append(f"| {r['tokens']} | {name} | {v['kernel']} | {v['torch_us']:.2f} | {v['gemmtune_us']:.2f} | "
                             f"{v['gemmtune_us'] - v['torch_us']:+.2f} |")
        lines.append("")
    if RESULTS.get("deferred"):
        lines += ["## Deferral per linear key (median_us / torch_baseline_us from describe())", "",
                  "| m | n | k | backend | torch baseline | median us | torch's us | runs |", "|---|---|---|---|---|---|---|---|"]
        f = lambda v: f"{v:.2f}" if v else "-"
        for r in RESULTS["deferred"]:
            lines.append(f"| {r['m']} | {r['n']} | {r['k']} | {r['backend']} | {r.get('torch_baseline')} | "
                         f"{f(r.get('median_us'))} | {f(r.get('torch_baseline_us'))} | "
                         f"{'torch op' if r['defer'] else 'gemmtune'} |")
        lines.append("")
    if RESULTS["overhead"]:
        lines += ["## Host overhead per call (eager, 16x512x512 bf16; no_grad but the autograd row)", "", "| op | torch us | gemmtune us | delta |",
                  "|---|---|---|---|"]
        lines += [f"| {r['op']} | {r['torch_us']:.2f} | {r['gemmtune_us']:.2f} | {r['delta_us']:+.2f} |" for r in RESULTS["overhead"]]
        lines.append("")
    if RESULTS.get("pieces"):
        lines += ["## Host cost of the hot path's pieces (us per call, each alone)", "", "| piece | us |", "|---|---|"]
        lines += [f"| {r['piece']} | {r['us']:.3f} |" for r in RESULTS["pieces"]]
        lines.append("")
    lines += ["## Checks", ""] + [f"- {'ok' if c['ok'] else '**FAIL**'} {c['name']} {c['detail']}" for c in RESULTS["checks"]]
    with open(os.path.join(out_dir, "torch.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", default="1,16,2048")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows of the block")
    ap.add_argument("--max-autotune", action="store_true",
                    help="also time plain PyTorch under torch.compile(mode='max-autotune') (minutes of compiles)")
    ap.add_argument("--budget-s", type=float, default=200, help="start no torch.compile row after this")
    ap.add_argument("--max-autotune-budget-s", type=float, default=150,
                    help="start no max-autotune row after this many seconds of the run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    global OUT_DIR
    OUT_DIR = args.out
    if not torch.cuda.is_available():
        print("torch_check: SKIP: no CUDA device")
        return 77
    import gemmtune
    import gemmtune.torch as gt
    # Short tuning. The op checks test the torch mapping (layouts, views, epilogues, dtypes):
    # cuBLASLt + native suffice and tune in well under a second each. The block and the
    # overhead rows tune with cuBLASLt + native + Triton (this machine has no CUTLASS / CuTe DSL
    # compilers).
    short = {"warmup_ms": 20, "min_rounds": 3, "max_rounds": 8, "tie_rounds": 6, "duel_rounds": 8, "duels": 2}
    max_configs = int(os.environ.get("GT_MAX_CONFIGS", "6"))

    def configure(backends):
        gt.configure(backends=backends, max_configs=max_configs, tune=short, log_level="warning")

    configure(["cublaslt", "native"])
    log(f"gemmtune {gemmtune.version()} from {gemmtune.library_path()}, torch {torch.__version__}")
    tokens = [int(t) for t in args.tokens.split(",")]
    for name, fn in (("ops", lambda: ops_checks(gt)), ("compile", lambda: compile_checks(gt)),
                     ("graphs", lambda: graph_checks(gt)),
                     ("configure", lambda: configure(["cublaslt", "native", "triton"])),
                     ("overhead", lambda: overhead(gt)),
                     ("block", lambda: block_checks(gt, tokens, not args.no_compile, args.budget_s, args.max_autotune,
                                                    args.max_autotune_budget_s))):
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:
            check(f"{name}: no exception", False, f"{type(e).__name__}: {e}")
            traceback.print_exc()
        log(f"== {name}: {time.perf_counter() - t:.1f} s")
        write(args.out)
    log(f"{len(RESULTS['checks']) - len(FAILS)} passed, {len(FAILS)} failed")
    for f in FAILS:
        log("FAIL", f)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
