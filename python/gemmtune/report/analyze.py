"""The report's numbers, from the loaded runs (load.py): per-problem comparisons, the backend
scorecard (performance, compile time, configs, correctness), and the headline summary.

Timing rule: a problem's backends are compared on one kind of timing only. Where the bench timed
every backend's best side by side (interleaved, cold L2) those medians are used; otherwise every
backend's best is its fastest correct candidate's median in gemmtune's own race (ok or pruned: a
backend whose every candidate was pruned as clearly slower still has its best, from the race's
early rounds, so its worst cases are not left out).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

from .load import COMPILED_S, CORRECT, Problem, Run, Timed


def geomean(xs) -> Optional[float]:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def bests(p: Problem) -> dict:
    """backend -> Timed on one kind of timing (module docstring)."""
    racing = {c.backend for c in p.candidates if c.status in CORRECT and c.median_us}
    side = {b: t for b, t in p.best.items() if t.timing == "side_by_side"}
    if side and racing <= set(side):
        return side
    out = {}
    for c in p.candidates:
        if c.status in CORRECT and c.median_us and (c.backend not in out or c.median_us < out[c.backend].median_us):
            out[c.backend] = Timed(c.backend, c.name, c.median_us, "tune", True)
    return out or dict(p.best)


def speedup(base: Optional[Timed], pick: Optional[Timed]) -> Optional[float]:
    """base's median / the pick's (> 1: the pick is faster); None unless both were timed the same way."""
    if not base or not pick or base.timing != pick.timing or not pick.median_us:
        return None
    return base.median_us / pick.median_us


@dataclass
class BackendScore:
    backend: str
    problems: int = 0  # problems where it had a timed correct candidate
    picked: int = 0  # problems whose pick is this backend
    fastest: int = 0  # problems where its best was the fastest of all backends' bests
    ratios: list = field(default_factory=list)  # [(best other / its best, problem label)]: > 1 = it is faster
    configs: set = field(default_factory=set)  # distinct candidate ids over all problems
    per_problem: list = field(default_factory=list)  # candidates per problem
    status: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)  # (status, reason) of wrong / failed ones
    compile_s: list = field(default_factory=list)  # every candidate's compile_s
    compile_machines: Counter = field(default_factory=Counter)  # (where measured, compiled?) -> candidates

    def add_compile(self, seconds: float, machine: Optional[str]) -> None:
        self.compile_s.append(seconds)
        self.compile_machines[(machine or "not recorded", seconds >= COMPILED_S)] += 1

    def machines_text(self) -> str:
        """Where the compile times were measured: "<machine>: N compiled, M store hits / loads; ..."."""
        out = []
        for m in sorted({m for m, _ in self.compile_machines}):
            c, h = self.compile_machines[(m, True)], self.compile_machines[(m, False)]
            out.append(f"{m}: " + ", ".join(x for x in (f"{c} compiled" if c else "",
                                                        f"{h} store hits / loads" if h else "") if x))
        return "; ".join(out)

    @property
    def geomean_vs_other(self) -> Optional[float]:
        return geomean(r for r, _ in self.ratios)

    @property
    def worst(self) -> Optional[tuple]:
        return min(self.ratios) if self.ratios else None

    @property
    def within_5pct(self) -> int:
        return sum(1 for r, _ in self.ratios if r >= 1 / 1.05)

    def compile_stats(self) -> dict:
        cs = sorted(self.compile_s)
        compiled = [c for c in cs if c >= COMPILED_S]
        def q(xs, f):
            return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else None
        return {"n": len(cs), "median": statistics.median(cs) if cs else None, "max": cs[-1] if cs else None,
                "n_compiled": len(compiled), "compiled_median": statistics.median(compiled) if compiled else None,
                "compiled_p90": q(compiled, 0.9), "compiled_max": compiled[-1] if compiled else None,
                "compiled_total": sum(compiled)}


@dataclass
class Analysis:
    runs: list
    gemm: list  # every GEMM problem of every run
    dtypes: list  # dtype families present, in a fixed order
    backends: list  # gemmtune backends present
    scores: dict  # backend -> BackendScore
    other_ops: Counter  # op -> problems not plotted (softmax)


_DTYPE_ORDER = ["bf16", "fp16", "fp32", "fp8", "fp8-rowwise"]
_BACKEND_ORDER = ["cublaslt", "triton", "cutlass", "cutedsl", "native"]


def _order(xs, ref):
    return sorted(xs, key=lambda x: (ref.index(x) if x in ref else len(ref), x))


def analyze(runs: list) -> Analysis:
    gemm = [p for r in runs if not r.compile_only for p in r.problems if p.op == "gemm"]
    other = Counter(p.op for r in runs if not r.compile_only for p in r.problems if p.op != "gemm")
    scores: dict = {}

    def score(b):
        return scores.setdefault(b, BackendScore(b))

    for run in runs:
        for p in run.problems:
            if run.compile_only:  # its compile times only
                for c in p.candidates:
                    if c.compile_s is not None:
                        score(c.backend).add_compile(c.compile_s, run.compile_machine)
                continue
            per = Counter()
            for c in p.candidates:
                s = score(c.backend)
                s.status[c.status] += 1
                per[c.backend] += 1
                if c.id:
                    s.configs.add(c.id)
                if c.status not in ("ok", "pruned"):
                    s.reasons[(c.status, c.reason or "(no reason given)")] += 1
                if c.compile_s is not None:
                    s.add_compile(c.compile_s, run.compile_machine)
            for b, n in per.items():
                score(b).per_problem.append(n)
            if p.op != "gemm":
                continue
            bb = bests(p)
            for b, t in bb.items():
                s = score(b)
                s.problems += 1
                others = [o.median_us for ob, o in bb.items() if ob != b]
                if others:
                    s.ratios.append((min(others) / t.median_us, p.label))
            if bb:
                score(min(bb.values(), key=lambda t: t.median_us).backend).fastest += 1
            if p.pick:
                score(p.pick.backend).picked += 1
    backends = _order([b for b in scores], _BACKEND_ORDER)
    dtypes = _order({p.dtype for p in gemm}, _DTYPE_ORDER)
    return Analysis(runs=runs, gemm=gemm, dtypes=dtypes, backends=backends, scores=scores, other_ops=other)


def by_m(problems: list, ratio) -> dict:
    """m -> geomean of ratio(p) over the problems with one."""
    groups = defaultdict(list)
    for p in problems:
        r = ratio(p)
        if r:
            groups[p.m].append(r)
    return {m: geomean(v) for m, v in sorted(groups.items())}


def ceilings_for(run: Run, dtype: str) -> tuple:
    """(compute TFLOP/s, bandwidth TB/s) measured in `run` for a dtype family, each None when the run
    did not measure it (fp16 / fp32 have no compute ceiling in the bench; fp8 rowwise uses the
    tensorwise one, the only fp8 ceiling measured)."""
    c = run.ceilings or {}
    key = {"bf16": "bf16_tflops", "fp8": "fp8_tflops", "fp8-rowwise": "fp8_tflops"}.get(dtype)
    peak = c.get(key) if key else None
    bw = c.get("copy_TBps")
    ok = lambda v: v if isinstance(v, (int, float)) and v > 0 else None  # noqa: E731
    return ok(peak), ok(bw)
