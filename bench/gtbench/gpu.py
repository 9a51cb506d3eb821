"""The GPU layer of both benches: everything that touches the device is here (TorchGpu), and a CPU
stand-in with the same interface for --mock (MockGpu).

Common: the interleaved timing loop with an L2 flush and a GPU spin before every sample, the
ceilings (copy, bf16 and fp8 GEMM), the streaming-read kernel of the stream ceiling, versions, the
loaded cuBLASLt, nvidia-smi's view of this process's GPU. GEMM (bench/h200.py): inputs, torch's call,
gemmtune's kernel on an input set, the fp32 reference and the checks; several input sets rotated per
contender (Rotation); GEMM calls on a given stream captured into one CUDA graph (capture). Softmax
(bench/softmax.py): the input, its three contenders and their checks.
"""

from __future__ import annotations

import math
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

from .stats import quantile, summarize

# Softmax outputs: elementwise |y - ref| <= rel * |ref| + abs and a relative Frobenius bound, by
# output dtype (ref: torch's fp32 softmax).
SOFTMAX_BOUNDS = {"bf16": (2.0 ** -7, 2.0 ** -30), "fp16": (2.0 ** -10, 2.0 ** -24), "fp32": (2e-5, 1e-30)}
SOFTMAX_FROB_TOL = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}

# The block-scaled baseline's name when torch takes block scales, by the call's form (else
# block_triton.NAME).
BLOCK_TORCH = {"v1": "torch._scaled_mm (BlockWise1x128 x BlockWise128x128)",
               "v2": "torch.nn.functional.scaled_mm (BlockWise1x128 x BlockWise128x128)"}

# The ceilings TorchGpu.ceilings() can measure, as the result's "what" describes them.
CEILING_WHAT = {"copy": "copy: 1 GiB device-to-device, bytes read+written", "bf16": "bf16: torch.mm 8192^3",
                "fp8": "fp8: torch._scaled_mm e4m3 8192^3 tensorwise, bf16 out"}


def time_interleaved(torch, fns, rounds, warmup_ms, before_sample, warm_up_with_it=False):
    """({name: [us, ...]}, {name: median host us per call}).

    Warm-up: rounds of one call of every fn (preceded by before_sample() when warm_up_with_it)
    until warmup_ms have passed, at least two. Then `rounds` rounds, each one sample of every fn in
    an order rotated by the round: before_sample() (an L2 flush and a GPU spin: outside the timed
    region), CUDA events around one call; one synchronisation a round. The host time of each call
    is kept: a call whose host side outlasts the spin would have its launch overhead inside the
    timed region."""
    names = list(fns)
    t0 = time.perf_counter()
    n = 0
    while True:
        for nm in names:
            if warm_up_with_it:
                before_sample()
            fns[nm]()
        n += 1
        torch.cuda.synchronize()
        if n >= 2 and (time.perf_counter() - t0) * 1e3 >= warmup_ms:
            break
    starts = [torch.cuda.Event(enable_timing=True) for _ in names]
    ends = [torch.cuda.Event(enable_timing=True) for _ in names]
    out = {nm: [] for nm in names}
    host = {nm: [] for nm in names}
    clock = time.perf_counter
    for r in range(rounds):
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        for j, nm in enumerate(order):
            before_sample()
            starts[j].record()
            h0 = clock()
            fns[nm]()
            host[nm].append((clock() - h0) * 1e6)
            ends[j].record()
        ends[len(order) - 1].synchronize()
        for j, nm in enumerate(order):
            out[nm].append(starts[j].elapsed_time(ends[j]) * 1e3)
    return out, {nm: quantile(sorted(v), 0.5) for nm, v in host.items()}


# ---------------------------------------------------------------------------------------------
# several input sets per contender, as the engine's race

class Rotation:
    """One contender over several input sets: each call runs the next set's function (set 0's
    is `first`, which the correctness check calls)."""

    def __init__(self, fns):
        self.fns, self.i = list(fns), 0

    @property
    def first(self):
        return self.fns[0]

    def __call__(self):
        f = self.fns[self.i]
        self.i = (self.i + 1) % len(self.fns)
        return f()


def first_fn(fn):
    return fn.first if isinstance(fn, Rotation) else fn


def input_set_count(in_bytes, out_bytes, l2_bytes, mem_bytes, cap=0):
    """How many input sets a problem's timed calls rotate over: like the engine's race (GpuBench),
    enough to exceed 3x L2, and at least 3 so that no single buffer placement decides a timing
    (a suite run once timed a pair 4-6% apart one way on one set; a fresh process, the other way);
    within 1/4 of device memory; cap > 0 caps it (1 = the bench of sessions 1-4)."""
    n = max(3, -(-3 * l2_bytes // max(in_bytes, 1)))
    n = min(n, 64, max(1, (mem_bytes // 4) // max(in_bytes + out_bytes, 1)))
    return max(1, min(n, cap) if cap > 0 else n)


def input_sets(gpu, p, seed: int, cap: int):
    """[x, ...]: input_set_count() sets of GEMM problem p on `gpu` (its l2_bytes, mem_bytes,
    make_inputs); set 0 is make_inputs(p, seed), set j seed + j*1000003."""
    in_bytes = (p.m * p.k + p.n * p.k) * p.in_size
    n = input_set_count(in_bytes, p.m * p.n * 2, gpu.l2_bytes, gpu.mem_bytes, cap)
    return [gpu.make_inputs(p, seed + j * 1000003) for j in range(n)]


# ---------------------------------------------------------------------------------------------
# nvidia-smi

def nvsmi_query(q):
    """Read-only nvidia-smi query of this process's GPU: {field: value}, or {"error": ...}. nvidia-smi
    ignores CUDA_VISIBLE_DEVICES, so its first entry (an index in nvidia-smi's PCI order, as
    device.sh sets it with CUDA_DEVICE_ORDER=PCI_BUS_ID, or a UUID) is passed as -i."""
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    try:
        r = subprocess.run(["nvidia-smi", *(["-i", dev] if dev else []), f"--query-gpu={q}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            return dict(zip(q.split(","), (x.strip() for x in r.stdout.strip().splitlines()[0].split(","))))
        return {"error": (r.stderr or r.stdout).strip()[:300]}
    except Exception as e:
        return {"error": str(e)[:300]}


# ---------------------------------------------------------------------------------------------
# the device (torch)

class TorchGpu:
    def __init__(self, flush_mb):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit(f"{Path(sys.argv[0]).name}: torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(self.dev)
        self.l2_bytes, self.mem_bytes = props.L2_cache_size, props.total_memory
        # Read, never written after this fill: the flush leaves the L2 full of clean lines, as a
        # model's previous layer does (a written flush leaves dirty ones whose write-back the timed
        # kernel pays, unevenly: src/tune/l2_flush.hpp).
        self.flush_buf = torch.ones(flush_mb << 20, dtype=torch.int8, device=self.dev)
        self.stream_ptr = torch.cuda.current_stream().cuda_stream
        try:
            torch.cuda._sleep(10)
            self.can_sleep = True
        except Exception:
            self.can_sleep = False
        # A spin of ~50 us after the flush: the host enqueues (event, kernel, event) while the
        # GPU is busy, so host-side launch overhead (Inductor's guards, ctypes) is never timed.
        self.sleep_cycles = 100_000
        self.plain_softmax = None  # the plain Triton softmax, compiled on first use
        self.sms = props.multi_processor_count
        self.stream_x = self.stream_out = self.stream_run = None  # stream_setup()
        self.capture_stream = None  # capture()'s side stream, made on first use
        self._block_baseline = None  # block_baseline(), probed on first use
        self.block_form = None       # "v1" or "v2" when torch takes block scales
        self.block_baseline_note = ""

    def versions(self):
        t = self.torch
        v = {"torch": t.__version__, "torch_cuda": t.version.cuda, "device_name": t.cuda.get_device_name(0),
             "capability": ".".join(map(str, t.cuda.get_device_capability(0))), "python": platform.python_version()}
        try:
            import triton
            v["triton"] = triton.__version__
        except Exception as e:
            v["triton"] = f"unavailable: {e}"
        return v

    def empty_cache(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def sync(self):
        self.torch.cuda.synchronize()

    def state(self):
        """Clocks, power, temperature of this process's GPU (nvidia-smi)."""
        return nvsmi_query("clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pstate")

    def identity(self):
        """Which GPU this process runs on: CUDA_VISIBLE_DEVICES and nvidia-smi's index, uuid, bus id."""
        return {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                **nvsmi_query("index,uuid,name,pci.bus_id")}

    def loaded_cublaslt(self):
        """Path of the libcublasLt this process loaded (what gemmtune and torch use here)."""
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    if "libcublasLt.so" in line:
                        return line.split()[-1]
        except OSError:
            pass
        return None

    # -- timing --------------------------------------------------------------------------------
    def _flush(self, spin_scale=1):
        self.flush_buf.amax()
        if self.can_sleep:
            self.torch.cuda._sleep(self.sleep_cycles * spin_scale)

    def time_interleaved(self, fns, rounds, warmup_ms, spin_scale=1, flush_warmup=False):
        """{name: [us, ...]}: time_interleaved() with an L2 flush and a GPU spin before each sample
        (and before each warm-up call with flush_warmup). spin_scale lengthens the spin (contenders
        with a heavy host side: Inductor's wrapper). The host time of each call is kept in
        last_host_us (median per name) with the spin's length (last_spin_us, at most; at 2 GHz)."""
        self.last_spin_us = (self.sleep_cycles * spin_scale / 2000.0) if self.can_sleep else 0.0
        out, self.last_host_us = time_interleaved(self.torch, fns, rounds, warmup_ms, lambda: self._flush(spin_scale),
                                                  warm_up_with_it=flush_warmup)
        return out

    def ceilings(self, rounds, kinds=("copy", "bf16", "fp8"), flush_warmup=False):
        """The measured ceilings of `kinds` (CEILING_WHAT), interleaved: {<kind>_TBps / _tflops (medians),
        the same _best (fastest sample), spread{kind}, what}."""
        t = self.torch
        nb = 8192
        fns = {}
        if "copy" in kinds:
            src = t.randint(-128, 127, (1 << 30,), dtype=t.int8, device=self.dev)
            dst = t.empty_like(src)
            fns["copy"] = lambda: dst.copy_(src)
        if "bf16" in kinds or "fp8" in kinds:
            a = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
            b = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
            bt = b.t()
            if "bf16" in kinds:
                fns["bf16"] = lambda: t.mm(a, bt)
            if "fp8" in kinds:
                a8, b8 = a.to(t.float8_e4m3fn), b.to(t.float8_e4m3fn)
                one = t.ones((), device=self.dev, dtype=t.float32)
                b8t = b8.t()
                fns["fp8"] = lambda: t._scaled_mm(a8, b8t, scale_a=one, scale_b=one, out_dtype=t.bfloat16)
        st = {k: summarize(v) for k, v in self.time_interleaved(fns, rounds, 300, flush_warmup=flush_warmup).items()}
        rate = {"copy": ("copy_TBps", 2.0 * (1 << 30)), "bf16": ("bf16_tflops", 2.0 * nb ** 3),
                "fp8": ("fp8_tflops", 2.0 * nb ** 3)}
        res = {rate[k][0]: rate[k][1] / st[k]["median_us"] * 1e-6 for k in st}
        res.update({rate[k][0] + "_best": rate[k][1] / st[k]["min_us"] * 1e-6 for k in st})
        res["spread"] = {k: v["spread"] for k, v in st.items()}
        res["what"] = ("; ".join(CEILING_WHAT[k] for k in st) + "; random data; medians "
                       f"of {rounds} interleaved rounds (best = fastest sample)")
        return res

    # -- the stream ceiling --------------------------------------------------------------------
    def stream_setup(self, max_bytes):
        """Random int32 data (never zeros) of at least max_bytes for stream_fns, and the kernel's
        launchers (bench/gtbench/stream_read.py)."""
        from .stream_read import max_programs, stream_launchers
        t = self.torch
        n = -(-max_bytes // 4)
        self.stream_x = t.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=t.int32, device=self.dev)
        self.stream_out = t.empty(max_programs(n, self.sms), dtype=t.int32, device=self.dev)
        self.stream_run = stream_launchers(self.stream_x, self.stream_out, self.sms)

    def stream_fns(self, nbytes):
        """{config: fn}: each fn enqueues one read of the first nbytes (rounded up to 4) of the data."""
        n = -(-nbytes // 4)
        return {name: (lambda f=f: f(n)) for name, f in self.stream_run.items()}

    def stream_check(self, nbytes):
        """{config: ok}: the kernel's sum of the first nbytes equals torch's (mod 2^32), per config."""
        t = self.torch
        n = -(-nbytes // 4)
        want = int(self.stream_x[:n].to(t.int64).sum().item()) % 2 ** 32
        ok = {}
        for name, f in self.stream_run.items():
            self.stream_out.zero_()
            f(n)
            ok[name] = int(self.stream_out.to(t.int64).sum().item()) % 2 ** 32 == want
        return ok

    def stream_release(self):
        self.stream_x = self.stream_out = self.stream_run = None
        self.empty_cache()

    # -- CUDA graphs -----------------------------------------------------------------------------
    def capture(self, calls):
        """(replay, outs): calls (each call(stream_ptr) enqueues one GEMM on that stream and returns
        its output) run once on a side stream (first-call set-up: cuBLAS workspaces, module loads,
        stays outside the graph), then are captured in order, on the same stream, into one CUDA
        graph. replay() launches the graph on the current stream; outs are the calls' outputs, which
        every replay rewrites."""
        t = self.torch
        if self.capture_stream is None:
            self.capture_stream = t.cuda.Stream()
        side = self.capture_stream
        side.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(side):
            for c in calls:
                c(side.cuda_stream)
        side.synchronize()
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g, stream=side):
            sp = t.cuda.current_stream().cuda_stream
            outs = [c(sp) for c in calls]
        return g.replay, outs

    # -- GEMM ------------------------------------------------------------------------------------
    def make_inputs(self, p, seed: int):
        t = self.torch
        g = t.Generator(device=self.dev)
        g.manual_seed(seed)
        x = {"problem": p}
        if p.dtype == "bf16":
            x["a"] = t.randn(p.m, p.k, device=self.dev, dtype=t.bfloat16, generator=g)
            x["w"] = t.randn(p.n, p.k, device=self.dev, dtype=t.bfloat16, generator=g)
            x["sa"] = x["sb"] = None
        else:
            x["a"] = t.randn(p.m, p.k, device=self.dev, dtype=t.bfloat16, generator=g).to(t.float8_e4m3fn)
            x["w"] = t.randn(p.n, p.k, device=self.dev, dtype=t.bfloat16, generator=g).to(t.float8_e4m3fn)
            if p.scale == "tensorwise":
                x["sa"] = (t.rand((), device=self.dev, generator=g) + 0.5).float()
                x["sb"] = (t.rand((), device=self.dev, generator=g) + 0.5).float()
            elif p.scale == "block":
                x["sa"], x["sb"] = self.block_scales(p.m, p.n, p.k, g)
                p.baseline = self.block_baseline()
            else:  # rowwise: sa[m] (as [m,1]) and sb[n] (as [1,n]), contiguous
                x["sa"] = (t.rand(p.m, 1, device=self.dev, generator=g) + 0.5).float()
                x["sb"] = (t.rand(1, p.n, device=self.dev, generator=g) + 0.5).float()
        # gemmtune's output for this set, shared by its contenders (as the race's sets are);
        # the correctness check poisons it before each contender's call.
        x["d"] = t.empty(p.m, p.n, device=self.dev, dtype=t.bfloat16)
        return x

    def baseline_fn(self, p, x):
        t = self.torch
        a, wt, sa, sb = x["a"], x["w"].t(), x["sa"], x["sb"]
        if p.dtype == "bf16":
            return lambda: t.mm(a, wt)
        if p.scale == "block":
            self.block_baseline()
            if self.block_form is not None:
                return self.torch_block_call(self.block_form, a, x["w"], sa, sb)
            from .block_triton import block_fp8_gemm
            w, out = x["w"], t.empty(p.m, p.n, device=self.dev, dtype=t.bfloat16)
            return lambda: block_fp8_gemm(a, w, sa, sb, out)
        return lambda: t._scaled_mm(a, wt, scale_a=sa, scale_b=sb, out_dtype=t.bfloat16)

    def block_scales(self, m, n, k, g):
        """(sa, sb) of a block-scaled problem in gemmtune's layouts (include/gemmtune/problem.hpp),
        random in [0.5, 2): sa [kb, m] contiguous (torch's [m, kb] with strides (1, m) is sa.t()), sb
        [nb, round_up(kb, 4)] contiguous (torch's scale_b is sb[:, :kb].t())."""
        t = self.torch
        kb, nb = -(-k // 128), -(-n // 128)
        sa = (t.rand(kb, m, device=self.dev, generator=g) * 1.5 + 0.5).float()
        sb = (t.rand(nb, -(-kb // 4) * 4, device=self.dev, generator=g) * 1.5 + 0.5).float()
        return sa, sb

    def torch_block_call(self, form, a, w, sa, sb):
        """fn() -> D: torch's block-scaled call in `form` on A [m, k], W [n, k] (fp8) and gemmtune's
        scale layouts. "v1": torch._scaled_mm(a, w.t(), scale_a=[m, kb] strides (1, m), scale_b=
        sb[:, :kb].t()); "v2": torch.nn.functional.scaled_mm with the ScalingType recipes
        (BlockWise 1x128 for A, 128x128 for W; scale_b = sb.t(): [round_up(kb, 4), nb] strides (1,
        round_up(kb, 4)), as its _scaled_block1x128_block128x128 wants)."""
        t = self.torch
        wt, sat = w.t(), sa.t()
        if form == "v1":
            sbt = sb[:, :sa.shape[0]].t()
            return lambda: t._scaled_mm(a, wt, scale_a=sat, scale_b=sbt, out_dtype=t.bfloat16)
        F = t.nn.functional
        ST = F.ScalingType
        one = next(getattr(ST, n) for n in ("Blockwise_1x128", "BlockWise1x128") if hasattr(ST, n))
        blk = next(getattr(ST, n) for n in ("Blockwise_128x128", "BlockWise128x128") if hasattr(ST, n))
        sbt = sb.t()
        return lambda: F.scaled_mm(a, wt, sat, one, sbt, blk, output_dtype=t.bfloat16)

    def block_baseline(self):
        """The block-scaled baseline's name: BLOCK_TORCH[form] when this torch takes block scales
        (BlockWise1x128 for A, BlockWise128x128 for W) on this GPU through torch._scaled_mm ("v1")
        or torch.nn.functional.scaled_mm ("v2", tried second) and is right on a probe (256 x 384 x
        1024: a partial n block), else the bench's own Triton kernel (block_triton.NAME). Probed
        once; the form used, or why torch was not, is in block_baseline_note."""
        if self._block_baseline is None:
            from .block_triton import NAME
            t = self.torch
            self._block_baseline = NAME
            why = []

            class P:  # the probe's problem, for reference()
                m, n, k, scale = 256, 384, 1024, "block"
            g = t.Generator(device=self.dev)
            g.manual_seed(1)
            x = {"a": t.randn(P.m, P.k, device=self.dev, generator=g).to(t.float8_e4m3fn),
                 "w": t.randn(P.n, P.k, device=self.dev, generator=g).to(t.float8_e4m3fn)}
            x["sa"], x["sb"] = self.block_scales(P.m, P.n, P.k, g)
            ref = self.reference(P, x)
            for form in ("v1", "v2"):
                try:
                    out = self.torch_block_call(form, x["a"], x["w"], x["sa"], x["sb"])()
                    rel, finite = self.check(out, ref)
                except Exception as e:  # noqa: BLE001 (any refusal of torch's means: not offered)
                    msg = " ".join(str(e).split())
                    got = msg.find("Got ")  # torch's message ends with what it was given
                    why.append(f"{form}: {type(e).__name__}: {msg[:160]}{' ... ' + msg[got:got + 300] if got > 160 else ''}")
                    continue
                if finite and rel <= 1e-2:
                    self._block_baseline, self.block_form = BLOCK_TORCH[form], form
                    why.append(f"{form}: takes block scales (probe rel err {rel:.2g})")
                    break
                why.append(f"{form}: wrong here (probe rel err {rel:.3g}, finite {finite})")
            self.block_baseline_note = "; ".join(why)
        return self._block_baseline
    def gemmtune_fn(self, kernel, p, x):
        """(fn, D): one call of the kernel on set x, into the set's D, on the current stream."""
        call, sp = self.gemmtune_call(kernel, p, x), self.stream_ptr
        return (lambda: call(sp)), x["d"]

    def gemmtune_call(self, kernel, p, x, overlap=False):
        """call(stream_ptr) -> D: one run of the kernel on set x, into the set's D, on that stream
        (the bindings' Kernel.run takes any cudaStream_t: a capturing one too); overlap: launched
        with overlap_previous (a programmatic dependent launch where the kernel supports it)."""
        d = x["d"]
        a_ptr, w_ptr, d_ptr = x["a"].data_ptr(), x["w"].data_ptr(), d.data_ptr()
        sa_ptr = x["sa"].data_ptr() if x["sa"] is not None else 0
        sb_ptr = x["sb"].data_ptr() if x["sb"] is not None else 0
        run = kernel.run

        def call(stream_ptr):
            run(a_ptr, w_ptr, 0, d_ptr, 0, sa_ptr, sb_ptr, stream_ptr, overlap)
            return d
        return call

    def baseline_call(self, p, x):
        """call(stream_ptr) -> out: torch's call on set x; torch enqueues on its current stream, which
        is the given one wherever capture() calls it."""
        fn = self.baseline_fn(p, x)
        return lambda stream_ptr: fn()

    def reference(self, p, x):
        a32, w32 = x["a"].float(), x["w"].float()
        if p.scale == "block":  # the inputs times their block scales (exact in fp32 math up to rounding)
            kb = x["sa"].shape[0]
            a32.mul_(x["sa"].t().repeat_interleave(128, dim=1)[:, :p.k])
            sbw = x["sb"][:, :kb].repeat_interleave(128, dim=0)[:p.n]
            w32.mul_(sbw.repeat_interleave(128, dim=1)[:, :p.k])
            del sbw
        ref = a32 @ w32.t()
        del a32, w32
        if x["sa"] is not None and p.scale != "block":
            ref.mul_(x["sa"]).mul_(x["sb"])
        return ref

    def poison(self, out):
        out.fill_(float("nan"))

    def check(self, out, ref):
        """(relative Frobenius error vs ref, all finite)."""
        t = self.torch
        o = out.float()
        finite = bool(t.isfinite(o).all().item())
        rel = (t.linalg.vector_norm(o - ref) / t.linalg.vector_norm(ref)).item()
        return rel, finite

    def rel_diff(self, out, other):
        t = self.torch
        o, r = out.float(), other.float()
        return (t.linalg.vector_norm(o - r) / t.linalg.vector_norm(r)).item()

    # -- softmax ---------------------------------------------------------------------------------
    def softmax_input(self, p, seed):
        """x[rows, cols] random in [-8, 8) (never zeros), of p's dtype."""
        t = self.torch
        g = t.Generator(device=self.dev)
        g.manual_seed(seed)
        dt = {"bf16": t.bfloat16, "fp16": t.float16, "fp32": t.float32}[p.dtype]
        return (t.rand((p.rows, p.cols), generator=g, device=self.dev, dtype=t.float32) * 16 - 8).to(dt)

    def softmax_contenders(self, engine, kernel, p, x):
        """({pick, torch, triton_plain: fn}, {name: check}): gemmtune's kernel, torch.softmax and the
        plain Triton kernel on x, each checked once before timing (gemmtune's and Triton's outputs
        are NaN-filled buffers until they write them)."""
        t = self.torch
        if self.plain_softmax is None:
            from .plain_softmax import make_plain_softmax
            self.plain_softmax = make_plain_softmax()
        y_gt = t.full_like(x, float("nan"))
        y_tr = t.full_like(x, float("nan"))
        stream, scale, plain = self.stream_ptr, p.scale, self.plain_softmax
        fns = {"pick": lambda: engine.softmax_run(kernel, x.data_ptr(), y_gt.data_ptr(), stream),
               "torch": (lambda: t.softmax(x, dim=-1)) if scale == 1.0 else (lambda: t.softmax(x * scale, dim=-1)),
               "triton_plain": lambda: plain(x, y_tr, scale)}
        fns["pick"]()
        fns["triton_plain"]()
        y_torch = fns["torch"]()
        self.sync()
        checks = {"pick": self.softmax_check(y_gt, x, p), "torch": self.softmax_check(y_torch, x, p),
                  "triton_plain": self.softmax_check(y_tr, x, p)}
        return fns, checks

    def softmax_check(self, y, x, p):
        """{ok, nan, rel_err, worst_ratio}: y against torch.softmax(x.float() * scale) in fp32; rel_err
        relative Frobenius, worst_ratio the largest |y - ref| / (rel * |ref| + abs) (<= 1 passes)."""
        t = self.torch
        ref = t.softmax(x.float() * p.scale, dim=-1)
        yf = y.float()
        nan = int(t.isnan(yf).sum().item())
        diff = (yf - ref).abs_()
        rel, ab = SOFTMAX_BOUNDS[p.dtype]
        ratio = diff.div_(ref.abs().mul_(rel).add_(ab))
        worst = float(t.nan_to_num(ratio, nan=float("inf")).max().item())
        del ratio
        err_norm = float(t.linalg.vector_norm(yf - ref).item())
        ref_norm = float(t.linalg.vector_norm(ref).item())
        frob = err_norm / ref_norm
        n = ref.numel()
        del ref, yf
        # The norm bound has the element bound's absolute floor too: in a row of 2^20 values every
        # probability is ~1e-6, an fp16 subnormal, whose rounding alone is a relative error of ~1e-3.
        ok = (nan == 0 and math.isfinite(frob) and err_norm <= SOFTMAX_FROB_TOL[p.dtype] * ref_norm + ab * math.sqrt(n)
              and worst <= 1.0)
        return {"ok": ok, "nan": nan, "rel_err": frob, "worst_ratio": worst}

    def plain_variant(self, cols):
        from .plain_softmax import plain_variant
        return plain_variant(cols)


# ---------------------------------------------------------------------------------------------
# --mock: the same interface on the CPU. A contender's fn returns ("out", its time in us); the
# timing loop adds up to 3% noise.

class MockGpu:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.l2_bytes, self.mem_bytes = 50 << 20, 140 << 30

    def versions(self):
        return {"torch": "mock", "torch_cuda": "mock", "device_name": "Mock H200", "capability": "9.0",
                "triton": "mock", "python": platform.python_version()}

    def empty_cache(self):
        pass

    def sync(self):
        pass

    def state(self):
        return None

    def identity(self):
        return {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def loaded_cublaslt(self):
        return None

    def time_interleaved(self, fns, rounds, warmup_ms, spin_scale=1, flush_warmup=False):
        res = {}
        for nm, fn in fns.items():
            base = fn()[1]
            res[nm] = [base * (1 + 0.03 * self.rng.random()) for _ in range(rounds)]
        self.last_spin_us = 50.0 * spin_scale
        self.last_host_us = {nm: (25.0 if nm.startswith("inductor") else 6.0) for nm in fns}
        return res

    # -- the stream ceiling: 2.5 us + bytes / 4.4 TB/s (the H200's curve, issue 14) for the best config
    MOCK_STREAM = {"b4096w4": 1.06, "b8192w8": 1.0, "b16384w8": 1.02, "b4096w4p8": 1.12, "b8192w8p4": 1.04,
                   "b16384w16p2": 1.09}

    def stream_setup(self, max_bytes):
        pass

    def stream_fns(self, nbytes):
        us = 2.5 + nbytes / 4.4e6
        return {name: (lambda f=f: ("out", us * f)) for name, f in self.MOCK_STREAM.items()}

    def stream_check(self, nbytes):
        return {name: True for name in self.MOCK_STREAM}

    def stream_release(self):
        pass

    # -- CUDA graphs: a replay costs the sum of its calls' times, less 3% (no launch gaps) -------
    def capture(self, calls):
        outs = [c(0) for c in calls]
        us = 0.97 * sum(c.us for c in calls)

        def replay():
            for c in calls:
                c(0)
            return ("out", us)
        return replay, outs

    def ceilings(self, rounds, kinds=("copy", "bf16", "fp8"), flush_warmup=False):
        fake = {"copy": ("copy_TBps", 4.2, 4.3), "bf16": ("bf16_tflops", 690.0, 720.0),
                "fp8": ("fp8_tflops", 1240.0, 1290.0)}  # (field, median, best)
        res = {fake[k][0]: fake[k][1] for k in kinds}
        res.update({fake[k][0] + "_best": fake[k][2] for k in kinds})
        return {**res, "spread": {k: 0.01 for k in kinds}, "what": "mock"}

    # -- GEMM ------------------------------------------------------------------------------------
    def base_us(self, p):
        """The fake time of GEMM problem p: a roofline at 650 TFLOP/s and 4 TB/s, plus 3 us."""
        return max(p.flops / 650e12, p.min_bytes / 4.0e12) * 1e6 + 3

    def make_inputs(self, p, seed):
        return {"problem": p}

    def baseline_fn(self, p, x):
        base = self.base_us(p) * 1.06
        return lambda: ("out", base)

    def gemmtune_fn(self, kernel, p, x):
        out = {"v": "poisoned"}
        base = self.base_us(p) * kernel.speed

        def fn():
            out["v"] = "ok"
            return ("out", base)
        return fn, out

    def gemmtune_call(self, kernel, p, x, overlap=False):
        out = {"v": "poisoned"}

        def call(stream_ptr):
            out["v"] = "ok"
            return out
        return MockCall(call, self.base_us(p) * kernel.speed)

    def baseline_call(self, p, x):
        return MockCall(lambda stream_ptr: "out", self.base_us(p) * 1.06)

    def reference(self, p, x):
        return "ref"

    def poison(self, out):
        if isinstance(out, dict):
            out["v"] = "poisoned"

    def check(self, out, ref):
        if isinstance(out, dict):
            return (1.2e-3, True) if out["v"] == "ok" else (float("nan"), False)
        return 1.1e-3, True

    def rel_diff(self, out, other):
        return 4e-4

    # -- softmax ---------------------------------------------------------------------------------
    def softmax_input(self, p, seed):
        return {"problem": p}

    def softmax_contenders(self, engine, kernel, p, x):
        us = lambda tbps: ("out", p.bytes / (tbps * 1e6))  # noqa: E731
        fns = {"pick": lambda: us(kernel.speed), "torch": lambda: us(2.9), "triton_plain": lambda: us(3.2)}
        return fns, {nm: {"ok": True, "nan": 0, "rel_err": 1e-3, "worst_ratio": 0.5} for nm in fns}

    def plain_variant(self, cols):
        return "mock"


class MockCall:
    """A mock GEMM call for capture(): call(stream_ptr) -> its output; us: its fake time."""

    def __init__(self, fn, us):
        self.fn, self.us = fn, us

    def __call__(self, stream_ptr):
        return self.fn(stream_ptr)
