#!/usr/bin/env python3
"""gemmtune softmax benchmark on the H200 (issue 6): one process, every contender interleaved.

For every row of the suite (bench/suites/softmax.csv: rows,cols; 2^29 elements each) and every
dtype (--dtypes, default bf16,fp16,fp32): gemmtune tunes the problem through the C API
(libgemmtune_c.so: gt_softmax_select, a fresh cache in $OUT unless --cache), then its pick,
torch.softmax and a plain one-row-per-program Triton kernel are timed in the same rounds, and the
copy bandwidth (1 GiB device-to-device) is measured in the same run. Results: TB/s = (bytes of x
read + bytes of y written) / median time, % of that copy bandwidth, speedup vs torch.

Method (as bench/h200.py): random inputs in [-8, 8) (never zeros); before every timed sample a
256 MiB buffer is written (L2 flush) and a ~50 us GPU spin is queued, both outside the timed
region; CUDA events around one call; a time-based warm-up; medians with p20 and p80 over
--rounds samples; all contenders of a problem in the same rounds with a rotating order. Every
output is checked against torch.softmax(x.float() * scale) in fp32: no NaN (the inputs are
finite), relative Frobenius error and the worst element within the output dtype's bound;
gemmtune's and Triton's outputs are filled with NaN before the check. A failed check is printed
loudly and makes the script exit 1 after everything is written.

Plain Triton (the baseline): one program per row; the row whole in registers (BLOCK = next
power of two >= cols, num_warps by BLOCK as in Triton's fused-softmax tutorial) up to 32K
columns, beyond that the same program loops over 4K chunks (max, sum, write: three reads).

Acceptance (bf16, every row): gemmtune >= 90% of the copy bandwidth and >= 1.3x torch.softmax:
summary.criteria. Writes $OUT/<date>-h200-softmax[-tag].json and .md.

    python3 bench/softmax.py --out /tmp/sm                  # all rows, bf16,fp16,fp32
    python3 bench/softmax.py --dtypes bf16 --limit 2        # smoke
    python3 bench/softmax.py --mock --out /tmp/sm-mock      # CPU self-test of this script
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from benchlib import geomean, summarize, time_interleaved  # noqa: E402

T_START = time.monotonic()
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# Elementwise bound |y - ref| <= rel * |ref| + abs, by output dtype (ref: torch's fp32 softmax).
BOUNDS = {"bf16": (2.0 ** -7, 2.0 ** -30), "fp16": (2.0 ** -10, 2.0 ** -24), "fp32": (2e-5, 1e-30)}
FROB_TOL = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}


def log(msg):
    print(f"[{time.monotonic() - T_START:6.1f}s] {msg}", flush=True)


def warn(msg):
    print(f"[{time.monotonic() - T_START:6.1f}s] !!! {msg}", flush=True)
    print(f"softmax.py: {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=str(REPO / "bench/suites/softmax.csv"), help="CSV rows,cols (default %(default)s)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated: bf16, fp16, fp32 (x and y)")
    ap.add_argument("--scale", type=float, default=1.0, help="softmax(scale * x); torch gets x * scale first when != 1")
    ap.add_argument("--limit", type=int, default=0, help="at most N suite rows (0 = all)")
    ap.add_argument("--rounds", type=int, default=20, help="timed rounds per problem (default %(default)s)")
    ap.add_argument("--warmup-ms", type=float, default=200.0, help="warm-up per problem (default %(default)s)")
    ap.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer, MiB (default %(default)s)")
    ap.add_argument("--backends", default="", help="gemmtune softmax backends (default: all: native,triton,cutedsl)")
    ap.add_argument("--cache", default="", help="gemmtune tuning cache (default: a fresh $OUT/softmax-cache.sqlite)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting problems after this many seconds (0 = none)")
    ap.add_argument("--tag", default="", help="suffix of the output files' names")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="output folder (default $OUT, else ./bench-out)")
    ap.add_argument("--mock", action="store_true", help="CPU self-test: fake GPU, fake engine, fake timings")
    args = ap.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in args.dtypes:
        if d not in DTYPE_BYTES:
            ap.error(f"--dtypes: unknown dtype {d!r} (bf16, fp16, fp32)")
    if not args.out:
        args.out = str(Path.cwd() / "bench-out")
    return args


def read_suite(path):
    rows = []
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    head = [h.strip().lower() for h in lines[0].split(",")]
    if "rows" not in head or "cols" not in head:
        raise SystemExit(f"{path}: header must name rows,cols")
    ri, ci = head.index("rows"), head.index("cols")
    for ln in lines[1:]:
        f = ln.split(",")
        rows.append((int(f[ri]), int(f[ci])))
    return rows


# ---------------------------------------------------------------------------------------------
# gemmtune through the C API


class Gemmtune:
    def __init__(self, cache_path, backends):
        sys.path.insert(0, str(REPO / "python"))
        from gemmtune import _capi
        self.lib = lib = _capi.lib()
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.gt_last_error.restype = cp
        lib.gt_version.restype = cp
        lib.gt_free.argtypes = [vp]
        lib.gt_engine_create.argtypes = [cp, ctypes.POINTER(vp)]
        lib.gt_engine_info.argtypes = [vp, ctypes.POINTER(vp)]
        lib.gt_softmax_select.argtypes = [vp, cp, ctypes.c_int, ctypes.POINTER(vp), ctypes.POINTER(vp)]
        lib.gt_softmax_run.argtypes = [vp, vp, vp, vp]
        lib.gt_softmax_destroy.argtypes = [vp]
        opts = {"cache_path": cache_path}
        if backends:
            opts["backends"] = backends
        self.engine = vp()
        self._check(lib.gt_engine_create(json.dumps(opts).encode(), ctypes.byref(self.engine)), "gt_engine_create")
        self.library = _capi.library_path() if hasattr(_capi, "library_path") else ""

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.gt_last_error().decode()} (status {status})")

    def _take(self, p):
        text = ctypes.cast(p, ctypes.c_char_p).value.decode()
        self.lib.gt_free(p)
        return text

    def info(self):
        p = ctypes.c_void_p()
        self._check(self.lib.gt_engine_info(self.engine, ctypes.byref(p)), "gt_engine_info")
        return json.loads(self._take(p))

    def select(self, rows, cols, dtype, scale):
        k, rep = ctypes.c_void_p(), ctypes.c_void_p()
        prob = {"rows": rows, "cols": cols, "dtype": dtype, "scale": scale}
        self._check(self.lib.gt_softmax_select(self.engine, json.dumps(prob).encode(), 0, ctypes.byref(k),
                                               ctypes.byref(rep)), "gt_softmax_select")
        return k, json.loads(self._take(rep))

    def run(self, k, x_ptr, y_ptr, stream):
        self._check(self.lib.gt_softmax_run(k, ctypes.c_void_p(x_ptr), ctypes.c_void_p(y_ptr), ctypes.c_void_p(stream)),
                    "gt_softmax_run")

    def destroy(self, k):
        self.lib.gt_softmax_destroy(k)


# ---------------------------------------------------------------------------------------------
# the plain Triton baseline


def make_plain_triton():
    import triton
    import triton.language as tl

    @triton.jit
    def plain_softmax_row(x, y, cols, ld, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(x + row * ld + offs, mask=mask, other=0.0).to(tl.float32)
        v = tl.where(mask, v * scale, float("-inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        out = e / tl.sum(e, axis=0)
        tl.store(y + row * ld + offs, out.to(y.dtype.element_ty), mask=mask)

    @triton.jit
    def plain_softmax_loop(x, y, cols, ld, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        xr = x + row * ld
        yr = y + row * ld
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            m = tl.maximum(m, tl.where(mask, v * scale, float("-inf")))
        big = tl.max(m, axis=0)
        s = tl.zeros([BLOCK], tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            s += tl.where(mask, tl.exp(v * scale - big), 0.0)
        inv = 1.0 / tl.sum(s, axis=0)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(yr + offs, (tl.exp(v * scale - big) * inv).to(yr.dtype.element_ty), mask=mask)

    def launch(x, y, scale):
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        if block <= 32768:
            warps = 4 if block < 2048 else 8 if block < 4096 else 16 if block < 16384 else 32
            plain_softmax_row[(rows,)](x, y, cols, x.stride(0), scale, BLOCK=block, num_warps=warps)
        else:
            plain_softmax_loop[(rows,)](x, y, cols, x.stride(0), scale, BLOCK=4096, num_warps=8)

    def variant(cols):
        block = triton.next_power_of_2(cols)
        return f"row in registers, BLOCK {block}" if block <= 32768 else "3-pass loop, BLOCK 4096, 8 warps"

    return launch, variant


# ---------------------------------------------------------------------------------------------
# the GPU


class TorchGpu:
    def __init__(self, args):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit("softmax.py: torch sees no CUDA device")
        self.dev = torch.device("cuda")
        self.flush_buf = torch.empty(args.flush_mb << 20, dtype=torch.int8, device=self.dev)
        self.flush_count = 0
        self.stream = torch.cuda.current_stream().cuda_stream
        try:
            torch.cuda._sleep(10)
            self.can_sleep = True
        except Exception:  # noqa: BLE001
            self.can_sleep = False
        self.sleep_cycles = 100_000  # ~50 us at ~2 GHz
        self.dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
        self.plain, self.plain_variant = make_plain_triton()

    def versions(self):
        t = self.torch
        v = {"torch": t.__version__, "torch_cuda": t.version.cuda, "device_name": t.cuda.get_device_name(0),
             "capability": ".".join(map(str, t.cuda.get_device_capability(0))), "python": platform.python_version()}
        try:
            import triton
            v["triton"] = triton.__version__
        except Exception as e:  # noqa: BLE001
            v["triton"] = f"unavailable: {e}"
        return v

    def sync(self):
        self.torch.cuda.synchronize()

    def _flush(self):
        self.flush_count += 1
        self.flush_buf.fill_(self.flush_count & 0x7F)
        if self.can_sleep:
            self.torch.cuda._sleep(self.sleep_cycles)

    def time_interleaved(self, fns, rounds, warmup_ms):
        """{name: [us, ...]}: benchlib.time_interleaved, L2 flush + GPU spin before every call
        (warm-up included)."""
        return time_interleaved(self.torch, fns, rounds, warmup_ms, self._flush, warm_up_with_it=True)[0]

    def copy_bandwidth(self, rounds):
        t = self.torch
        src = t.randint(-128, 127, (1 << 30,), dtype=t.int8, device=self.dev)
        dst = t.empty_like(src)
        st = summarize(self.time_interleaved({"copy": lambda: dst.copy_(src)}, rounds, 300)["copy"])
        del src, dst
        return {"copy_TBps": 2.0 * (1 << 30) / st["median_us"] * 1e-6,
                "copy_TBps_best": 2.0 * (1 << 30) / st["min_us"] * 1e-6, "spread": st["spread"],
                "what": "1 GiB device-to-device copy_ (bytes read + written), median of "
                        f"{rounds} samples, same flush + spin method"}

    def problem(self, rows, cols, dtype, scale, seed):
        """x random in [-8, 8), outputs of each contender, the fp32 reference."""
        t = self.torch
        g = t.Generator(device=self.dev)
        g.manual_seed(seed)
        x = (t.rand((rows, cols), generator=g, device=self.dev, dtype=t.float32) * 16 - 8).to(self.dtypes[dtype])
        return x

    def check(self, y, x, scale, dtype):
        """{ok, nan, rel_frob, worst_ratio}: y against torch.softmax(x.float() * scale) in fp32."""
        t = self.torch
        ref = t.softmax(x.float() * scale, dim=-1)
        yf = y.float()
        nan = int(t.isnan(yf).sum().item())
        diff = (yf - ref).abs_()
        rel, ab = BOUNDS[dtype]
        ratio = diff.div_(ref.abs().mul_(rel).add_(ab))
        worst = float(t.nan_to_num(ratio, nan=float("inf")).max().item())
        del ratio
        frob = float((t.linalg.vector_norm(yf - ref) / t.linalg.vector_norm(ref)).item())
        del ref, yf
        ok = nan == 0 and math.isfinite(frob) and frob <= FROB_TOL[dtype] and worst <= 1.0
        return {"ok": ok, "nan": nan, "rel_frob": frob, "worst_ratio": worst}


class MockGpu:
    """Fake device for --mock: outputs are not computed; times follow bytes / bandwidth."""

    def __init__(self, args):
        self.stream = 0
        self.plain_variant = lambda cols: "mock"

    def versions(self):
        return {"torch": "mock", "triton": "mock", "device_name": "mock H200", "python": platform.python_version()}

    def sync(self):
        pass

    def copy_bandwidth(self, rounds):
        return {"copy_TBps": 4.2, "copy_TBps_best": 4.3, "spread": 0.01, "what": "mock"}

    def time_interleaved(self, fns, rounds, warmup_ms):
        import random
        rnd = random.Random(len(fns))
        return {nm: [f() * (1 + 0.02 * rnd.random()) for _ in range(rounds)] for nm, f in fns.items()}

    def check(self, y, x, scale, dtype):
        return {"ok": True, "nan": 0, "rel_frob": 1e-3, "worst_ratio": 0.5}


class MockEngine:
    library = "mock"

    def info(self):
        return {"version": "mock", "environment": "mock", "backends": []}

    def select(self, rows, cols, dtype, scale):
        b = rows * cols * 2 * DTYPE_BYTES[dtype]
        res = [{"backend": "native", "id": "cluster_v8_e32_t512_c8", "name": "cluster_v8_e32_t512_c8", "status": "ok",
                "median_us": b / 3.9e6, "p20_us": 0, "p80_us": 0, "winner": True, "TBps": 3.9, "compile_s": 0},
               {"backend": "triton", "id": "online_b4096_w16", "name": "online_b4096_w16", "status": "ok",
                "median_us": b / 3.0e6, "winner": False, "TBps": 3.0, "compile_s": 0.4}]
        return object(), {"op": "softmax", "from_cache": False, "seconds": 1.5, "results": res, "notes": []}

    def destroy(self, k):
        pass


# ---------------------------------------------------------------------------------------------


def run(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    stem = f"{date}-h200-softmax" + (f"-{args.tag}" if args.tag else "")
    suite = read_suite(args.suite)
    if args.limit:
        suite = suite[:args.limit]
    gpu = MockGpu(args) if args.mock else TorchGpu(args)
    cache = args.cache or str(out / "softmax-cache.sqlite")
    if not args.cache and os.path.exists(cache):
        os.remove(cache)
    engine = MockEngine() if args.mock else Gemmtune(cache, [b for b in args.backends.split(",") if b])
    info = engine.info()
    log(f"device: {gpu.versions().get('device_name')}; gemmtune {info.get('version')}; cache {cache}")
    ceil = gpu.copy_bandwidth(max(args.rounds, 20))
    copy = ceil["copy_TBps"]
    log(f"copy bandwidth: {copy:.3f} TB/s (best {ceil['copy_TBps_best']:.3f})")

    rows_out, failures, skipped = [], [], []
    seed = 1
    for dtype in args.dtypes:
        for (nrows, ncols) in suite:
            if args.budget_s and time.monotonic() - T_START > args.budget_s:
                skipped.append(f"{nrows}x{ncols} {dtype}")
                continue
            seed += 1
            label = f"{nrows}x{ncols} {dtype}"
            nbytes = float(nrows) * ncols * 2 * DTYPE_BYTES[dtype]
            row = {"op": "softmax", "rows": nrows, "cols": ncols, "dtype": dtype, "scale": args.scale, "bytes": nbytes}
            try:
                t0 = time.monotonic()
                k, rep = engine.select(nrows, ncols, dtype, args.scale)
                row["tune_s"] = time.monotonic() - t0
                win = next((r for r in rep["results"] if r.get("winner")), None)
                row["pick"] = {"backend": win["backend"], "id": win["id"], "tune_median_us": win["median_us"]} if win else None
                row["candidates"] = len(rep["results"])
                row["wrong"] = [f"{r['backend']} {r['name']}: {r.get('reason', '')}" for r in rep["results"]
                                if r["status"] == "wrong"]
                row["failed"] = [f"{r['backend']} {r['name']}: {r.get('reason', '')}" for r in rep["results"]
                                 if r["status"] == "failed"]
                row["best_by_backend"] = {}
                for r in rep["results"]:
                    if r["status"] == "ok" and r["median_us"] > 0:
                        b = row["best_by_backend"].get(r["backend"])
                        if b is None or r["median_us"] < b["median_us"]:
                            row["best_by_backend"][r["backend"]] = {"id": r["id"], "median_us": r["median_us"],
                                                                     "TBps": r.get("TBps")}
                if row["wrong"]:
                    failures.append(f"{label}: gemmtune had wrong candidates: {row['wrong'][:3]}")
                if args.mock:
                    fns = {"gemmtune": lambda: nbytes / 3.9e6, "torch": lambda: nbytes / 2.9e6,
                           "triton_plain": lambda: nbytes / 3.2e6}
                    checks = {nm: gpu.check(None, None, args.scale, dtype) for nm in fns}
                else:
                    t = gpu.torch
                    x = gpu.problem(nrows, ncols, dtype, args.scale, seed)
                    y_gt = t.full_like(x, float("nan"))
                    y_tr = t.full_like(x, float("nan"))
                    stream = gpu.stream
                    scale = args.scale
                    fns = {"gemmtune": lambda: engine.run(k, x.data_ptr(), y_gt.data_ptr(), stream),
                           "torch": (lambda: t.softmax(x, dim=-1)) if scale == 1.0 else (lambda: t.softmax(x * scale, dim=-1)),
                           "triton_plain": lambda: gpu.plain(x, y_tr, scale)}
                    # Outputs checked once, before timing (poisoned buffers for ours).
                    fns["gemmtune"]()
                    fns["triton_plain"]()
                    y_torch = fns["torch"]()
                    gpu.sync()
                    checks = {"gemmtune": gpu.check(y_gt, x, scale, dtype), "torch": gpu.check(y_torch, x, scale, dtype),
                              "triton_plain": gpu.check(y_tr, x, scale, dtype)}
                    del y_torch
                samples = gpu.time_interleaved(fns, args.rounds, args.warmup_ms)
                row["contenders"] = {}
                for nm, v in samples.items():
                    st = summarize(v)
                    tb = nbytes / st["median_us"] * 1e-6 if st["median_us"] else 0.0
                    row["contenders"][nm] = {**st, "TBps": tb, "pct_copy": 100.0 * tb / copy, "check": checks[nm]}
                    if not checks[nm]["ok"]:
                        failures.append(f"{label}: {nm} output check failed: {checks[nm]}")
                row["contenders"]["triton_plain"]["variant"] = gpu.plain_variant(ncols)
                g, tr = row["contenders"]["gemmtune"], row["contenders"]["torch"]
                row["speedup_vs_torch"] = tr["median_us"] / g["median_us"] if g["median_us"] else None
                row["speedup_vs_triton_plain"] = row["contenders"]["triton_plain"]["median_us"] / g["median_us"]
                row["meets"] = {"pct_copy_ge_90": g["pct_copy"] >= 90.0, "vs_torch_ge_1_3": (row["speedup_vs_torch"] or 0) >= 1.3}
                log(f"{label}: gemmtune {g['TBps']:.3f} TB/s ({g['pct_copy']:.1f}% copy; "
                    f"{row['pick']['backend'] if row['pick'] else '?'} {row['pick']['id'] if row['pick'] else ''}), "
                    f"torch {tr['TBps']:.3f}, triton plain {row['contenders']['triton_plain']['TBps']:.3f}; "
                    f"x{row['speedup_vs_torch']:.2f} vs torch; tune {row['tune_s']:.1f} s")
                engine.destroy(k)
                if not args.mock:
                    del x, y_gt, y_tr
                    t.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"
                failures.append(f"{label}: {row['error']}")
                warn(f"{label}: {row['error']}")
            rows_out.append(row)

    summary = {"copy": ceil, "failures": failures, "skipped": skipped, "by_dtype": {}}
    for dtype in args.dtypes:
        rs = [r for r in rows_out if r["dtype"] == dtype and "contenders" in r]
        if not rs:
            continue
        summary["by_dtype"][dtype] = {
            "rows": len(rs),
            "min_pct_copy": min(r["contenders"]["gemmtune"]["pct_copy"] for r in rs),
            "min_speedup_vs_torch": min(r["speedup_vs_torch"] for r in rs),
            "geomean_speedup_vs_torch": geomean([r["speedup_vs_torch"] for r in rs]),
            "geomean_speedup_vs_triton_plain": geomean([r["speedup_vs_triton_plain"] for r in rs]),
            "all_pct_copy_ge_90": all(r["meets"]["pct_copy_ge_90"] for r in rs),
            "all_vs_torch_ge_1_3": all(r["meets"]["vs_torch_ge_1_3"] for r in rs),
        }
    bf = summary["by_dtype"].get("bf16")
    summary["criteria"] = {
        "bf16_every_row_ge_90pct_copy": bool(bf and bf["all_pct_copy_ge_90"] and bf["rows"] == len(suite)),
        "bf16_every_row_ge_1_3x_torch": bool(bf and bf["all_vs_torch_ge_1_3"] and bf["rows"] == len(suite)),
        "outputs_correct": not any("check failed" in f or "wrong" in f for f in failures),
    }
    doc = {"date": date, "what": "softmax: gemmtune's pick vs torch.softmax vs plain Triton, interleaved",
           "command": " ".join([sys.executable] + sys.argv), "device": gpu.versions().get("device_name"),
           "environment": {"versions": gpu.versions(), "gemmtune": info, "cache": cache},
           "method": {"rounds": args.rounds, "warmup_ms": args.warmup_ms, "flush_mb": args.flush_mb,
                      "spin": "torch.cuda._sleep(100000) (~50 us) after each flush",
                      "bounds": {k: {"rel": v[0], "abs": v[1], "frob": FROB_TOL[k]} for k, v in BOUNDS.items()}},
           "summary": summary, "rows": rows_out}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / f"{stem}.md").write_text(render_markdown(doc))
    log(f"wrote {out / (stem + '.json')} and .md")
    for f in failures:
        warn(f)
    return 1 if failures else 0


def render_markdown(doc):
    s = doc["summary"]
    v = doc["environment"]["versions"]
    L = [f"# gemmtune softmax on the H200, {doc['date']}", "",
         f"Device: {doc['device']}; torch {v.get('torch')}, triton {v.get('triton')}; "
         f"gemmtune {doc['environment']['gemmtune'].get('version')}  ",
         f"Command: `{doc['command']}`  ",
         f"Copy bandwidth measured in this run: **{s['copy']['copy_TBps']:.3f} TB/s** ({s['copy']['what']})", "",
         "TB/s = (bytes of x read + bytes of y written) / median time; % copy = of the copy bandwidth above.", "",
         "| rows x cols | dtype | gemmtune pick | gemmtune TB/s | % copy | torch TB/s | plain Triton TB/s | vs torch | vs plain | tune s | checks |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        if "contenders" not in r:
            L.append(f"| {r['rows']}x{r['cols']} | {r['dtype']} | error: {r.get('error', '?')} | | | | | | | | |")
            continue
        c = r["contenders"]
        ok = all(c[n]["check"]["ok"] for n in c)
        pick = f"{r['pick']['backend']} {r['pick']['id']}" if r.get("pick") else "-"
        L.append(f"| {r['rows']}x{r['cols']} | {r['dtype']} | {pick} | {c['gemmtune']['TBps']:.3f} | "
                 f"{c['gemmtune']['pct_copy']:.1f} | {c['torch']['TBps']:.3f} | {c['triton_plain']['TBps']:.3f} | "
                 f"{r['speedup_vs_torch']:.2f} | {r['speedup_vs_triton_plain']:.2f} | {r.get('tune_s', 0):.1f} | "
                 f"{'ok' if ok else 'FAIL'} |")
    L += ["", "## Summary", ""]
    for d, b in s["by_dtype"].items():
        L.append(f"- {d}: min {b['min_pct_copy']:.1f}% of copy, min x{b['min_speedup_vs_torch']:.2f} vs torch "
                 f"(geomean x{b['geomean_speedup_vs_torch']:.2f}; vs plain Triton x{b['geomean_speedup_vs_triton_plain']:.2f})")
    L.append("")
    for k, val in s["criteria"].items():
        L.append(f"- {k}: {'**met**' if val else '**not met**'}")
    if s["failures"]:
        L += ["", "## Failures", ""] + [f"- {f}" for f in s["failures"]]
    if s["skipped"]:
        L += ["", f"Skipped (budget): {', '.join(s['skipped'])}"]
    return "\n".join(L) + "\n"


def main(argv=None):
    args = parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
