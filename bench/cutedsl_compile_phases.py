"""Where one CuTe DSL candidate's compile seconds go, in a warm process (the DSL imported, one
warm-up compile done): CPU seconds (user + system of every thread) per phase of
gemmtune.cutedsl.compile.compile_gemm, and the g++ child's.

    .venv/bin/python bench/cutedsl_compile_phases.py [--python-dir DIR] [--epilogue]

Phases, timed by wrapping the DSL's own functions (internal API of nvidia-cutlass-dsl 4.8.1: a
wrapper that no longer matches is reported as missing, not guessed): trace (the kernel's Python
building MLIR: BaseDSL.generate_original_ir), passes (the MLIR pipeline with NVVM and ptxas:
Compiler.compile), jit + lookup (the execution engine, when the compile makes one), export
(JitCompiledFunction.export_to_c), child (g++: the shim and the link). --python-dir picks the
gemmtune sources to measure (another checkout's python/, to compare). Needs no GPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

CONFIGS = [(128, 128, 1, 1), (128, 256, 1, 1), (128, 128, 2, 1), (64, 128, 1, 1), (128, 64, 1, 2),
           (64, 256, 1, 1), (128, 128, 1, 2), (64, 64, 1, 1), (128, 64, 2, 1)]


def children_cpu() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    ap.add_argument("--epilogue", action="store_true", help="beta*C + bias + gelu_tanh instead of none")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.python_dir))

    cpu = time.process_time
    t0, w0 = cpu(), time.perf_counter()
    from gemmtune.cutedsl import compile as cc
    from gemmtune.cutedsl import gemm_sm90  # noqa: F401
    from cutlass.base_dsl import compiler as C, dsl as D, jit_executor as J
    print(f"import: {cpu() - t0:.3f} s CPU, {time.perf_counter() - w0:.3f} s wall; load {os.getloadavg()[0]:.2f}")

    acc: dict[str, float] = {}

    def wrap(cls, name, label):
        f = getattr(cls, name, None)
        if f is None:
            print(f"note: {cls.__name__}.{name} not found: phase '{label}' not measured")
            return

        def timed(*a, **k):
            t = cpu()
            try:
                return f(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + cpu() - t
        setattr(cls, name, timed)

    wrap(D.BaseDSL, "generate_original_ir", "trace")
    wrap(C.Compiler, "compile", "passes")
    wrap(C.Compiler, "jit", "jit")
    wrap(D.BaseDSL, "_lookup_jit_entry", "lookup")
    wrap(J.JitCompiledFunction, "export_to_c", "export")

    base = dict(a_dtype="bf16", b_dtype="bf16", d_dtype="bf16", a_row=True, b_row=False, d_row=True)
    if args.epilogue:
        base.update(has_c=True, bias=True, act="gelu_tanh")
    cc.compile_gemm(dict(base, tile_m=64, tile_n=64), tempfile.mkdtemp())  # warm-up (runtime library, lazy set-up)
    totals, walls = [], []
    for tm, tn, cm, cn in CONFIGS:
        p = dict(base, tile_m=tm, tile_n=tn, cluster_m=cm, cluster_n=cn)
        acc.clear()
        t, c0, w = cpu(), children_cpu(), time.perf_counter()
        cc.compile_gemm(p, tempfile.mkdtemp())
        w, own, child = time.perf_counter() - w, cpu() - t, children_cpu() - c0
        totals.append(own + child)
        walls.append(w)
        phases = " ".join(f"{k} {v:.3f}" for k, v in acc.items())
        print(f"{tm}x{tn}c{cm}x{cn}: {own + child:.3f} s CPU ({phases}, child {child:.3f}, "
              f"other {own - sum(acc.values()):.3f}), {w:.3f} s wall")
    print(f"median {statistics.median(totals):.3f} s CPU, {statistics.median(walls):.3f} s wall per artifact; "
          f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
