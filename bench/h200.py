#!/usr/bin/env python3
"""gemmtune on the H200: ceilings, the LLM-layer suite against cuBLASLt's default, torch and
TorchInductor, tuning stability, and cache-hit select times. One process, one script.

    python3 bench/h200.py                                  # everything, within --budget-s
    python3 bench/h200.py --part suite --dtypes bf16 --limit 4 --inductor-subset none   # smoke

Writes $OUT/<YYYY-MM-DD>-h200.json and .md (bench/README.md documents the JSON), plus
h200-rows.partial.jsonl while the suite runs. The summary table is printed LAST on stdout.

Method: random inputs (never zeros); an L2 flush (a 256 MB fill)
before every timed sample, outside the timed region; warm-up; CUDA events; medians with p20 /
p80; everything compared INTERLEAVED in rounds in one process (the H200's clocks drift by up to
22% minutes apart); correctness against a float32 reference of the same inputs, and against
torch's output; NaN or mismatch fails the run (exit 1) after everything is written.

Parts (--part, comma-separated; default all):
  ceilings   copy TB/s, bf16 and fp8 TFLOP/s measured now (also re-measured at the end)
  suite      bench/suites/llm_layers.csv x m_values.csv x --dtypes: gemmtune select (tunes from an
             empty cache) vs cuBLASLt's default (the report's is_default candidate) vs torch.mm /
             torch._scaled_mm (+ TorchInductor max-autotune on --inductor-subset)
  stability  re-tune every finished suite problem from an EMPTY cache (a second engine) and
             compare picks; different picks are timed head to head
  cachehit   in a separate process (the gemmtune CLI's `suite --cache`), answer every finished
             problem from pass 1's cache; select_ms per problem (target < 1 ms)
A time budget (--budget-s) keeps the run inside one device call: problems are ordered (the
Inductor subset first, then a fixed shuffle) and a part stops taking new problems when the next
one would not fit; the JSON says what was covered and what was skipped.
--mock runs the whole flow on the CPU with a fake GPU and a fake engine (no torch, no library):
a self-test of the bench's own logic.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

T_START = time.monotonic()
REPO = Path(__file__).resolve().parent.parent

PARTS = ("ceilings", "suite", "stability", "cachehit")
DTYPES = {
    # name -> (gemmtune dtype, scale mode, baseline name)
    "bf16": ("bf16", "none", "torch.mm"),
    "fp8": ("e4m3", "tensorwise", "torch._scaled_mm"),
    "fp8-rowwise": ("e4m3", "rowwise", "torch._scaled_mm"),
}
DEFAULT_INDUCTOR_SUBSET = ("16:llama3-70b:qkv,128:llama3-70b:down,2048:llama3-70b:gate_up,"
                           "8192:llama3-70b:o,8192:llama3-70b:down")


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.1f}s] {msg}", flush=True)


def warn(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.1f}s] !!! {msg}", flush=True)
    print(f"h200.py: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# arguments

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="gemmtune H200 benchmark: ceilings, suite vs cuBLASLt default / torch / Inductor, "
                    "stability, cache-hit times. Writes $OUT/<date>-h200.json and .md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python3 bench/h200.py                                  # all parts, default budget\n"
               "  python3 bench/h200.py --dtypes bf16 --budget-s 0        # bf16 only, no time limit\n"
               "  python3 bench/h200.py --part suite --limit 4 --inductor-subset none   # smoke run\n"
               "  python3 bench/h200.py --mock --out /tmp/h200-mock      # CPU self-test of this script\n")
    ap.add_argument("--part", default=",".join(PARTS), help=f"comma-separated parts to run: {','.join(PARTS)} (default: all)")
    ap.add_argument("--dtypes", default="bf16,fp8", help="comma-separated: bf16, fp8 (e4m3, tensorwise scales, bf16 out), "
                    "fp8-rowwise (rowwise scales; kept only where gemmtune has a correct candidate). Default bf16,fp8")
    ap.add_argument("--layers", default=str(REPO / "bench/suites/llm_layers.csv"), help="comma-separated CSVs: model,layer,n,k (crossed with the m values) or m,n,k")
    ap.add_argument("--m-file", default=str(REPO / "bench/suites/m_values.csv"), help="CSV phase,m")
    ap.add_argument("--m-values", default="", help="comma-separated m values to keep (default: all of --m-file)")
    ap.add_argument("--models", default="", help="comma-separated model names (or model/layer) to keep (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="at most N suite problems (after ordering; 0 = all)")
    ap.add_argument("--inductor-subset", default=DEFAULT_INDUCTOR_SUBSET,
                    help="bf16 problems also run through torch.compile(mode='max-autotune'): comma-separated "
                         "m:model:layer, or 'none' (default: %(default)s)")
    ap.add_argument("--inductor-mode", default="max-autotune",
                    help="torch.compile mode for the subset (default %(default)s; its CUDA graphs see A and W as "
                         "static inputs, as a model's weights are, so nothing is copied per call)")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall-time budget of this script from its start (0 = unlimited); parts stop taking "
                         "new problems when the next would not fit (default %(default)s)")
    ap.add_argument("--reserve-s", type=float, default=40.0,
                    help="seconds of the budget kept for cachehit, the final ceilings and writing (default %(default)s)")
    ap.add_argument("--suite-share", type=float, default=0.6,
                    help="share of the budget (less a reserve) the suite may use when stability also runs")
    ap.add_argument("--rounds", type=int, default=30, help="interleaved rounds of side-by-side timing (one sample of "
                    "each contender per round; default %(default)s)")
    ap.add_argument("--warmup-ms", type=float, default=30.0, help="warm-up per problem before timing (default %(default)s)")
    ap.add_argument("--ceiling-rounds", type=int, default=20, help="interleaved rounds for the ceilings")
    ap.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer, MiB (default %(default)s)")
    ap.add_argument("--tol", type=float, default=1e-2, help="max relative error (Frobenius) vs the fp32 reference and "
                    "vs torch's output (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1234, help="inputs and problem order")
    ap.add_argument("--backends", default="", help="gemmtune backends (default: all available)")
    ap.add_argument("--tune-json", default="", help="gemmtune TuneOptions as JSON, e.g. '{\"max_rounds\": 10}' "
                    "(default: the engine's defaults)")
    ap.add_argument("--tag", default="", help="file name suffix: <date>-h200-<tag>.json (e.g. bf16, fp8: two calls, two files)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="output folder (default $OUT, else ./bench-out)")
    ap.add_argument("--lib", default="", help="libgemmtune_c.so or its folder (default $GEMMTUNE_LIB, else build/)")
    ap.add_argument("--gemmtune-cli", default=str(REPO / "build/gemmtune"), help="the gemmtune CLI for the cachehit part")
    ap.add_argument("--inductor-cache-dir", default="", help="TORCHINDUCTOR_CACHE_DIR (default: a fresh temporary "
                    "folder, so compile times are cold)")
    ap.add_argument("--quiet-engine", action="store_true", help="do not pass the engine's progress log to stderr")
    ap.add_argument("--keep-cache", action="store_true", help="also copy pass 1's tuning cache into the output folder")
    ap.add_argument("--mock", action="store_true", help="CPU self-test: fake GPU and engine, no torch, no library")
    args = ap.parse_args(argv)

    args.parts = [p.strip() for p in args.part.split(",") if p.strip()]
    for p in args.parts:
        if p not in PARTS:
            ap.error(f"--part: unknown part '{p}' (known: {', '.join(PARTS)})")
    args.dtype_list = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in args.dtype_list:
        if d not in DTYPES:
            ap.error(f"--dtypes: unknown dtype '{d}' (known: {', '.join(DTYPES)})")
    if ("stability" in args.parts or "cachehit" in args.parts) and "suite" not in args.parts:
        ap.error("--part: stability and cachehit work on the problems the suite part finished; add suite")
    try:
        args.m_keep = {int(x) for x in args.m_values.split(",") if x.strip()}
    except ValueError:
        ap.error(f"--m-values: '{args.m_values}' is not a comma-separated list of integers")
    args.model_keep = [x.strip() for x in args.models.split(",") if x.strip()]
    args.subset = set()
    if args.inductor_subset.strip().lower() not in ("", "none"):
        for item in args.inductor_subset.split(","):
            parts = item.strip().split(":")
            if len(parts) != 3 or not parts[0].isdigit():
                ap.error(f"--inductor-subset: '{item}' is not m:model:layer")
            args.subset.add((int(parts[0]), parts[1], parts[2]))
    args.tune = None
    if args.tune_json:
        try:
            args.tune = json.loads(args.tune_json)
        except json.JSONDecodeError as e:
            ap.error(f"--tune-json: {e}")
    args.backend_list = [b.strip() for b in args.backends.split(",") if b.strip()] or None
    if args.rounds < 3:
        ap.error("--rounds: at least 3")
    if not args.out:
        args.out = str(Path.cwd() / "bench-out")
    return args


# ---------------------------------------------------------------------------------------------
# statistics

def quantile(sorted_vals, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_vals:
        return 0.0
    pos = (len(sorted_vals) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(samples):
    s = sorted(x for x in samples if x is not None and math.isfinite(x))
    if not s:
        return {"median_us": None, "p20_us": None, "p80_us": None, "min_us": None, "samples": 0, "spread": None}
    med = quantile(s, 0.5)
    p20, p80 = quantile(s, 0.2), quantile(s, 0.8)
    return {"median_us": med, "p20_us": p20, "p80_us": p80, "min_us": s[0], "samples": len(s),
            "spread": (p80 - p20) / med if med > 0 else None}


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def tflops(flops, us):
    return flops / us * 1e-6 if us else None


def fnum(x, digits=1, none="-"):
    if x is None:
        return none
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}f}"


def fratio(x):
    return "-" if x is None else f"{x:.3f}"


def fpct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


# ---------------------------------------------------------------------------------------------
# problems

class Problem:
    def __init__(self, model, layer, phase, m, n, k, dname):
        self.model, self.layer, self.phase = model, layer, phase
        self.m, self.n, self.k = m, n, k
        self.dname = dname
        self.dtype, self.scale, self.baseline = DTYPES[dname]
        self.inductor = False
        self.index = 0

    @property
    def label(self):
        return f"{self.model}/{self.layer} m={self.m} {self.dname}"

    @property
    def key(self):
        return (self.model, self.layer, self.m, self.n, self.k, self.dname)

    def gt(self):
        """The C API's problem JSON: D[m,n] = A[m,k] @ W[n,k]^T (layout rc), out bf16."""
        d = {"m": self.m, "n": self.n, "k": self.k, "dtype": self.dtype, "layout": "rc", "d_layout": "r"}
        if self.scale != "none":
            d["scale"] = self.scale
            d["out_dtype"] = "bf16"
        return d

    @property
    def flops(self):
        return 2.0 * self.m * self.n * self.k

    @property
    def in_size(self):
        return 2 if self.dtype == "bf16" else 1

    @property
    def min_bytes(self):
        return (self.m * self.k + self.n * self.k) * self.in_size + self.m * self.n * 2

    def fields(self):
        return {"op": "gemm", "model": self.model, "layer": self.layer, "phase": self.phase, "m": self.m,
                "n": self.n, "k": self.k, "dtype": self.dtype, "dtype_name": self.dname, "scale": self.scale,
                "out_dtype": "bf16", "layout": "rc", "epilogue": "none"}


def read_csv(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    if not rows:
        raise SystemExit(f"{path}: empty")
    head = [h.strip().lower() for h in rows[0]]
    return [dict(zip(head, (c.strip() for c in r))) for r in rows[1:]]


def load_problems(args):
    # --layers: comma-separated CSVs, each either model,layer,n,k (crossed with the m values)
    # or m,n,k (e.g. squares.csv: model "square").
    layers = []
    for path in args.layers.split(","):
        for row in read_csv(path):
            if "m" in row:
                row = dict(row, model=row.get("model", "square"), layer=row.get("layer", f"{row['m']}x{row['n']}x{row['k']}"))
            layers.append(row)
    ms = read_csv(args.m_file)
    out = []
    seen = {}  # (m, n, k, dtype) -> problem: layers of the same shape are one problem, named by all
    for dname in args.dtype_list:
        for lay in layers:
            model, layer = lay.get("model", ""), lay.get("layer", "")
            if args.model_keep and model not in args.model_keep and f"{model}/{layer}" not in args.model_keep:
                continue
            for mv in ([{"m": lay["m"], "phase": "square"}] if "m" in lay else ms):
                m = int(mv["m"])
                if args.m_keep and m not in args.m_keep:
                    continue
                key = (m, int(lay["n"]), int(lay["k"]), dname)
                inductor = dname == "bf16" and (m, model, layer) in args.subset
                if key in seen:
                    q = seen[key]
                    if layer == q.layer:
                        q.model += "+" + model
                    else:
                        q.layer += "+" + model + "/" + layer
                    q.inductor = q.inductor or inductor
                    continue
                p = Problem(model, layer, mv.get("phase", ""), m, int(lay["n"]), int(lay["k"]), dname)
                p.inductor = inductor
                seen[key] = p
                out.append(p)
    # The Inductor subset first (their compile times must not be cut by the budget), then a
    # fixed shuffle, so that a budget-limited run still covers every model, m and dtype.
    first = [p for p in out if p.inductor]
    rest = [p for p in out if not p.inductor]
    random.Random(args.seed).shuffle(rest)
    ordered = first + rest
    if args.limit > 0:
        ordered = ordered[:args.limit]
    for i, p in enumerate(ordered):
        p.index = i
    return ordered


# ---------------------------------------------------------------------------------------------
# the time budget

class Budget:
    def __init__(self, total_s):
        self.total = total_s

    def unlimited(self):
        return self.total <= 0

    def at(self, seconds_from_start):
        return math.inf if self.unlimited() else T_START + seconds_from_start

    def end(self):
        return self.at(self.total)

    def fits(self, deadline, estimate_s):
        return time.monotonic() + estimate_s <= deadline


def estimate(durations, default):
    """A cautious guess for the next item: the larger of the median and the mean of the last 5."""
    if not durations:
        return default
    last = durations[-5:]
    return max(statistics.median(durations), sum(last) / len(last))


# ---------------------------------------------------------------------------------------------
# the GPU side (torch). Everything that touches the device is here.

class TorchGpu:
    def __init__(self, args):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit("h200.py: torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.dev = torch.device("cuda")
        self.flush_buf = torch.empty(args.flush_mb << 20, dtype=torch.int8, device=self.dev)
        self.flush_count = 0
        self.stream_ptr = torch.cuda.current_stream().cuda_stream
        self.inductor_init_s = None
        self.inductor_mode = args.inductor_mode
        try:
            torch.cuda._sleep(10)
            self.can_sleep = True
        except Exception:
            self.can_sleep = False
        self.mm_nt = lambda a, w: torch.mm(a, w.t())  # what torch.compile compiles
        # A spin of ~50 us after the flush: the host enqueues (event, kernel, event) while the
        # GPU is busy, so host-side launch overhead (Inductor's guards, ctypes) is never timed.
        self.sleep_cycles = 100_000

    def versions(self):
        t = self.torch
        v = {"torch": t.__version__, "torch_cuda": t.version.cuda, "device_name": t.cuda.get_device_name(0),
             "capability": ".".join(map(str, t.cuda.get_device_capability(0)))}
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

    # -- inputs and contenders -----------------------------------------------------------------
    def make_inputs(self, p: Problem, seed: int):
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
            else:  # rowwise: sa[m] (as [m,1]) and sb[n] (as [1,n]), contiguous
                x["sa"] = (t.rand(p.m, 1, device=self.dev, generator=g) + 0.5).float()
                x["sb"] = (t.rand(1, p.n, device=self.dev, generator=g) + 0.5).float()
        return x

    def baseline_fn(self, p: Problem, x):
        t = self.torch
        a, wt, sa, sb = x["a"], x["w"].t(), x["sa"], x["sb"]
        if p.dtype == "bf16":
            return lambda: t.mm(a, wt)
        return lambda: t._scaled_mm(a, wt, scale_a=sa, scale_b=sb, out_dtype=t.bfloat16)

    def gemmtune_fn(self, kernel, p: Problem, x):
        d = self.torch.empty(p.m, p.n, device=self.dev, dtype=self.torch.bfloat16)
        a_ptr, w_ptr, d_ptr = x["a"].data_ptr(), x["w"].data_ptr(), d.data_ptr()
        sa_ptr = x["sa"].data_ptr() if x["sa"] is not None else 0
        sb_ptr = x["sb"].data_ptr() if x["sb"] is not None else 0
        run, sp = kernel.run, self.stream_ptr

        def fn():
            run(a_ptr, w_ptr, 0, d_ptr, 0, sa_ptr, sb_ptr, sp)
            return d
        return fn, d

    def inductor_fn(self, p: Problem, x):
        """(fn, compile_s): torch.compile(mode='max-autotune') of a @ w.t(), compiled now."""
        t = self.torch
        import torch._dynamo
        if self.inductor_init_s is None:
            # One-time start-up (imports, worker pool) kept out of the per-problem compile times.
            t0 = time.perf_counter()
            torch._dynamo.reset()
            a0 = t.randn(256, 256, device=self.dev, dtype=t.bfloat16)
            t.compile(self.mm_nt, mode=self.inductor_mode, dynamic=False)(a0, a0)
            self.sync()
            self.inductor_init_s = time.perf_counter() - t0
        torch._dynamo.reset()
        f = t.compile(self.mm_nt, mode=self.inductor_mode, dynamic=False)
        a, w = x["a"], x["w"]
        # Without this, CUDA graphs (part of mode max-autotune) copy every non-static input into
        # the graph's own buffers before each replay: a copy of W per call, which a model (whose
        # weights are parameters) never pays.
        try:
            torch._dynamo.mark_static_address(a)
            torch._dynamo.mark_static_address(w)
        except Exception as e:
            warn(f"inductor: mark_static_address failed ({e}); inputs may be copied per call")
        t0 = time.perf_counter()
        f(a, w)
        self.sync()
        compile_s = time.perf_counter() - t0
        return (lambda: f(a, w)), compile_s

    # -- correctness -------------------------------------------------------------------------------
    def reference(self, p: Problem, x):
        a32, w32 = x["a"].float(), x["w"].float()
        ref = a32 @ w32.t()
        del a32, w32
        if x["sa"] is not None:
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

    # -- timing --------------------------------------------------------------------------------
    def _flush(self):
        self.flush_count += 1
        self.flush_buf.fill_(self.flush_count & 0x7F)
        if self.can_sleep:
            self.torch.cuda._sleep(self.sleep_cycles)

    def time_interleaved(self, fns, rounds, warmup_ms):
        """{name: [us, ...]}: `rounds` rounds, each one sample of every fn in a rotated order;
        each sample = L2 flush, then CUDA events around one call."""
        t = self.torch
        names = list(fns)
        t0 = time.perf_counter()
        n = 0
        while True:
            for nm in names:
                fns[nm]()
            n += 1
            self.sync()
            if n >= 2 and (time.perf_counter() - t0) * 1e3 >= warmup_ms:
                break
        starts = [t.cuda.Event(enable_timing=True) for _ in names]
        ends = [t.cuda.Event(enable_timing=True) for _ in names]
        out = {nm: [] for nm in names}
        for r in range(rounds):
            shift = r % len(names)
            order = names[shift:] + names[:shift]
            for j, nm in enumerate(order):
                self._flush()
                starts[j].record()
                fns[nm]()
                ends[j].record()
            ends[len(order) - 1].synchronize()
            for j, nm in enumerate(order):
                out[nm].append(starts[j].elapsed_time(ends[j]) * 1e3)
        return out

    def ceilings(self, rounds):
        t = self.torch
        src = t.randint(-128, 127, (1 << 30,), dtype=t.int8, device=self.dev)
        dst = t.empty_like(src)
        nb = 8192
        a = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
        b = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
        a8, b8 = a.to(t.float8_e4m3fn), b.to(t.float8_e4m3fn)
        one = t.ones((), device=self.dev, dtype=t.float32)
        bt, b8t = b.t(), b8.t()
        fns = {"copy": lambda: dst.copy_(src), "bf16": lambda: t.mm(a, bt),
               "fp8": lambda: t._scaled_mm(a8, b8t, scale_a=one, scale_b=one, out_dtype=t.bfloat16)}
        s = self.time_interleaved(fns, rounds, warmup_ms=300)
        st = {k: summarize(v) for k, v in s.items()}
        flops = 2.0 * nb ** 3
        copy_bytes = 2.0 * src.numel()
        res = {"copy_TBps": copy_bytes / st["copy"]["median_us"] * 1e-6,
               "bf16_tflops": flops / st["bf16"]["median_us"] * 1e-6,
               "fp8_tflops": flops / st["fp8"]["median_us"] * 1e-6,
               "copy_TBps_best": copy_bytes / st["copy"]["min_us"] * 1e-6,
               "bf16_tflops_best": flops / st["bf16"]["min_us"] * 1e-6,
               "fp8_tflops_best": flops / st["fp8"]["min_us"] * 1e-6,
               "spread": {k: v["spread"] for k, v in st.items()},
               "what": "copy: 1 GiB device-to-device, bytes read+written; bf16: torch.mm 8192^3; "
                       "fp8: torch._scaled_mm e4m3 8192^3 tensorwise, bf16 out; random data; medians "
                       f"of {rounds} interleaved rounds (best = fastest sample)"}
        return res

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

    def release(self, *objs):
        pass


def gpu_state():
    """Read-only nvidia-smi query (clocks, power, temperature), or None."""
    q = "clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pstate"
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20)
        if r.returncode == 0:
            return dict(zip(q.split(","), (x.strip() for x in r.stdout.strip().splitlines()[0].split(","))))
        return {"error": r.stderr.strip()[:300]}
    except Exception as e:
        return {"error": str(e)[:300]}


# ---------------------------------------------------------------------------------------------
# --mock: a fake GPU and a fake engine with the same interfaces, for a CPU self-test

class MockGpu:
    def __init__(self, args):
        self.rng = random.Random(args.seed)
        self.inductor_init_s = 0.01

    def versions(self):
        return {"torch": "mock", "torch_cuda": "mock", "device_name": "Mock H200", "capability": "9.0",
                "triton": "mock"}

    def empty_cache(self):
        pass

    def sync(self):
        pass

    def _base_us(self, p):
        return max(p.flops / 650e12, p.min_bytes / 4.0e12) * 1e6 + 3

    def make_inputs(self, p, seed):
        return {"problem": p}

    def baseline_fn(self, p, x):
        base = self._base_us(p) * 1.06
        return lambda: ("out", base)

    def gemmtune_fn(self, kernel, p, x):
        out = {"v": "poisoned"}
        base = self._base_us(p) * kernel.speed

        def fn():
            out["v"] = "ok"
            return ("out", base)
        return fn, out

    def inductor_fn(self, p, x):
        time.sleep(0.01)
        base = self._base_us(p) * 1.02
        return (lambda: ("out", base)), 0.01

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

    def time_interleaved(self, fns, rounds, warmup_ms):
        res = {}
        for nm, fn in fns.items():
            base = fn()[1]
            res[nm] = [base * (1 + 0.03 * self.rng.random()) for _ in range(rounds)]
        return res

    def ceilings(self, rounds):
        return {"copy_TBps": 4.2, "bf16_tflops": 690.0, "fp8_tflops": 1240.0, "copy_TBps_best": 4.3,
                "bf16_tflops_best": 720.0, "fp8_tflops_best": 1290.0, "spread": {}, "what": "mock"}

    def loaded_cublaslt(self):
        return None

    def release(self, *objs):
        pass


class MockKernel:
    def __init__(self, backend, id_, name, speed):
        self.backend, self.id, self.name, self.speed = backend, id_, name, speed

    def run(self, *a):
        pass

    def close(self):
        pass


class MockEngine:
    """Tunes 6 fake candidates; the pick differs between engines now and then."""
    count = 0

    def __init__(self, cache_path=None, backends=None, tune=None, **kw):
        MockEngine.count += 1
        self.salt = MockEngine.count
        self.cache_path = cache_path

    def info(self):
        return {"version": "mock", "device": {"name": "Mock H200", "str": "Mock H200 (sm_90)"},
                "environment": "mock", "backends": [{"name": "cublaslt", "status": "available (mock)"}],
                "cache_path": self.cache_path}

    def _speeds(self, problem):
        rng = random.Random(json.dumps(problem, sort_keys=True))
        return [1.0 + 0.1 * rng.random() for _ in range(6)]

    def select(self, problem, force=False):
        time.sleep(0.02)
        speeds = self._speeds(problem)
        if self.salt % 2 == 0 and problem["n"] % 3 == 0:
            speeds[1] = min(speeds) - 0.001  # a different pick in the second engine
        if problem.get("scale") == "rowwise":
            raise MockError("no backend has a candidate for rowwise (mock)")
        win = min(range(6), key=lambda i: speeds[i])
        results = []
        for i, s in enumerate(speeds):
            results.append({"backend": "cublaslt", "id": f"{i:02x}" * 4, "name": f"algo={i} tile=128x128",
                            "status": "ok" if i != 5 else "wrong", "reason": "" if i != 5 else "mock wrong",
                            "rel_err": 1e-3 if i != 5 else 0.5, "median_us": 10 * s, "p20_us": 9.9 * s,
                            "p80_us": 10.1 * s, "samples": 10, "compile_s": 0.001, "winner": i == win,
                            "is_default": i == 0})
        results.sort(key=lambda r: (not r["winner"], r["median_us"]))
        rep = {"problem": str(problem), "key": "mock", "from_cache": False, "seconds": 0.005,
               "spread": 0.01, "notes": [], "results": results}
        r = results[0]
        return MockKernel("cublaslt", r["id"], r["name"], speeds[win]), rep

    def load(self, problem, backend, id_):
        speeds = self._speeds(problem)
        i = int(id_[:2], 16)
        return MockKernel(backend, id_, f"algo={i} tile=128x128", speeds[i])

    def close(self):
        pass


class MockError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------
# the run

class Run:
    def __init__(self, args):
        self.args = args
        self.budget = Budget(args.budget_s)
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
        self.stem = f"{self.date}-h200" + (f"-{args.tag}" if args.tag else "")
        self.tmp = Path(tempfile.mkdtemp(prefix="gemmtune-h200-"))
        self.cache1 = self.tmp / "pass1.sqlite"
        self.cache2 = self.tmp / "stability.sqlite"
        self.rows = []
        self.problems = []       # per-problem summaries (suite)
        self.stability = []
        self.cachehit = {}
        self.ceilings = {}
        self.ceilings_end = {}
        self.part_seconds = {}
        self.errors = []         # part-level crashes
        self.mismatches = []     # correctness failures (exit 1)
        self.skipped = {"suite": [], "stability": []}
        self.env = {}
        self.done = []           # (Problem, pick id, pick backend, report) of finished suite problems
        self.partial = self.out / "h200-rows.partial.jsonl"
        if self.partial.exists():
            self.partial.unlink()

        if args.mock:
            self.gpu = MockGpu(args)
            self.Engine = MockEngine
            self.GemmtuneError = MockError
        else:
            if args.lib:
                os.environ["GEMMTUNE_LIB"] = args.lib
            elif "GEMMTUNE_LIB" not in os.environ:
                os.environ["GEMMTUNE_LIB"] = str(REPO / "build")
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", args.inductor_cache_dir or str(self.tmp / "inductor"))
            # torch first: gemmtune then shares the libcublasLt that torch loaded (one copy).
            self.gpu = TorchGpu(args)
            sys.path.insert(0, str(REPO / "python"))
            import gemmtune
            self.gemmtune = gemmtune
            self.Engine = gemmtune.Engine
            self.GemmtuneError = gemmtune.GemmtuneError

    def engine(self, cache_path):
        a = self.args
        return self.Engine(cache_path=str(cache_path), backends=a.backend_list, tune=a.tune,
                           log_to_stderr=not a.quiet_engine)

    def add_rows(self, rows):
        self.rows.extend(rows)
        with open(self.partial, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    # -- ceilings -------------------------------------------------------------------------------
    def part_ceilings(self, end=False):
        c = self.gpu.ceilings(self.args.ceiling_rounds)
        self.gpu.empty_cache()  # the ceilings' buffers are gone once ceilings() returned
        c["gpu_state"] = gpu_state() if not self.args.mock else None
        if end:
            self.ceilings_end = c
        else:
            self.ceilings = c
        log(f"ceilings{' (end)' if end else ''}: copy {c['copy_TBps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
            f"fp8 {c['fp8_tflops']:.0f} TFLOP/s")

    def roof_us(self, p: Problem):
        c = self.ceilings
        if not c:
            return None
        peak = c["bf16_tflops"] if p.dtype == "bf16" else c["fp8_tflops"]
        return max(p.flops / (peak * 1e12), p.min_bytes / (c["copy_TBps"] * 1e12)) * 1e6

    # -- suite ----------------------------------------------------------------------------------
    def part_suite(self, problems):
        a = self.args
        deadline = self.budget.end() - a.reserve_s
        if "stability" in a.parts and not self.budget.unlimited():
            deadline = T_START + (a.budget_s - a.reserve_s) * a.suite_share
        eng = self.engine(self.cache1)
        self.env["engine"] = eng.info()
        log(f"suite: {len(problems)} problems planned; engine {self.env['engine'].get('version')}, "
            f"{self.env['engine']['device'].get('str')}")
        durations, extra_inductor = [], []
        try:
            for p in problems:
                est = estimate(durations, 1.0) + (estimate(extra_inductor, 10.0) if p.inductor else 0)
                if not self.budget.fits(deadline, est):
                    self.skipped["suite"].append(p.label)
                    continue
                t0 = time.monotonic()
                summary = self.suite_problem(eng, p)
                dt = time.monotonic() - t0
                summary["wall_s"] = dt
                if p.inductor and summary.get("inductor"):
                    extra_inductor.append(summary["inductor"].get("compile_s") or 0)
                    durations.append(max(dt - (summary["inductor"].get("compile_s") or 0), 0.1))
                else:
                    durations.append(dt)
                self.problems.append(summary)
                self.print_problem(len(self.problems), len(problems), summary)
        finally:
            eng.close()
        if self.skipped["suite"]:
            warn(f"suite: budget reached, {len(self.skipped['suite'])} problems skipped (see summary.coverage)")

    def tune_rows(self, p: Problem, rep):
        rows = []
        for r in rep.get("results", []):
            timed = (r.get("median_us") or 0) > 0
            row = p.fields()
            row.update({
                "backend": r["backend"], "candidate": r["name"], "candidate_id": r["id"], "role": "candidate",
                "timing": "tune", "median_us": r["median_us"] if timed else None,
                "p20_us": r["p20_us"] if timed else None, "p80_us": r["p80_us"] if timed else None,
                "samples": r.get("samples"), "tflops": tflops(p.flops, r["median_us"]) if timed else None,
                "rel_err": r["rel_err"] if (r.get("rel_err") is not None and r["rel_err"] >= 0) else None,
                "rel_err_vs_torch": None, "compile_s": r.get("compile_s"),
                "correct": r["status"] in ("ok", "pruned"), "status": r["status"], "reason": r.get("reason", ""),
                "winner": bool(r.get("winner")), "default": bool(r.get("is_default")),
                "spread": ((r["p80_us"] - r["p20_us"]) / r["median_us"]) if timed else None})
            rows.append(row)
        return rows

    def suite_problem(self, eng, p: Problem):
        a, gpu = self.args, self.gpu
        s = {"label": p.label, **p.fields(), "flops": p.flops, "min_bytes": p.min_bytes, "roof_us": self.roof_us(p),
             "inductor_subset": p.inductor, "status": "ok", "errors": []}
        kernel = dkernel = None
        x = ref = None
        try:
            gpu.empty_cache()
            t0 = time.monotonic()
            try:
                kernel, rep = eng.select(p.gt())
            except self.GemmtuneError as e:
                if p.scale == "rowwise":
                    s["status"] = "skipped"
                    s["errors"].append(f"no correct rowwise candidate in gemmtune: {e}")
                    return s
                raise
            select_s = time.monotonic() - t0
            results = rep.get("results", [])
            win = next((r for r in results if r.get("winner")), None)
            dflt = next((r for r in results if r.get("is_default")), None)
            s["tune"] = {"select_s": select_s, "seconds": rep.get("seconds"), "spread": rep.get("spread"),
                         "from_cache": rep.get("from_cache"), "key": rep.get("key"), "notes": rep.get("notes", []),
                         "n_candidates": len(results),
                         **{f"n_{st}": sum(r["status"] == st for r in results) for st in ("ok", "pruned", "wrong", "failed")},
                         "compile_s_total": sum(r.get("compile_s") or 0 for r in results)}
            if rep.get("from_cache"):
                s["errors"].append("pass 1 answered from the cache: nothing was tuned (stale cache file?)")
            self.add_rows(self.tune_rows(p, rep))
            if win is None:
                raise RuntimeError("the report has no winner")
            if dflt is not None and dflt["status"] in ("ok", "pruned"):
                dkernel = eng.load(p.gt(), dflt["backend"], dflt["id"])
            elif dflt is not None:
                s["errors"].append(f"cuBLASLt's default candidate is {dflt['status']}: {dflt.get('reason', '')}")
            else:
                s["errors"].append("the report has no default candidate")

            x = gpu.make_inputs(p, a.seed + 7919 * p.index)
            fns, meta = {}, {}
            fn, d_pick = gpu.gemmtune_fn(kernel, p, x)
            fns["pick"] = fn
            meta["pick"] = {"backend": win["backend"], "candidate": win["name"], "candidate_id": win["id"],
                            "role": "pick", "winner": True, "default": bool(win.get("is_default")), "out": d_pick,
                            "compile_s": win.get("compile_s")}
            if dkernel is not None:
                fn, d_def = gpu.gemmtune_fn(dkernel, p, x)
                fns["default"] = fn
                meta["default"] = {"backend": dflt["backend"], "candidate": dflt["name"], "candidate_id": dflt["id"],
                                   "role": "default", "winner": bool(dflt.get("winner")), "default": True,
                                   "out": d_def, "compile_s": dflt.get("compile_s")}
            base = gpu.baseline_fn(p, x)
            fns["torch"] = base
            meta["torch"] = {"backend": p.baseline, "candidate": p.baseline, "candidate_id": "", "role": "baseline",
                             "winner": False, "default": False, "out": None, "compile_s": None}
            if p.inductor:
                try:
                    ifn, compile_s = gpu.inductor_fn(p, x)
                    fns["inductor"] = ifn
                    meta["inductor"] = {"backend": "inductor", "candidate": a.inductor_mode, "candidate_id": "",
                                        "role": "baseline", "winner": False, "default": False, "out": None,
                                        "compile_s": compile_s}
                except Exception as e:
                    s["errors"].append(f"inductor: {type(e).__name__}: {str(e)[:300]}")

            # Correctness: every contender vs the fp32 reference; gemmtune's also vs torch's output.
            ref = gpu.reference(p, x)
            try:
                torch_out = fns["torch"]()
            except Exception as e:
                s["errors"].append(f"{p.baseline}: {type(e).__name__}: {str(e)[:300]}")
                del fns["torch"]
                torch_out = None
            checks = {}
            for nm in list(fns):
                m = meta[nm]
                try:
                    if m["out"] is not None:
                        gpu.poison(m["out"])
                    out = torch_out if nm == "torch" else fns[nm]()
                    rel, finite = gpu.check(out, ref)
                    vs = gpu.rel_diff(out, torch_out) if (torch_out is not None and nm != "torch") else None
                    del out
                except Exception as e:
                    s["errors"].append(f"{nm}: {type(e).__name__}: {str(e)[:300]}")
                    del fns[nm]
                    continue
                ok = finite and rel <= a.tol and (vs is None or vs <= a.tol)
                checks[nm] = {"rel_err": rel, "rel_err_vs_torch": vs, "finite": finite, "correct": ok}
                if not ok:
                    msg = (f"MISMATCH {p.label} {nm} ({m['candidate']}): rel_err {rel:.3g} vs fp32 reference, "
                           f"{'-' if vs is None else f'{vs:.3g}'} vs {p.baseline}, finite={finite} (tol {a.tol})")
                    self.mismatches.append(msg)
                    warn(msg)
            del torch_out
            ref = None

            samples = gpu.time_interleaved(fns, a.rounds, a.warmup_ms)
            rows = []
            for nm, smp in samples.items():
                st = summarize(smp)
                m, c = meta[nm], checks.get(nm, {})
                row = p.fields()
                row.update({"backend": m["backend"], "candidate": m["candidate"], "candidate_id": m["candidate_id"],
                            "role": m["role"], "contender": nm, "timing": "side_by_side",
                            "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                            "samples": st["samples"], "tflops": tflops(p.flops, st["median_us"]),
                            "rel_err": c.get("rel_err"), "rel_err_vs_torch": c.get("rel_err_vs_torch"),
                            "compile_s": m["compile_s"], "correct": c.get("correct"), "status": "ok",
                            "reason": "", "winner": m["winner"], "default": m["default"], "spread": st["spread"]})
                rows.append(row)
                s[nm] = {"backend": m["backend"], "candidate": m["candidate"], "candidate_id": m["candidate_id"],
                         "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                         "spread": st["spread"], "tflops": tflops(p.flops, st["median_us"]),
                         "rel_err": c.get("rel_err"), "rel_err_vs_torch": c.get("rel_err_vs_torch"),
                         "correct": c.get("correct"), "compile_s": m["compile_s"]}
            self.add_rows(rows)
            if "pick" not in s:
                raise RuntimeError("gemmtune's pick could not be checked or timed: " + "; ".join(s["errors"]))
            s["pick"]["tune_median_us"] = win.get("median_us")
            if "default" in s:
                s["default"]["tune_median_us"] = dflt.get("median_us")
            s["same_kernel"] = dflt is not None and dflt["id"] == win["id"]
            self.ratios(s)
            self.done.append((p, win["id"], win["backend"], rep))
            if any(not c["correct"] for c in checks.values()):
                s["status"] = "mismatch"
        except Exception as e:
            s["status"] = "error"
            s["errors"].append(f"{type(e).__name__}: {e}")
            warn(f"{p.label}: {type(e).__name__}: {e}")
            if not isinstance(e, self.GemmtuneError):
                traceback.print_exc()
        finally:
            for k in (kernel, dkernel):
                if k is not None:
                    try:
                        k.close()
                    except Exception:
                        pass
            x = ref = None
        return s

    def ratios(self, s):
        pick = s.get("pick") or {}
        pm = pick.get("median_us")

        def sp(other):
            o = s.get(other) or {}
            om = o.get("median_us")
            return om / pm if (pm and om) else None
        s["speedup_vs_default"] = sp("default")
        s["speedup_vs_torch"] = sp("torch")
        s["speedup_vs_inductor"] = sp("inductor")
        d = s.get("default")
        if pm and d and d.get("median_us"):
            noise = max(pick.get("spread") or 0, d.get("spread") or 0)
            s["noise"] = noise
            s["pick_within_noise_of_default"] = pm <= d["median_us"] * (1 + noise)
            s["pick_faster_beyond_noise"] = pm * (1 + noise) < d["median_us"]
        if pm and s.get("roof_us"):
            s["fraction_of_roof"] = s["roof_us"] / pm

    def print_problem(self, i, total, s):
        if s["status"] == "skipped":
            log(f"[{i}/{total}] {s['label']}: skipped ({'; '.join(s['errors'])[:120]})")
            return
        if s["status"] == "error":
            log(f"[{i}/{total}] {s['label']}: ERROR {'; '.join(s['errors'])[:200]}")
            return
        pk = s.get("pick", {})
        line = (f"[{i}/{total}] {s['label']}: pick {fnum(pk.get('median_us'), 1)} us {fnum(pk.get('tflops'), 0)} TF"
                f" | vs default {fratio(s.get('speedup_vs_default'))} vs torch {fratio(s.get('speedup_vs_torch'))}")
        if s.get("inductor"):
            line += f" vs inductor {fratio(s.get('speedup_vs_inductor'))} (compile {fnum(s['inductor'].get('compile_s'), 1)} s)"
        line += f" | tune {fnum(s.get('tune', {}).get('select_s'), 2)} s, {s.get('tune', {}).get('n_candidates')} cands"
        if s["status"] != "ok":
            line += f" [{s['status'].upper()}]"
        log(line)

    # -- stability ------------------------------------------------------------------------------
    def part_stability(self):
        a, gpu = self.args, self.gpu
        deadline = self.budget.end() - a.reserve_s
        eng = self.engine(self.cache2)
        log(f"stability: re-tuning {len(self.done)} problems from an empty cache")
        durations = []
        try:
            for p, id1, backend1, rep1 in self.done:
                est = estimate(durations, 1.0)
                if not self.budget.fits(deadline, est):
                    self.skipped["stability"].append(p.label)
                    continue
                t0 = time.monotonic()
                e = {"label": p.label, **p.fields(), "first_id": id1}
                k1 = k2 = None
                try:
                    gpu.empty_cache()
                    k2, rep2 = eng.select(p.gt())
                    w2 = next((r for r in rep2.get("results", []) if r.get("winner")), None)
                    e["second_id"] = w2["id"] if w2 else None
                    e["first_name"] = next((r["name"] for r in rep1["results"] if r["id"] == id1), "")
                    e["second_name"] = w2["name"] if w2 else ""
                    e["same"] = e["second_id"] == id1
                    e["tune_s"] = rep2.get("seconds")
                    if not e["same"] and w2 is not None:
                        # Where each stood in the other's race (tune medians, same process, minutes apart).
                        m1 = {r["id"]: r.get("median_us") for r in rep1["results"]}
                        m2 = {r["id"]: r.get("median_us") for r in rep2["results"]}
                        e["ratio_in_first_tune"] = (m1.get(w2["id"]) / m1[id1]) if (m1.get(w2["id"]) and m1.get(id1)) else None
                        e["ratio_in_second_tune"] = (m2.get(id1) / m2[w2["id"]]) if (m2.get(id1) and m2.get(w2["id"])) else None
                        k1 = eng.load(p.gt(), backend1, id1)
                        x = gpu.make_inputs(p, a.seed + 7919 * p.index)
                        f1, _ = gpu.gemmtune_fn(k1, p, x)
                        f2, _ = gpu.gemmtune_fn(k2, p, x)
                        smp = gpu.time_interleaved({"first": f1, "second": f2}, a.rounds, a.warmup_ms)
                        s1, s2 = summarize(smp["first"]), summarize(smp["second"])
                        e["first"], e["second"] = s1, s2
                        e["ratio"] = s2["median_us"] / s1["median_us"]  # > 1: the second pick is slower
                        noise = max(s1["spread"] or 0, s2["spread"] or 0)
                        e["noise"] = noise
                        e["within_noise"] = abs(e["ratio"] - 1) <= noise
                        rows = []
                        for tag, st, rid, nm in (("first", s1, id1, e["first_name"]), ("second", s2, w2["id"], e["second_name"])):
                            row = p.fields()
                            row.update({"backend": backend1 if tag == "first" else w2["backend"], "candidate": nm,
                                        "candidate_id": rid, "role": f"stability_{tag}", "timing": "stability_h2h",
                                        "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                                        "samples": st["samples"], "tflops": tflops(p.flops, st["median_us"]),
                                        "rel_err": None, "rel_err_vs_torch": None, "compile_s": None, "correct": None,
                                        "status": "ok", "reason": "", "winner": tag == "first", "default": False,
                                        "spread": st["spread"]})
                            rows.append(row)
                        self.add_rows(rows)
                        x = None
                    e["status"] = "ok"
                except Exception as ex:
                    e["status"] = "error"
                    e["error"] = f"{type(ex).__name__}: {ex}"
                    warn(f"stability {p.label}: {e['error']}")
                finally:
                    for k in (k1, k2):
                        if k is not None:
                            try:
                                k.close()
                            except Exception:
                                pass
                dt = time.monotonic() - t0
                e["wall_s"] = dt
                durations.append(dt)
                self.stability.append(e)
                if e["status"] == "ok" and not e["same"]:
                    log(f"stability {p.label}: different pick, second/first {fratio(e.get('ratio'))} "
                        f"({'within' if e.get('within_noise') else 'OUTSIDE'} noise {fpct(e.get('noise'))})")
        finally:
            eng.close()
        if self.skipped["stability"]:
            warn(f"stability: budget reached, {len(self.skipped['stability'])} problems skipped")

    # -- cache hits -------------------------------------------------------------------------------
    def part_cachehit(self):
        res = {"in_process": {}, "cli": {}}
        # In this process: a fresh engine on pass 1's cache.
        eng = self.engine(self.cache1)
        per = []
        try:
            for p, id1, _, _ in self.done:
                t0 = time.perf_counter()
                try:
                    k, rep = eng.select(p.gt())
                    wall_ms = (time.perf_counter() - t0) * 1e3
                    # select_ms: the engine's own wall time of select() (as the CLI measures it);
                    # python_ms adds ctypes and the report's JSON.
                    ms = rep["seconds"] * 1e3 if rep.get("seconds") is not None else wall_ms
                    per.append({"label": p.label, "select_ms": ms, "python_ms": wall_ms,
                                "from_cache": bool(rep.get("from_cache")), "same_pick": k.id == id1})
                    k.close()
                except Exception as e:
                    per.append({"label": p.label, "error": f"{type(e).__name__}: {e}"})
        finally:
            eng.close()
        res["in_process"] = self.select_stats(per)
        res["in_process"]["problems"] = per

        # In a separate process: the gemmtune CLI.
        res["cli"] = self.cli_cachehit()
        self.cachehit = res
        for where in ("in_process", "cli"):
            r = res[where]
            if r.get("n"):
                log(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache, select median {fnum(r['median_ms'], 3)} ms, "
                    f"max {fnum(r['max_ms'], 3)} ms, {r['n_under_1ms']} under 1 ms")
            elif r.get("error"):
                warn(f"cachehit {where}: {r['error'][:300]}")

    @staticmethod
    def select_stats(per):
        ok = [e for e in per if "select_ms" in e]
        ms = sorted(e["select_ms"] for e in ok)
        out = {"n": len(ok), "n_errors": len(per) - len(ok), "n_from_cache": sum(bool(e.get("from_cache")) for e in ok),
               "n_under_1ms": sum(x < 1.0 for x in ms),
               "n_same_pick": sum(e.get("same_pick") is True for e in ok),
               "n_different_pick": sum(e.get("same_pick") is False for e in ok)}
        if ms:
            out.update({"median_ms": quantile(ms, 0.5), "p90_ms": quantile(ms, 0.9), "max_ms": ms[-1],
                        "max_ms_after_first": max((e["select_ms"] for e in ok[1:]), default=None)})
        return out

    def cli_cachehit(self):
        a = self.args
        cli = Path(a.gemmtune_cli)
        if a.mock and not cli.exists():
            return {"error": "mock run: no CLI"}
        if not cli.exists():
            return {"error": f"{cli}: not found (build the CLI, or pass --gemmtune-cli)"}
        env = os.environ.copy()
        lt = self.gpu.loaded_cublaslt()
        if lt:
            # The cache is keyed by the cuBLASLt version: the CLI must load the same library as this
            # process (torch may have brought its own copy).
            env["LD_PRELOAD"] = lt + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        groups = {}
        for p, id1, _, _ in self.done:
            groups.setdefault((p.dtype, p.scale), []).append((p, id1))
        per, runs = [], []
        for (dtype, scale), items in groups.items():
            shapes = self.tmp / f"cachehit-{dtype}-{scale}.csv"
            with open(shapes, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["model", "layer", "phase", "m", "n", "k"])
                for p, _ in items:
                    w.writerow([p.model, p.layer, p.phase, p.m, p.n, p.k])
            out_json = self.tmp / f"cachehit-{dtype}-{scale}.jsonl"
            cmd = [str(cli), "suite", str(shapes), "--dtype", dtype, "--cache", str(self.cache1), "--json", str(out_json)]
            if scale != "none":
                cmd += ["--scale", scale]
            if a.backend_list:
                cmd += ["--backends", ",".join(a.backend_list)]
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = "timeout", str(e)
            wall = time.monotonic() - t0
            runs.append({"command": " ".join(cmd), "rc": rc, "wall_s": wall, "stderr_tail": (err or "")[-1500:]})
            by_key = {}
            if out_json.exists():
                for line in out_json.read_text().splitlines():
                    try:
                        j = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    key = (j.get("model"), j.get("layer"), j.get("m"), j.get("n"), j.get("k"))
                    e = by_key.setdefault(key, {"select_ms": j.get("select_ms"), "from_cache": j.get("from_cache"),
                                                "status": j.get("status"), "winner_id": None})
                    if j.get("winner"):
                        e["winner_id"] = j.get("candidate_id")
            for p, id1 in items:
                e = by_key.get((p.model, p.layer, p.m, p.n, p.k))
                if e is None or e.get("select_ms") is None:
                    per.append({"label": p.label, "error": "no row in the CLI's output" if e is None else f"status {e.get('status')}"})
                else:
                    per.append({"label": p.label, "select_ms": e["select_ms"], "from_cache": bool(e["from_cache"]),
                                "same_pick": (e["winner_id"] == id1) if e["winner_id"] else None})
        out = self.select_stats(per)
        out.update({"problems": per, "runs": runs, "cublaslt_preload": lt})
        if out["n"] and out["n_from_cache"] < out["n"]:
            out["warning"] = ("some problems were not answered from the cache: environment mismatch between "
                              "this process and the CLI (cuBLASLt, driver or gemmtune version)?")
        if not out["n"]:
            out["error"] = "the CLI answered nothing: " + "; ".join(f"rc={r['rc']}: {r['stderr_tail'][-400:]}" for r in runs)
        return out

    # -- summary and output ---------------------------------------------------------------------
    def summary(self, planned):
        probs = [s for s in self.problems if s.get("status") in ("ok", "mismatch") and s.get("pick")]
        out = {"coverage": {"planned": len(planned), "finished": len(probs),
                            "errors": [f"{s['label']}: {'; '.join(s['errors'])}" for s in self.problems if s["status"] == "error"],
                            "skipped_not_supported": [f"{s['label']}: {'; '.join(s['errors'])}" for s in self.problems if s["status"] == "skipped"],
                            "skipped_for_budget": self.skipped},
               "geomean": {}, "by_dtype_m": {}, "pick_vs_default": {}, "inductor": [], "tune": {},
               "problems": self.problems}

        def agg(group):
            g = {"n": len(group),
                 "speedup_vs_default": geomean([s.get("speedup_vs_default") for s in group]),
                 "speedup_vs_torch": geomean([s.get("speedup_vs_torch") for s in group]),
                 "pick_tflops_geomean": geomean([s["pick"].get("tflops") for s in group]),
                 "fraction_of_roof_geomean": geomean([s.get("fraction_of_roof") for s in group])}
            ind = [s for s in group if s.get("speedup_vs_inductor")]
            if ind:
                g["speedup_vs_inductor"] = geomean([s["speedup_vs_inductor"] for s in ind])
                g["n_inductor"] = len(ind)
            return g
        out["geomean"]["all"] = agg(probs)
        for d in sorted({s["dtype_name"] for s in probs}):
            out["geomean"][d] = agg([s for s in probs if s["dtype_name"] == d])
        for d in sorted({s["dtype_name"] for s in probs}):
            for m in sorted({s["m"] for s in probs if s["dtype_name"] == d}):
                out["by_dtype_m"][f"{d}/m={m}"] = agg([s for s in probs if s["dtype_name"] == d and s["m"] == m])
        with_def = [s for s in probs if s.get("pick_within_noise_of_default") is not None]
        out["pick_vs_default"] = {
            "n": len(with_def),
            "at_least_as_fast_within_noise": sum(s["pick_within_noise_of_default"] for s in with_def),
            "faster_beyond_noise": sum(bool(s.get("pick_faster_beyond_noise")) for s in with_def),
            "same_kernel": sum(bool(s.get("same_kernel")) for s in with_def),
            "slower_beyond_noise": [{"label": s["label"], "speedup_vs_default": s["speedup_vs_default"],
                                     "noise": s["noise"]} for s in with_def if not s["pick_within_noise_of_default"]],
            "rule": "pick_median <= default_median * (1 + max(spread_pick, spread_default)), spread = (p80-p20)/median "
                    "of the side-by-side samples"}
        noise = [s.get("noise") for s in with_def if s.get("noise") is not None]
        if noise:
            out["noise"] = {"median": statistics.median(noise), "max": max(noise)}
        same = [s for s in with_def if s.get("same_kernel")]
        if same:
            out["noise"] = out.get("noise", {})
            out["noise"]["same_kernel_ratio_geomean"] = geomean([s["speedup_vs_default"] for s in same])
        for s in probs:
            if s.get("inductor"):
                out["inductor"].append({"label": s["label"], "m": s["m"], "n": s["n"], "k": s["k"],
                                        "compile_s": s["inductor"].get("compile_s"),
                                        "inductor_tflops": s["inductor"].get("tflops"),
                                        "pick_tflops": s["pick"].get("tflops"),
                                        "torch_tflops": (s.get("torch") or {}).get("tflops"),
                                        "speedup_vs_inductor": s.get("speedup_vs_inductor"),
                                        "gemmtune_tune_s": s.get("tune", {}).get("select_s")})
        tunes = [s["tune"]["select_s"] for s in probs if s.get("tune")]
        if tunes:
            out["tune"] = {"select_s_median": statistics.median(tunes), "select_s_max": max(tunes),
                           "select_s_total": sum(tunes),
                           "candidates_median": statistics.median([s["tune"]["n_candidates"] for s in probs]),
                           "wrong_total": sum(s["tune"]["n_wrong"] for s in probs),
                           "failed_total": sum(s["tune"]["n_failed"] for s in probs)}
        if self.stability:
            ok = [e for e in self.stability if e.get("status") == "ok"]
            diff = [e for e in ok if not e["same"]]
            out["stability"] = {"n": len(ok), "same_pick": len(ok) - len(diff), "different_pick": len(diff),
                                "different_within_noise": sum(bool(e.get("within_noise")) for e in diff),
                                "ratio_geomean_different": geomean([e.get("ratio") for e in diff]),
                                "worst_ratio": max((e.get("ratio") or 0 for e in diff), default=None),
                                "errors": [f"{e['label']}: {e.get('error')}" for e in self.stability if e.get("status") != "ok"],
                                "problems": self.stability}
        if self.cachehit:
            out["cachehit"] = self.cachehit
        out["mismatches"] = self.mismatches
        out["part_seconds"] = self.part_seconds
        out["part_errors"] = self.errors
        return out

    def write(self, planned, final=False):
        doc = {"device": self.env.get("device_str", ""), "date": self.date, "command": self.env.get("command", ""),
               "environment": self.env, "ceilings": self.ceilings, "ceilings_end": self.ceilings_end,
               "rows": self.rows, "summary": self.summary(planned), "final": final}
        jp = self.out / f"{self.stem}.json"
        tmp = jp.with_suffix(".json.tmp")
        tmp.write_text(dump_json(doc))
        tmp.replace(jp)
        (self.out / f"{self.stem}.md").write_text(render_markdown(doc))
        return doc

    def finish(self):
        if self.args.keep_cache and self.cache1.exists():
            try:
                shutil.copy(self.cache1, self.out / f"{self.stem}-cache.sqlite")
            except OSError as e:
                warn(f"keep-cache: {e}")
        shutil.rmtree(self.tmp, ignore_errors=True)


def dump_json(doc):
    """Indented JSON, except that each element of rows[] is one line (diff-friendly, compact)."""
    rows = doc.get("rows", [])
    head = dict(doc)
    head["rows"] = "__ROWS__"
    text = json.dumps(head, indent=1, default=str)
    body = ",\n".join("  " + json.dumps(r, default=str) for r in rows)
    return text.replace('"__ROWS__"', "[\n" + body + "\n ]" if rows else "[]", 1)


# ---------------------------------------------------------------------------------------------
# markdown and the stdout summary

def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(doc):
    s = doc["summary"]
    env = doc["environment"]
    L = [f"# gemmtune on the H200, {doc['date']}", ""]
    L.append(f"Device: {doc['device']}  ")
    v = env.get("versions", {})
    L.append(f"torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), triton {v.get('triton')}, gemmtune "
             f"{env.get('engine', {}).get('version')}, cuBLASLt loaded from `{env.get('cublaslt')}`  ")
    L.append(f"Environment key: `{env.get('engine', {}).get('environment')}`")
    L += ["", "Command:", "", "```", doc["command"], "```", ""]
    if not doc.get("final"):
        L += ["**Partial results: the run did not finish.**", ""]
    cov = s["coverage"]
    L.append(f"Coverage: {cov['finished']} of {cov['planned']} planned suite problems finished; "
             f"{len(cov['skipped_for_budget'].get('suite', []))} skipped for the time budget, "
             f"{len(cov['errors'])} errors, {len(cov['skipped_not_supported'])} not supported. Part times (s): "
             + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items()))
    L.append("")
    L.append("Method: random inputs; 256 MB L2 flush before every timed sample (outside the timed region); warm-up; "
             "CUDA events around one call; contenders interleaved in rounds with a rotating order in one process; "
             "medians with p20/p80; speedup = other's median / gemmtune pick's median (> 1: gemmtune faster); "
             "spread = (p80 - p20) / median. Correctness: relative Frobenius error vs a float32 reference of the same "
             "inputs and vs torch's output.")
    L.append("")
    for title, key in (("Ceilings (start of run)", "ceilings"), ("Ceilings (end of run)", "ceilings_end")):
        c = doc.get(key) or {}
        if c:
            L += [f"## {title}", "", md_table(["what", "median", "best sample"], [
                ["copy, read+write, TB/s", fnum(c.get("copy_TBps"), 2), fnum(c.get("copy_TBps_best"), 2)],
                ["bf16 torch.mm 8192^3, TFLOP/s", fnum(c.get("bf16_tflops"), 0), fnum(c.get("bf16_tflops_best"), 0)],
                ["fp8 torch._scaled_mm 8192^3, TFLOP/s", fnum(c.get("fp8_tflops"), 0), fnum(c.get("fp8_tflops_best"), 0)]]), ""]
            if c.get("gpu_state"):
                L += [f"GPU state: {c['gpu_state']}", ""]
    L += ["## Summary (geomeans over finished problems)", ""]
    rows = []
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        rows.append([name, g["n"], fratio(g.get("speedup_vs_default")), fratio(g.get("speedup_vs_torch")),
                     fratio(g.get("speedup_vs_inductor")), fnum(g.get("pick_tflops_geomean"), 1),
                     fpct(g.get("fraction_of_roof_geomean"))])
    L += [md_table(["group", "n", "pick vs cuBLASLt default", "pick vs torch", "pick vs inductor", "pick TFLOP/s",
                    "of measured roof"], rows), ""]
    pv = s.get("pick_vs_default", {})
    if pv.get("n"):
        L.append(f"gemmtune's pick at least as fast as cuBLASLt's default within noise: **{pv['at_least_as_fast_within_noise']}"
                 f"/{pv['n']}** (faster beyond noise: {pv['faster_beyond_noise']}; same kernel as the default: "
                 f"{pv['same_kernel']}). Rule: {pv['rule']}.")
        if s.get("noise"):
            L.append(f"Noise (max spread of pick and default, per problem): median {fpct(s['noise'].get('median'))}, "
                     f"max {fpct(s['noise'].get('max'))}; where pick = default (same kernel), default/pick geomean "
                     f"{fratio(s['noise'].get('same_kernel_ratio_geomean'))}.")
        if pv.get("slower_beyond_noise"):
            L.append("Slower than the default beyond noise: " + ", ".join(
                f"{e['label']} ({fratio(e['speedup_vs_default'])}, noise {fpct(e['noise'])})" for e in pv["slower_beyond_noise"]))
        L.append("")
    t = s.get("tune") or {}
    if t:
        L += [f"Tuning (gemmtune select from an empty cache): median {fnum(t['select_s_median'], 2)} s, max "
              f"{fnum(t['select_s_max'], 2)} s, total {fnum(t['select_s_total'], 0)} s; median {t['candidates_median']} "
              f"candidates; {t['wrong_total']} wrong and {t['failed_total']} failed candidates in all (never selected).", ""]
    if s.get("inductor"):
        L += ["## TorchInductor max-autotune subset (bf16)", "", md_table(
            ["problem", "m", "n", "k", "compile+autotune s", "inductor TFLOP/s", "gemmtune TFLOP/s", "torch.mm TFLOP/s",
             "pick vs inductor", "gemmtune tune s"],
            [[e["label"], e["m"], e["n"], e["k"], fnum(e["compile_s"], 1), fnum(e["inductor_tflops"], 1),
              fnum(e["pick_tflops"], 1), fnum(e["torch_tflops"], 1), fratio(e["speedup_vs_inductor"]),
              fnum(e["gemmtune_tune_s"], 2)] for e in s["inductor"]]), ""]
        if doc["environment"].get("inductor_init_s") is not None:
            L += [f"(Inductor's one-time start-up, excluded above: {fnum(doc['environment']['inductor_init_s'], 1)} s.)", ""]
    st = s.get("stability")
    if st:
        L += ["## Stability: re-tuned from an empty cache", "",
              f"{st['same_pick']}/{st['n']} same pick; {st['different_pick']} different, of which "
              f"{st['different_within_noise']} within noise when timed head to head (second/first geomean "
              f"{fratio(st['ratio_geomean_different'])}, worst {fratio(st['worst_ratio'])}).", ""]
        diff = [e for e in st["problems"] if e.get("status") == "ok" and not e["same"]]
        if diff:
            L += [md_table(["problem", "first pick", "second pick", "second/first h2h", "noise", "within noise",
                            "ratio in 1st tune", "ratio in 2nd tune"],
                           [[e["label"], e.get("first_name", ""), e.get("second_name", ""), fratio(e.get("ratio")),
                             fpct(e.get("noise")), e.get("within_noise"), fratio(e.get("ratio_in_first_tune")),
                             fratio(e.get("ratio_in_second_tune"))] for e in diff]), ""]
    ch = s.get("cachehit")
    if ch:
        L += ["## Cache hits: select() answered from pass 1's cache", ""]
        rows = []
        for where, label in (("cli", "separate process (gemmtune CLI suite --cache)"), ("in_process", "in process (new engine)")):
            r = ch.get(where) or {}
            rows.append([label, r.get("n", 0), r.get("n_from_cache", "-"), fnum(r.get("median_ms"), 3),
                         fnum(r.get("p90_ms"), 3), fnum(r.get("max_ms"), 3), fnum(r.get("max_ms_after_first"), 3),
                         r.get("n_under_1ms", "-"), r.get("n_same_pick", "-"),
                         (r.get("error") or r.get("warning") or "")[:200]])
        L += [md_table(["where", "n", "from cache", "median ms", "p90 ms", "max ms", "max ms after the first",
                        "under 1 ms", "same pick as pass 1", "note"], rows), ""]
        runs = (ch.get("cli") or {}).get("runs") or []
        for r in runs:
            L.append(f"- `{r['command']}`: rc {r['rc']}, {fnum(r['wall_s'], 1)} s")
        L.append("")
    if s.get("mismatches"):
        L += ["## CORRECTNESS FAILURES", ""] + [f"- {m}" for m in s["mismatches"]] + [""]
    if s.get("part_errors"):
        L += ["## Part errors", ""] + [f"- {m}" for m in s["part_errors"]] + [""]
    if cov["errors"] or cov["skipped_not_supported"]:
        L += ["## Problem errors / not supported", ""] + [f"- {m}" for m in cov["errors"] + cov["skipped_not_supported"]] + [""]
    L += ["## Per problem (side-by-side medians)", ""]
    rows = []
    for p in sorted(s["problems"], key=lambda p: (p["dtype_name"], p["model"], p["layer"], p["m"])):
        if not p.get("pick"):
            continue
        rows.append([p["model"], p["layer"], p["m"], p["n"], p["k"], p["dtype_name"],
                     fnum(p["pick"].get("tflops"), 1), fnum((p.get("default") or {}).get("tflops"), 1),
                     fnum((p.get("torch") or {}).get("tflops"), 1), fnum((p.get("inductor") or {}).get("tflops"), 1),
                     fratio(p.get("speedup_vs_default")), fratio(p.get("speedup_vs_torch")), fpct(p.get("noise")),
                     {True: "yes", False: "NO", None: "-"}[p.get("pick_within_noise_of_default")],
                     "=" if p.get("same_kernel") else "", fpct(p.get("fraction_of_roof")),
                     fnum(p.get("tune", {}).get("select_s"), 2), p.get("tune", {}).get("n_candidates", ""),
                     f"{p['pick'].get('rel_err', 0) or 0:.1e}", p["pick"].get("candidate", "")])
    L += [md_table(["model", "layer", "m", "n", "k", "dtype", "gemmtune TFLOP/s", "cuBLASLt default", "torch",
                    "inductor", "pick vs default", "pick vs torch", "noise", "within noise", "same", "of roof",
                    "tune s", "cands", "rel err", "gemmtune pick"], rows), ""]
    skipped = cov["skipped_for_budget"]
    if skipped.get("suite") or skipped.get("stability"):
        L += ["## Skipped for the time budget", ""]
        for part, labels in skipped.items():
            if labels:
                L.append(f"- {part}: {len(labels)}: " + ", ".join(labels))
        L.append("")
    L += ["JSON: rows[] (one per problem and candidate/baseline; `timing` = tune | side_by_side | stability_h2h) "
          "and summary{} as documented in bench/README.md.", ""]
    return "\n".join(L)


def print_summary(doc):
    s = doc["summary"]
    P = print
    P("")
    P("=" * 100)
    P(f"gemmtune H200 bench {doc['date']} on {doc['device']}")
    P(f"command: {doc['command']}")
    c = doc.get("ceilings") or {}
    ce = doc.get("ceilings_end") or {}
    if c:
        P(f"ceilings: copy {fnum(c.get('copy_TBps'), 2)} TB/s, bf16 {fnum(c.get('bf16_tflops'), 0)}, fp8 "
          f"{fnum(c.get('fp8_tflops'), 0)} TFLOP/s" + (f"  (end: {fnum(ce.get('copy_TBps'), 2)}, "
                                                       f"{fnum(ce.get('bf16_tflops'), 0)}, {fnum(ce.get('fp8_tflops'), 0)})" if ce else ""))
    cov = s["coverage"]
    P(f"coverage: {cov['finished']}/{cov['planned']} suite problems; skipped for budget: suite "
      f"{len(cov['skipped_for_budget'].get('suite', []))}, stability {len(cov['skipped_for_budget'].get('stability', []))}; "
      f"errors {len(cov['errors'])}; not supported {len(cov['skipped_not_supported'])}")
    P("")
    P(f"{'group':<22}{'n':>4}{'vs default':>12}{'vs torch':>10}{'vs induct':>11}{'pick TF':>9}{'of roof':>9}")
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        P(f"{name:<22}{g['n']:>4}{fratio(g.get('speedup_vs_default')):>12}{fratio(g.get('speedup_vs_torch')):>10}"
          f"{fratio(g.get('speedup_vs_inductor')):>11}{fnum(g.get('pick_tflops_geomean'), 1):>9}"
          f"{fpct(g.get('fraction_of_roof_geomean')):>9}")
    pv = s.get("pick_vs_default") or {}
    if pv.get("n"):
        P(f"pick >= default within noise: {pv['at_least_as_fast_within_noise']}/{pv['n']} (faster beyond noise "
          f"{pv['faster_beyond_noise']}, same kernel {pv['same_kernel']}); noise median "
          f"{fpct((s.get('noise') or {}).get('median'))} max {fpct((s.get('noise') or {}).get('max'))}")
        for e in pv.get("slower_beyond_noise", [])[:12]:
            P(f"  slower: {e['label']}: {fratio(e['speedup_vs_default'])} (noise {fpct(e['noise'])})")
    probs = [p for p in s["problems"] if p.get("speedup_vs_default")]
    if probs:
        worst = sorted(probs, key=lambda p: p["speedup_vs_default"])[:6]
        best = sorted(probs, key=lambda p: -p["speedup_vs_default"])[:6]
        P("worst vs default: " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in worst))
        P("best vs default:  " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in best))
    t = s.get("tune") or {}
    if t:
        P(f"tune: median {fnum(t['select_s_median'], 2)} s, max {fnum(t['select_s_max'], 2)} s, total "
          f"{fnum(t['select_s_total'], 0)} s; {t['candidates_median']} candidates median; wrong {t['wrong_total']}, "
          f"failed {t['failed_total']}")
    for e in s.get("inductor", []):
        P(f"inductor {e['label']}: compile {fnum(e['compile_s'], 1)} s, {fnum(e['inductor_tflops'], 1)} TF vs gemmtune "
          f"{fnum(e['pick_tflops'], 1)} TF (pick/inductor {fratio(e['speedup_vs_inductor'])}), torch {fnum(e['torch_tflops'], 1)}")
    st = s.get("stability")
    if st:
        P(f"stability: {st['same_pick']}/{st['n']} same pick; {st['different_pick']} different "
          f"({st['different_within_noise']} within noise; second/first geomean {fratio(st['ratio_geomean_different'])}, "
          f"worst {fratio(st['worst_ratio'])}); errors {len(st['errors'])}")
    ch = s.get("cachehit")
    if ch:
        for where in ("cli", "in_process"):
            r = ch.get(where) or {}
            if r.get("n"):
                P(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache; select median {fnum(r.get('median_ms'), 3)} ms, "
                  f"p90 {fnum(r.get('p90_ms'), 3)}, max {fnum(r.get('max_ms'), 3)} (after first "
                  f"{fnum(r.get('max_ms_after_first'), 3)}); {r['n_under_1ms']}/{r['n']} under 1 ms"
                  + (f"; {r['warning']}" if r.get("warning") else ""))
            else:
                P(f"cachehit {where}: {(r.get('error') or 'nothing')[:400]}")
    P("part seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items())
      + f"; total {time.monotonic() - T_START:.0f} s")
    for e in s.get("part_errors", []):
        P(f"PART ERROR: {e[:300]}")
    for e in cov["errors"][:10]:
        P(f"problem error: {e[:300]}")
    if s.get("mismatches"):
        P(f"CORRECTNESS FAILURES: {len(s['mismatches'])}")
        for m in s["mismatches"][:10]:
            P(f"  {m}")
    else:
        P("correctness: every checked output within tolerance, no NaN")


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    run = Run(args)
    run.env["command"] = "python3 bench/h200.py " + " ".join(argv if argv is not None else sys.argv[1:])
    run.env["argv"] = sys.argv
    run.env["versions"] = run.gpu.versions()
    run.env["cublaslt"] = run.gpu.loaded_cublaslt()
    run.env["gpu_state_start"] = gpu_state() if not args.mock else None
    problems = load_problems(args) if "suite" in args.parts else []
    log(f"h200.py: parts {','.join(args.parts)}; {len(problems)} suite problems; budget "
        f"{'unlimited' if args.budget_s <= 0 else f'{args.budget_s:.0f} s'}; output {run.out}/{run.stem}.*")

    def part(name, fn, *a):
        t0 = time.monotonic()
        try:
            fn(*a)
        except Exception as e:
            run.errors.append(f"{name}: {type(e).__name__}: {e}")
            warn(f"part {name} failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        run.part_seconds[name] = time.monotonic() - t0
        log(f"part {name}: {run.part_seconds[name]:.1f} s")
        run.env["device_str"] = (run.env.get("engine", {}).get("device", {}) or {}).get("str") or run.env["versions"].get("device_name")
        try:
            run.write(problems)
        except Exception as e:
            warn(f"writing results failed: {e}")
            traceback.print_exc()

    try:
        if "ceilings" in args.parts:
            part("ceilings", run.part_ceilings)
        if "suite" in args.parts:
            part("suite", run.part_suite, problems)
            if getattr(run.gpu, "inductor_init_s", None) is not None:
                run.env["inductor_init_s"] = run.gpu.inductor_init_s
        if "stability" in args.parts:
            part("stability", run.part_stability)
        if "cachehit" in args.parts:
            part("cachehit", run.part_cachehit)
        if "ceilings" in args.parts:
            part("ceilings_end", run.part_ceilings, True)
        run.env["gpu_state_end"] = gpu_state() if not args.mock else None
    finally:
        run.env["cublaslt"] = run.gpu.loaded_cublaslt() or run.env.get("cublaslt")
        doc = run.write(problems, final=True)
        run.finish()
        try:
            run.partial.unlink()
        except OSError:
            pass
    print_summary(doc)
    print(f"wrote {run.out / (run.stem + '.json')} and .md")
    if doc["summary"]["mismatches"]:
        return 1
    if run.errors:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
