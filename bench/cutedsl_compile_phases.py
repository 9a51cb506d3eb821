"""Where one CuTe DSL candidate's compile seconds go, in a warm process (the DSL imported, one
warm-up compile done): CPU seconds (user + system of every thread) per phase of
gemmtune.cutedsl.compile.compile_gemm, and the child processes' (g++: the link).

    .venv/bin/python bench/cutedsl_compile_phases.py [--python-dir DIR] [--epilogue] [--configs IDS]
    .venv/bin/python bench/cutedsl_compile_phases.py --ab BEFORE_DIR [--rounds N] [--configs IDS]

Phases, timed by wrapping the DSL's own functions (internal API of nvidia-cutlass-dsl 4.8.1: a
wrapper that no longer matches is reported as missing, not guessed): trace (the kernel's Python
building MLIR: BaseDSL.generate_original_ir), passes (the MLIR pipeline with NVVM and ptxas:
Compiler.compile), jit + lookup (the execution engine, when the compile makes one), export
(JitCompiledFunction.export_to_c), child (g++ and what it runs: before 2026-12-03 the shim's C++
compile and the link, since then the link only). --python-dir picks the gemmtune sources to
measure (another checkout's python/, to compare). IDS: comma-separated configs as the C++ side
names them (128x256c1x1), bf16, A row, B column, D row; default nine of them.

--ab BEFORE_DIR: the same configs in two warm processes, BEFORE_DIR's sources and this
checkout's (--python-dir), alternating config by config (which side goes first alternates too),
N rounds; prints each side's median per phase and the median over configs of the paired
difference (before - after), so that machine load that drifts during the run hits both alike.
Needs no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CONFIGS = "128x128c1x1,128x256c1x1,128x128c2x1,64x128c1x1,128x64c1x2,64x256c1x1,128x128c1x2,64x64c1x1,128x64c2x1"
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_configs(text: str) -> list[tuple[int, int, int, int]]:
    out = []
    for cid in text.split(","):
        m = re.fullmatch(r"(\d+)x(\d+)c(\d)x(\d)", cid.strip())
        if not m:
            raise SystemExit(f"config {cid!r}: expected e.g. 128x256c1x1")
        out.append(tuple(int(x) for x in m.groups()))
    return out


def children_cpu() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


class Measurer:
    """compile_gemm in this process with the DSL's phases timed (the sources of python_dir)."""

    def __init__(self, python_dir: str, epilogue: bool):
        sys.path.insert(0, os.path.abspath(python_dir))
        cpu = time.process_time
        t0, w0 = cpu(), time.perf_counter()
        from gemmtune.cutedsl import compile as cc
        from gemmtune.cutedsl import gemm_sm90  # noqa: F401
        from cutlass.base_dsl import compiler as C, dsl as D, jit_executor as J
        self.import_cpu, self.import_wall = cpu() - t0, time.perf_counter() - w0
        self.cc = cc
        self.acc: dict[str, float] = {}
        self.notes = []
        self._wrap(D.BaseDSL, "generate_original_ir", "trace")
        self._wrap(C.Compiler, "compile", "passes")
        self._wrap(C.Compiler, "jit", "jit")
        self._wrap(D.BaseDSL, "_lookup_jit_entry", "lookup")
        self._wrap(J.JitCompiledFunction, "export_to_c", "export")
        self.base = dict(a_dtype="bf16", b_dtype="bf16", d_dtype="bf16", a_row=True, b_row=False, d_row=True)
        if epilogue:
            self.base.update(has_c=True, bias=True, act="gelu_tanh")
        cc.compile_gemm(dict(self.base, tile_m=64, tile_n=64), tempfile.mkdtemp())  # warm-up (runtime library, lazy set-up)

    def _wrap(self, cls, name, label):
        f = getattr(cls, name, None)
        if f is None:
            self.notes.append(f"{cls.__name__}.{name} not found: phase '{label}' not measured")
            return
        acc, cpu = self.acc, time.process_time

        def timed(*a, **k):
            t = cpu()
            try:
                return f(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + cpu() - t
        setattr(cls, name, timed)

    def measure(self, tm: int, tn: int, cm: int, cn: int) -> dict:
        p = dict(self.base, tile_m=tm, tile_n=tn, cluster_m=cm, cluster_n=cn)
        self.acc.clear()
        cpu = time.process_time
        t, c0, w = cpu(), children_cpu(), time.perf_counter()
        self.cc.compile_gemm(p, tempfile.mkdtemp())
        w, own, child = time.perf_counter() - w, cpu() - t, children_cpu() - c0
        r = {"config": f"{tm}x{tn}c{cm}x{cn}", "cpu": own + child, "wall": w, **self.acc, "child": child,
             "other": own - sum(self.acc.values())}
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}


def line(r: dict) -> str:
    phases = " ".join(f"{k} {r[k]:.3f}" for k in ("trace", "passes", "jit", "lookup", "export", "child", "other") if k in r)
    return f"{r['config']}: {r['cpu']:.3f} s CPU ({phases}), {r['wall']:.3f} s wall"


def serve(args) -> int:
    """One JSON line per config id read from stdin (for --ab)."""
    m = Measurer(args.python_dir, args.epilogue)
    print(json.dumps({"ready": True, "import_cpu": m.import_cpu, "notes": m.notes}), flush=True)
    for req in sys.stdin:
        print(json.dumps(m.measure(*parse_configs(req)[0])), flush=True)
    return 0


def ab(args) -> int:
    configs = args.configs.split(",")
    sides = {"before": os.path.abspath(args.ab), "after": os.path.abspath(args.python_dir)}
    procs = {}
    for name, d in sides.items():
        cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--python-dir", d] + (["--epilogue"] if args.epilogue else [])
        procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(procs[name].stdout.readline())
        print(f"{name}: {d}; import {ready['import_cpu']:.2f} s CPU; {'; '.join(ready['notes']) or 'every phase wrapped'}")
    load0 = os.getloadavg()[0]
    res = {name: {} for name in sides}
    for rnd in range(args.rounds):
        for i, cid in enumerate(configs):
            order = ("before", "after") if (rnd + i) % 2 == 0 else ("after", "before")
            for name in order:
                procs[name].stdin.write(cid + "\n")
                procs[name].stdin.flush()
                r = json.loads(procs[name].stdout.readline())
                res[name].setdefault(cid, []).append(r)
                print(f"round {rnd + 1} {name:6s} {line(r)}", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    load1 = os.getloadavg()[0]
    keys = ["cpu", "wall", "trace", "passes", "export", "child", "other"]
    # Per config and side: the median over rounds; then the median over configs.
    per = {name: {cid: {k: statistics.median(r.get(k, 0.0) for r in rs) for k in keys} for cid, rs in res[name].items()}
           for name in sides}
    print(f"\n{len(configs)} configs x {args.rounds} rounds; load {load0:.2f} -> {load1:.2f}")
    print("| side | " + " | ".join(f"{k} s" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for name in sides:
        print(f"| {name} | " + " | ".join(f"{statistics.median(per[name][c][k] for c in configs):.3f}" for k in keys) + " |")
    print("| before - after (median over configs) | " + " | ".join(
        f"{statistics.median(per['before'][c][k] - per['after'][c][k] for c in configs):.3f}" for k in keys) + " |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python-dir", default=os.path.join(HERE, "..", "python"))
    ap.add_argument("--epilogue", action="store_true", help="beta*C + bias + gelu_tanh instead of none")
    ap.add_argument("--configs", default=CONFIGS)
    ap.add_argument("--ab", metavar="BEFORE_DIR", help="compare with the sources in BEFORE_DIR, interleaved")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args)
    if args.ab:
        return ab(args)
    m = Measurer(args.python_dir, args.epilogue)
    print(f"import: {m.import_cpu:.3f} s CPU, {m.import_wall:.3f} s wall; load {os.getloadavg()[0]:.2f}")
    for n in m.notes:
        print("note: " + n)
    totals, walls = [], []
    for cfg in parse_configs(args.configs):
        r = m.measure(*cfg)
        totals.append(r["cpu"])
        walls.append(r["wall"])
        print(line(r))
    print(f"median {statistics.median(totals):.3f} s CPU, {statistics.median(walls):.3f} s wall per artifact; "
          f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
