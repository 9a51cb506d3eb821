#!/usr/bin/env python3
"""Probe: torch's cuBLAS(Lt) call against every gemmtune cublaslt candidate (docs/cublaslt.md).

    GEMMTUNE_LIB=build python3 bench/probe-cublaslt-torch.py --out DIR

Problems: nn.Linear (D[m, n] = X[m, k] @ W[n, k]^T), fp8 (e4m3, tensorwise scales, bf16 out,
torch._scaled_mm) and bf16 (torch.mm), m in --ms x (n, k) in --shapes. For each problem:
  1. gemmtune's cublaslt candidates: Engine(backends=["cublaslt"]).select(force=True) (no cache),
     so the report lists every candidate with is_default and the pick; each is loaded by id;
  2. correctness of every candidate against torch's output (rel. Frobenius error; > --tol fails);
  3. timing, interleaved in rounds (each round one sample of every contender, rotated order), from
     a cold L2: before every sample a 256 MiB fill (flush) and a GPU spin, both outside the timed
     region; CUDA events around one call; medians, p20, p80;
  4. torch.profiler once: torch's call and each candidate once, separated by marker kernels
     (torch.cuda._sleep), to print the kernel torch launched beside the kernel(s) of each candidate.
Writes DIR/probe-cublaslt-torch.json (everything) and DIR/probe-cublaslt-torch.md (per-candidate
tables); prints the per-problem details, then the summary table LAST. Exit 1 if a candidate is
wrong or the baseline (is_default) is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

SHAPES = [(4096, 4096), (6144, 4096), (4096, 14336), (8192, 8192), (1280, 8192)]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--dtypes", default="fp8,bf16", help="comma-separated: fp8, bf16")
    ap.add_argument("--ms", default="64,128", help="comma-separated m values")
    ap.add_argument("--shapes", default=",".join(f"{n}x{k}" for n, k in SHAPES), help="comma-separated NxK")
    ap.add_argument("--rounds", type=int, default=40, help="timed rounds per problem")
    ap.add_argument("--warmup-ms", type=float, default=200.0)
    ap.add_argument("--spin-us", type=float, default=30.0, help="GPU spin before each sample (covers the launch)")
    ap.add_argument("--tol", type=float, default=2e-2, help="max rel. error against torch's output")
    ap.add_argument("--max-candidates", type=int, default=0, help="time at most this many candidates (0: all)")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--seed", type=int, default=14)
    return ap.parse_args(argv)


def quantile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    i = q * (len(s) - 1)
    lo, hi = int(math.floor(i)), int(math.ceil(i))
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def log(msg):
    print(msg, flush=True)


class Probe:
    def __init__(self, args):
        import torch
        import gemmtune

        self.torch = torch
        self.gt = gemmtune
        self.args = args
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(0)
        self.gpu = {"name": props.name, "sms": props.multi_processor_count, "cc": f"{props.major}.{props.minor}"}
        self.flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device=self.dev)
        # Spin cycles for --spin-us at the current SM clock (torch.cuda._sleep spins clock64 cycles).
        self.spin_cycles = int(args.spin_us * 1.98e3)
        self.engine = gemmtune.Engine(backends=["cublaslt"], use_cache=False, log_level="warning")
        self.stream = torch.cuda.current_stream()

    # ---- one problem ----------------------------------------------------------------------

    def inputs(self, dtype, m, n, k, seed):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(seed)
        if dtype == "fp8":
            x = (torch.randn(m, k, device=self.dev, generator=g) * 0.5).to(torch.float8_e4m3fn)
            w = (torch.randn(n, k, device=self.dev, generator=g) * 0.5).to(torch.float8_e4m3fn)
            sa = torch.tensor(0.75, device=self.dev, dtype=torch.float32)
            sb = torch.tensor(1.25, device=self.dev, dtype=torch.float32)
        else:
            x = torch.randn(m, k, device=self.dev, generator=g, dtype=torch.bfloat16)
            w = torch.randn(n, k, device=self.dev, generator=g, dtype=torch.bfloat16)
            sa = sb = None
        return x, w, sa, sb

    def torch_fn(self, dtype, x, w, sa, sb):
        """The user's call, as written in a model (the output comes from torch's caching allocator)."""
        torch = self.torch
        wt = w.t()
        if dtype == "fp8":
            return lambda: torch._scaled_mm(x, wt, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return lambda: torch.mm(x, wt)

    def gt_fn(self, kernel, x, w, sa, sb, out):
        a, b, d = x.data_ptr(), w.data_ptr(), out.data_ptr()
        pa = sa.data_ptr() if sa is not None else 0
        pb = sb.data_ptr() if sb is not None else 0
        s = self.stream.cuda_stream
        return lambda: kernel.run(a, b, 0, d, 0, pa, pb, s)

    def before_sample(self):
        self.flush_buf.fill_(1)  # 256 MiB written: L2 (60 MB on the H200) holds none of the inputs
        self.torch.cuda._sleep(self.spin_cycles)

    def time_interleaved(self, fns):
        torch = self.torch
        names = list(fns)
        t0 = time.perf_counter()
        n = 0
        while True:
            for nm in names:
                self.before_sample()
                fns[nm]()
            n += 1
            torch.cuda.synchronize()
            if n >= 2 and (time.perf_counter() - t0) * 1e3 >= self.args.warmup_ms:
                break
        starts = [torch.cuda.Event(enable_timing=True) for _ in names]
        ends = [torch.cuda.Event(enable_timing=True) for _ in names]
        out = {nm: [] for nm in names}
        for r in range(self.args.rounds):
            shift = r % len(names)
            order = names[shift:] + names[:shift]
            for j, nm in enumerate(order):
                self.before_sample()
                starts[j].record()
                fns[nm]()
                ends[j].record()
            ends[len(order) - 1].synchronize()
            for j, nm in enumerate(order):
                out[nm].append(starts[j].elapsed_time(ends[j]) * 1e3)
        return out

    def kernels(self, seq):
        """[(name, [kernel names])] for each (name, fn) of seq, run once under torch.profiler,
        each run preceded by a marker kernel (torch.cuda._sleep: "spin_kernel")."""
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _, fn in seq:
                torch.cuda._sleep(100)
                fn()
            torch.cuda._sleep(100)
            torch.cuda.synchronize()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
        evs = [e for e in trace.get("traceEvents", []) if str(e.get("cat", "")).lower() == "kernel"]
        evs.sort(key=lambda e: float(e.get("ts", 0)))
        groups, cur = [], None
        for e in evs:
            name = e.get("name", "?")
            if "spin_kernel" in name:
                if cur is not None:
                    groups.append(cur)
                cur = []
            elif cur is not None:
                cur.append(name)
        return [(seq[i][0], groups[i] if i < len(groups) else []) for i in range(len(seq))]

    def problem(self, dtype, m, n, k, seed):
        torch = self.torch
        args = self.args
        spec = {"m": m, "n": n, "k": k, "dtype": "e4m3" if dtype == "fp8" else "bf16", "out_dtype": "bf16"}
        if dtype == "fp8":
            spec["scale"] = "tensorwise"
        res = {"dtype": dtype, "m": m, "n": n, "k": k, "problem": spec}
        t0 = time.perf_counter()
        kernel, report = self.engine.select(spec, force=True)
        res["select_s"] = time.perf_counter() - t0
        pick_id = kernel.id
        cands = [r for r in report.get("results", []) if r.get("backend") == "cublaslt"]
        res["report_results"] = cands
        defaults = [c for c in cands if c.get("is_default")]
        res["baseline_id"] = defaults[0]["id"] if defaults else None
        res["pick_id"] = pick_id
        x, w, sa, sb = self.inputs(dtype, m, n, k, seed)
        tfn = self.torch_fn(dtype, x, w, sa, sb)
        ref = tfn()
        torch.cuda.synchronize()
        refn = ref.float().norm().item()

        # The baseline first, the pick second, then the report's order (which ranks by time).
        order = sorted(cands, key=lambda c: (not c.get("is_default"), c["id"] != pick_id))
        if args.max_candidates:
            order = order[: args.max_candidates]
        fns = {"torch": tfn}
        rows = {"torch": {"label": "torch", "name": "torch._scaled_mm" if dtype == "fp8" else "torch.mm"}}
        outs = {}
        for i, c in enumerate(order):
            label = f"c{i:02d}"
            try:
                kern = self.engine.load(spec, "cublaslt", c["id"])
            except Exception as e:  # noqa: BLE001
                rows[label] = {"label": label, "id": c["id"], "name": c.get("name", ""), "error": str(e)}
                continue
            out = torch.empty(m, n, device=self.dev, dtype=torch.bfloat16)
            out.fill_(float("nan"))
            fn = self.gt_fn(kern, x, w, sa, sb, out)
            fn()
            torch.cuda.synchronize()
            err = ((out.float() - ref.float()).norm().item() / refn) if refn else float("nan")
            ok = math.isfinite(err) and err <= args.tol
            rows[label] = {"label": label, "id": c["id"], "name": c.get("name", ""), "is_default": bool(c.get("is_default")),
                           "pick": c["id"] == pick_id, "rel_err": err, "ok": ok, "_kernel": kern}
            outs[label] = out
            if ok:
                fns[label] = fn
        times = self.time_interleaved(fns)
        for nm, v in times.items():
            rows[nm].update({"median_us": quantile(v, 0.5), "p20_us": quantile(v, 0.2), "p80_us": quantile(v, 0.8),
                             "samples": len(v)})
        if not args.no_profile:
            try:
                for nm, ks in self.kernels([(nm, fns[nm]) for nm in fns]):
                    rows[nm]["kernels"] = ks
            except Exception as e:  # noqa: BLE001
                res["profile_error"] = f"{type(e).__name__}: {e}"
        for r in rows.values():
            r.pop("_kernel", None)
        res["rows"] = list(rows.values())
        return res


# ---- report -----------------------------------------------------------------------------------


def fnum(x, d=1):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def summarize(res):
    rows = {r["label"]: r for r in res.get("rows", [])}
    t = rows.get("torch", {}).get("median_us")
    base = next((r for r in rows.values() if r.get("is_default")), None)
    pick = next((r for r in rows.values() if r.get("pick")), None)
    timed = [r for r in rows.values() if r["label"] != "torch" and r.get("median_us") is not None]
    best = min(timed, key=lambda r: r["median_us"]) if timed else None
    tk = (rows.get("torch", {}).get("kernels") or [None])
    bk = (base or {}).get("kernels") or [None]
    return {
        "problem": f"{res['dtype']} m={res['m']} n={res['n']} k={res['k']}",
        "torch_us": t,
        "base_us": base and base.get("median_us"),
        "best_us": best and best["median_us"],
        "pick_us": pick and pick.get("median_us"),
        "base_vs_torch": (base["median_us"] / t) if base and base.get("median_us") and t else None,
        "best_vs_torch": (best["median_us"] / t) if best and t else None,
        "pick_vs_torch": (pick["median_us"] / t) if pick and pick.get("median_us") and t else None,
        "same_kernel": (tk[0] == bk[0]) if tk[0] and bk[0] else None,
        "torch_kernel": tk[0],
        "base_kernel": bk[0],
        "base_name": (base or {}).get("name"),
        "n_cands": len(timed),
    }


def problem_table(res):
    lines = [f"### {res['dtype']} m={res['m']} n={res['n']} k={res['k']}  (select {fnum(res.get('select_s'), 2)} s)", "",
             "| contender | flags | median us | p20 | p80 | vs torch | rel err | kernel(s) | algo |",
             "|---|---|---|---|---|---|---|---|---|"]
    rows = res.get("rows", [])
    t = next((r.get("median_us") for r in rows if r["label"] == "torch"), None)
    for r in sorted(rows, key=lambda r: (r["label"] != "torch", r.get("median_us") or 1e30)):
        flags = ("default " if r.get("is_default") else "") + ("pick" if r.get("pick") else "")
        if r.get("error"):
            flags += " LOAD-ERROR"
        elif r["label"] != "torch" and not r.get("ok", True):
            flags += " WRONG"
        ratio = (r["median_us"] / t) if r.get("median_us") and t else None
        lines.append(f"| {r['label']} | {flags.strip()} | {fnum(r.get('median_us'), 2)} | {fnum(r.get('p20_us'), 2)} | "
                     f"{fnum(r.get('p80_us'), 2)} | {fnum(ratio, 3)} | {fnum(r.get('rel_err'), 5) if 'rel_err' in r else '-'} | "
                     f"{'; '.join(r.get('kernels') or []) or '-'} | {r.get('name', '')} |")
    if res.get("profile_error"):
        lines.append(f"\nprofiler: {res['profile_error']}")
    return "\n".join(lines)


def loaded_libs(stems):
    """Paths of the shared libraries whose names contain one of `stems`, as mapped now."""
    out = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if path.startswith("/") and any(st in os.path.basename(path) for st in stems):
                    out.add(path)
    except OSError:
        pass
    return sorted(out)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = Probe(args)
    torch = probe.torch
    doc = {"command": "python3 bench/probe-cublaslt-torch.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "gpu": probe.gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
           "gemmtune": probe.gt.version(), "library": probe.gt.library_path(),
           "env": {k: os.environ.get(k) for k in ("CUBLASLT_WORKSPACE_SIZE", "CUBLAS_WORKSPACE_CONFIG",
                                                   "TORCH_BLAS_PREFER_CUBLASLT", "GEMMTUNE_LIB")},
           "blas_backend": str(getattr(torch.backends.cuda, "preferred_blas_library", lambda: "?")()),
           "problems": []}
    try:
        doc["engine_info"] = probe.engine.info()
    except Exception:  # noqa: BLE001
        pass
    doc["loaded_blas_libs"] = loaded_libs(("libcublasLt", "libcublas."))
    log(f"# {probe.gpu['name']}, torch {torch.__version__} (CUDA {torch.version.cuda}), gemmtune {doc['gemmtune']}; "
        f"BLAS libraries in this process (torch's and gemmtune's calls share them): {doc['loaded_blas_libs']}")
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
    todo = [(dt, m, n, k) for dt in args.dtypes.split(",") if dt for m in (int(v) for v in args.ms.split(",")) for n, k in shapes]
    failed = False
    for i, (dt, m, n, k) in enumerate(todo):
        try:
            res = probe.problem(dt, m, n, k, args.seed + i)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res = {"dtype": dt, "m": m, "n": n, "k": k, "error": f"{type(e).__name__}: {e}"}
            failed = True
        doc["problems"].append(res)
        if "rows" in res:
            res["summary"] = summarize(res)
            if not res.get("baseline_id"):
                failed = True
            if any((r.get("error") or not r.get("ok", True)) for r in res["rows"]):
                failed = True
            log(problem_table(res) + "\n")
        (out / "probe-cublaslt-torch.json").write_text(json.dumps(doc, indent=1, default=str))

    md = [f"# cuBLASLt candidates against torch ({probe.gpu['name']}, torch {torch.__version__})", "",
          f"`{doc['command']}`", ""]
    md += [problem_table(r) + "\n" for r in doc["problems"] if "rows" in r]
    head = ("problem", "torch us", "base us", "base/torch", "best us", "best/torch", "pick us", "pick/torch",
            "cands", "same kernel", "torch kernel", "baseline kernel")

    def short(name, width=64):
        return "-" if not name else (name if len(name) <= width else name[: width - 3] + "...")

    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["problems"]:
        if "summary" not in r:
            table.append(f"| {r['dtype']} m={r['m']} n={r['n']} k={r['k']} | ERROR {r.get('error', '')} |")
            continue
        s = r["summary"]
        table.append(f"| {s['problem']} | {fnum(s['torch_us'], 2)} | {fnum(s['base_us'], 2)} | {fnum(s['base_vs_torch'], 3)} | "
                     f"{fnum(s['best_us'], 2)} | {fnum(s['best_vs_torch'], 3)} | {fnum(s['pick_us'], 2)} | "
                     f"{fnum(s['pick_vs_torch'], 3)} | {s['n_cands']} | {s['same_kernel']} | {short(s['torch_kernel'])} | "
                     f"{short(s['base_kernel'])} |")
    md += ["## Summary", ""] + table
    (out / "probe-cublaslt-torch.md").write_text("\n".join(md) + "\n")
    (out / "probe-cublaslt-torch.json").write_text(json.dumps(doc, indent=1, default=str))
    log("## Summary (medians, cold L2; base = the is_default candidate, best = fastest correct candidate)")
    log("\n".join(table))
    log(f"\nwrote {out / 'probe-cublaslt-torch.json'} and .md; {'FAILED' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
