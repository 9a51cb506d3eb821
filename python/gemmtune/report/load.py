"""Reading the report's inputs into one model: Runs of Problems with their Candidates.

Inputs, told apart by content (not by name):
  - a bench result (bench/h200.py, bench/softmax.py): {command, environment, ceilings, rows, summary};
    `.json` or `.json.xz` (bench/README.md documents the rows);
  - `gemmtune suite --json` output: JSON lines, one per (problem, candidate);
  - `gemmtune tune --json` output: {problem, key, environment, results, roof, ...};
  - a tuning-cache export (`gemmtune cache export`): {format: "gemmtune-cache", version, entries};
  - a tuning cache itself: the SQLite file (read-only);
  - a tar archive (.tgz, .tar.gz, .tar) of any of the JSON kinds above: every .json member is read.
Anything else is a ReportError naming the file (and the field, for a malformed document).
"""

from __future__ import annotations

import io
import json
import lzma
import math
import sqlite3
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

# Bytes per element of each dtype name the engine and the bench write.
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "e4m3": 1, "e5m2": 1, "fp8": 1}
FP8 = ("e4m3", "e5m2", "fp8")
# A compile_s below this (seconds) is an artifact-store hit or a load, not a compile (the bench's
# --compile-hit-s default).
COMPILED_S = 0.05
# Statuses of a correct candidate: ok (timed to the end of the race), pruned (timed in its early
# rounds, then dropped as clearly slower).
CORRECT = ("ok", "pruned")


class ReportError(Exception):
    """Bad input: the message names the file and, for a malformed document, the field."""


@dataclass
class Candidate:
    """One candidate's result from a tune (gemmtune's own race): one row of its report."""
    backend: str
    id: str
    name: str
    status: str  # ok, pruned, wrong, failed (any other status the engine records is counted as is)
    reason: str = ""
    median_us: Optional[float] = None  # None: not timed
    compile_s: Optional[float] = None
    rel_err: Optional[float] = None
    winner: bool = False
    default: bool = False


@dataclass
class Timed:
    """A contender's timing: a backend's best, the pick, or a baseline (torch, Inductor)."""
    backend: str
    name: str
    median_us: float
    timing: str  # "side_by_side" (the bench's interleaved re-timing) or "tune" (the race's median)
    correct: Optional[bool] = None


@dataclass
class Problem:
    source: str  # the input it came from
    label: str
    op: str  # gemm, softmax
    dtype: str  # family for grouping: bf16, fp16, fp32, fp8, fp8-rowwise (softmax: its dtype)
    m: int = 0
    n: int = 0
    k: int = 0
    model: str = ""
    layer: str = ""
    flops: float = 0.0
    min_bytes: float = 0.0  # A and B read once, D written once
    candidates: list = field(default_factory=list)  # [Candidate]
    pick: Optional[Timed] = None
    best: dict = field(default_factory=dict)  # backend -> Timed (its fastest correct candidate)
    torch: Optional[Timed] = None
    inductor: Optional[Timed] = None
    select_s: Optional[float] = None  # tune wall time when recorded
    mismatches: list = field(default_factory=list)  # side-by-side contenders that failed the check

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, flop per byte of the minimal traffic."""
        return self.flops / self.min_bytes if self.min_bytes else float("nan")


@dataclass
class Run:
    """One input file (or one archive): its problems and what it says about where it ran."""
    path: str
    kind: str  # bench, softmax-bench, suite, tune, cache
    problems: list = field(default_factory=list)
    command: Optional[str] = None  # the command that made the data, None when not recorded
    date: Optional[str] = None
    device: Optional[str] = None
    ceilings: Optional[dict] = None  # measured: copy_TBps, bf16_tflops, fp8_tflops (None: not measured)
    ceilings_end: Optional[dict] = None
    environment: list = field(default_factory=list)  # [(name, value)] for the page
    compile_machine: Optional[str] = None  # where compile_s was measured, None: not recorded
    notes: list = field(default_factory=list)
    compile_only: bool = False  # read for its compile times only (`--compile-times`): not compared, not plotted


# ---- helpers ------------------------------------------------------------------------------

def _num(v) -> Optional[float]:
    """A finite number > 0 from v, else None (null, 0 and negative mean "not measured")."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and v > 0 else None


def _need(obj: dict, key: str, where: str):
    if not isinstance(obj, dict):
        raise ReportError(f"{where}: must be an object")
    if key not in obj:
        raise ReportError(f"{where}.{key}: missing")
    return obj[key]


def _int(obj: dict, key: str, where: str) -> int:
    v = _need(obj, key, where)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ReportError(f"{where}.{key}: must be a positive integer, got {v!r}")
    return v


def family(dtype: str, scale: str = "none") -> str:
    """The dtype family the report groups by: fp8 inputs are one family per scale kind."""
    d = "fp8" if dtype in FP8 or dtype.startswith("fp8") else dtype
    if d == "fp8" and (scale == "rowwise" or dtype == "fp8-rowwise"):
        return "fp8-rowwise"
    return d


def gemm_traffic(m: int, n: int, k: int, in_dtype: str, out_dtype: str) -> float:
    """min_bytes of D[m,n] = A[m,k] @ B[k,n]: A and B read once, D written once."""
    a = DTYPE_BYTES.get("fp8" if in_dtype.startswith("fp8") else in_dtype)
    d = DTYPE_BYTES.get(out_dtype)
    if a is None or d is None:
        return 0.0
    return float(m * k * a + n * k * a + m * n * d)


def _candidate(r: dict, where: str) -> Candidate:
    """A candidate from to_json's encoding (id, name, is_default), or the bench's / export v1's
    (candidate_id, candidate, candidate_name, default)."""
    backend = _need(r, "backend", where)
    status = _need(r, "status", where)
    if not isinstance(backend, str) or not isinstance(status, str):
        raise ReportError(f"{where}: backend and status must be strings")
    rel = r.get("rel_err")
    rel = float(rel) if isinstance(rel, (int, float)) and not isinstance(rel, bool) and rel >= 0 else None
    cs = r.get("compile_s")
    cs = float(cs) if isinstance(cs, (int, float)) and not isinstance(cs, bool) and cs >= 0 else None
    return Candidate(backend=backend, id=str(r.get("id", r.get("candidate_id", "")) or ""),
                     name=str(r.get("name", r.get("candidate", r.get("candidate_name", ""))) or ""),
                     status=status, reason=str(r.get("reason") or ""), median_us=_num(r.get("median_us")),
                     compile_s=cs, rel_err=rel, winner=bool(r.get("winner")),
                     default=bool(r.get("is_default", r.get("default", False))))


def _finish(p: Problem) -> Problem:
    """Fills what a problem without side-by-side timings takes from its tune: the pick (the
    winner) and each backend's best (its fastest correct candidate by the race's median)."""
    if not p.best:
        for c in p.candidates:
            if c.status in CORRECT and c.median_us:
                b = p.best.get(c.backend)
                if b is None or c.median_us < b.median_us:
                    p.best[c.backend] = Timed(c.backend, c.name, c.median_us, "tune", True)
    if p.pick is None:
        for c in p.candidates:
            if c.winner and c.median_us:
                p.pick = Timed(c.backend, c.name, c.median_us, "tune", True)
                break
    return p


def _env_pairs(env: str) -> list:
    """The engine's environment string "name=value;name=value" as pairs (backend versions)."""
    out = []
    for part in env.split(";"):
        name, sep, value = part.partition("=")
        if sep:
            out.append((name, value))
    return out


# ---- bench results (bench/h200.py, bench/softmax.py) ---------------------------------------

_SIDE_BASELINES = {"torch": "torch", "inductor": "inductor"}


def _bench(doc: dict, path: str) -> Run:
    rows = _need(doc, "rows", path)
    if not isinstance(rows, list):
        raise ReportError(f"{path}.rows: must be an array")
    env = doc.get("environment") or {}
    softmax = any(isinstance(r, dict) and r.get("op") == "softmax" for r in rows)
    run = Run(path=path, kind="softmax-bench" if softmax else "bench", command=doc.get("command"),
              date=doc.get("date"), device=doc.get("device"))
    if env.get("merge_command"):
        run.command = (run.command or "") + "\n" + env["merge_command"]
    for name in ("ceilings", "ceilings_end"):
        c = doc.get(name)
        if isinstance(c, dict) and (_num(c.get("copy_TBps")) or _num(c.get("bf16_tflops"))):
            setattr(run, name, c)
    if softmax:
        copy = ((doc.get("summary") or {}).get("copy") or {}).get("copy_TBps")
        if _num(copy):
            run.ceilings = {"copy_TBps": copy}
    _bench_environment(run, doc, env)

    groups: dict = {}
    skipped: dict = {}
    for i, r in enumerate(rows):
        where = f"{path}.rows[{i}]"
        if not isinstance(r, dict):
            raise ReportError(f"{where}: must be an object")
        op, timing = r.get("op", "gemm"), r.get("timing")
        if op not in ("gemm", "softmax") or timing not in ("tune", "side_by_side"):
            skipped[(op, timing)] = skipped.get((op, timing), 0) + 1
            continue
        if op == "gemm":
            key = (op, r.get("model"), r.get("layer"), _int(r, "m", where), _int(r, "n", where), _int(r, "k", where),
                   r.get("dtype_name", r.get("dtype")), r.get("scale"), r.get("layout"), r.get("epilogue"))
        else:
            key = (op, _int(r, "rows", where), _int(r, "cols", where), r.get("dtype"), r.get("scale"))
        p = groups.get(key)
        if p is None:
            p = groups[key] = _bench_problem(r, op, path, where)
        if timing == "tune":
            p.candidates.append(_candidate(r, where))
            continue
        med = _num(r.get("median_us"))
        if r.get("correct") is False:
            p.mismatches.append(f"{r.get('contender', r.get('backend'))}: rel_err {r.get('rel_err')}")
        if med is None:
            continue
        t = Timed(str(r.get("backend")), str(r.get("candidate") or ""), med, "side_by_side", r.get("correct"))
        contender = r.get("contender", r.get("role"))
        if contender == "pick":
            p.pick = t
        elif r.get("role") == "backend_best" or str(contender).endswith("_best"):
            p.best[t.backend] = t
        elif contender in _SIDE_BASELINES:
            setattr(p, _SIDE_BASELINES[contender], t)
    for (op, timing), n in sorted(skipped.items(), key=str):
        run.notes.append(f"{n} rows with op '{op}' and timing '{timing}' are not per-problem timings this "
                         "report reads (decoder chains, cold tune, stability, or an older file format): not shown")
    by_label = {}
    for s in (doc.get("summary") or {}).get("problems") or []:
        if isinstance(s, dict) and s.get("label"):
            by_label[s["label"]] = s
    for p in groups.values():
        s = by_label.get(p.label)
        if s:
            p.select_s = _num((s.get("tune") or {}).get("select_s"))
        run.problems.append(_finish(p))
    for m in (doc.get("summary") or {}).get("mismatches") or []:
        run.notes.append(f"mismatch: {m}")
    return run


def _bench_problem(r: dict, op: str, path: str, where: str) -> Problem:
    if op == "softmax":
        rows_, cols = r["rows"], r["cols"]
        return Problem(source=path, label=f"softmax {rows_}x{cols} {r.get('dtype')}", op=op,
                       dtype=str(r.get("dtype")), m=rows_, n=cols, min_bytes=float(r.get("bytes") or 0))
    m, n, k = r["m"], r["n"], r["k"]
    name = str(r.get("dtype_name") or r.get("dtype") or "")
    if not name:
        raise ReportError(f"{where}.dtype_name: missing")
    fam = family(name, str(r.get("scale", "none")))
    label = f"{r.get('model')}/{r.get('layer')} m={m} {name}" if r.get("model") else f"{m}x{n}x{k} {name}"
    in_dtype = str(r.get("dtype", name))
    return Problem(source=path, label=label, op=op, dtype=fam, m=m, n=n, k=k, model=str(r.get("model") or ""),
                   layer=str(r.get("layer") or ""), flops=2.0 * m * n * k,
                   min_bytes=gemm_traffic(m, n, k, in_dtype, str(r.get("out_dtype", "bf16"))))


def _clocks(state: Any) -> str:
    if not isinstance(state, dict):
        return ""
    keys = ("clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "temperature.gpu", "pstate")
    return ", ".join(f"{k} {state[k]}" for k in keys if k in state)


def _bench_environment(run: Run, doc: dict, env: dict) -> None:
    e = run.environment
    if doc.get("date"):
        e.append(("date (UTC)", doc["date"]))
    if doc.get("device"):
        e.append(("device", doc["device"]))
    gpu = env.get("gpu") or {}
    if gpu:
        e.append(("GPU", f"{gpu.get('name', '')} (nvidia-smi index {gpu.get('index', '?')}, "
                         f"bus {gpu.get('pci.bus_id', '?')})"))
    for name, key in (("clocks at start", "gpu_state_start"), ("clocks at end", "gpu_state_end")):
        if env.get(key):
            e.append((name, _clocks(env[key])))
    for name, key in (("ceilings (start)", "ceilings"), ("ceilings (end)", "ceilings_end")):
        c = doc.get(key)
        if isinstance(c, dict) and c.get("gpu_state"):
            e.append((f"clocks during {name}", _clocks(c["gpu_state"])))
    versions = env.get("versions") or {}
    if versions:
        e.append(("library versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    engine = env.get("engine") or env.get("gemmtune") or {}
    for b in engine.get("backends") or []:
        if isinstance(b, dict):
            e.append((f"backend {b.get('name')}", str(b.get("status"))))
    if env.get("cublaslt"):
        e.append(("libcublasLt loaded", env["cublaslt"]))
    if env.get("cpu_count"):
        e.append(("host CPUs", str(env["cpu_count"])))
    shards = doc.get("shards") or []
    if shards:
        e.append(("shards", f"{len(shards)} processes, one per GPU of one host"))
        for s in shards:
            c = s.get("ceilings") or {}
            e.append((f"shard {s.get('index')} GPU", f"{(s.get('gpu') or {}).get('name', '?')} "
                      f"index {(s.get('gpu') or {}).get('index', '?')}: copy {c.get('copy_TBps', 0):.2f} TB/s, "
                      f"bf16 {c.get('bf16_tflops', 0):.0f}, fp8 {c.get('fp8_tflops', 0):.0f} TFLOP/s"))
    workers = (env.get("gemmtune_env") or {}).get("GEMMTUNE_COMPILE_WORKERS") or \
        ((env.get("engine_options") or {}).get("compile") or {}).get("workers")
    if env.get("cpu_count"):
        run.compile_machine = (f"the GPU host ({env['cpu_count']} CPU cores"
                               + (f", {workers} compile workers" if workers else "")
                               + (f", {len(shards)} shards at once" if shards else "") + ")")


# ---- gemmtune suite --json (JSON lines) ----------------------------------------------------

def _suite(lines: list, path: str) -> Run:
    run = Run(path=path, kind="suite")
    run.notes.append("`gemmtune suite --json` records no ceilings, environment or command: those are "
                     "not recorded for this input")
    groups: dict = {}
    errors = 0
    for i, r in enumerate(lines):
        where = f"{path}:{i + 1}"
        if r.get("status") == "error" or r.get("backend") is None:
            errors += 1
            continue
        op = r.get("op", "gemm")
        if op == "softmax":
            key = (op, r.get("rows"), r.get("cols"), r.get("dtype"))
        else:
            key = (op, r.get("model"), r.get("layer"), _int(r, "m", where), _int(r, "n", where), _int(r, "k", where),
                   r.get("dtype"), r.get("scale"), r.get("layout"), r.get("epilogue"))
        p = groups.get(key)
        if p is None:
            if op == "softmax":
                p = Problem(source=path, label=f"softmax {r.get('rows')}x{r.get('cols')} {r.get('dtype')}", op=op,
                            dtype=str(r.get("dtype")), m=int(r.get("rows") or 0), n=int(r.get("cols") or 0))
            else:
                m, n, k, dt = r["m"], r["n"], r["k"], str(r.get("dtype", ""))
                fam = family(dt, str(r.get("scale", "none")))
                model = str(r.get("model") or "")
                label = f"{model}/{r.get('layer')} m={m} {fam}" if model else f"{m}x{n}x{k} {fam}"
                p = Problem(source=path, label=label, op=op, dtype=fam, m=m, n=n, k=k, model=model,
                            layer=str(r.get("layer") or ""), flops=2.0 * m * n * k,
                            min_bytes=gemm_traffic(m, n, k, dt, str(r.get("out_dtype", "bf16"))))
            groups[key] = p
        p.candidates.append(_candidate(r, where))
        ms = _num(r.get("select_ms"))
        if ms is not None:
            p.select_s = ms / 1e3
    if errors:
        run.notes.append(f"{errors} problems of the suite failed (status error): not shown")
    run.problems = [_finish(p) for p in groups.values()]
    return run


# ---- gemmtune tune --json ------------------------------------------------------------------

def _tune_problem(doc: dict, source: str, where: str, label_suffix: str = "") -> Problem:
    prob = _need(doc, "problem", where)
    if doc.get("op", "gemm") == "softmax" or "rows" in prob:
        p = Problem(source=source, label=f"softmax {prob.get('str', '')}{label_suffix}", op="softmax",
                    dtype=str(prob.get("dtype", prob.get("in", ""))))
    else:
        m, n, k = (_int(prob, x, f"{where}.problem") for x in ("m", "n", "k"))
        a = (prob.get("a") or {}).get("dtype", "bf16")
        d = (prob.get("d") or {}).get("dtype", "bf16")
        fam = family(a, str(prob.get("scale", "none")))
        p = Problem(source=source, label=f"{m}x{n}x{k} {fam}{label_suffix}", op="gemm", dtype=fam, m=m, n=n, k=k,
                    flops=2.0 * m * n * k, min_bytes=gemm_traffic(m, n, k, a, d))
    results = _need(doc, "results", where)
    if not isinstance(results, list):
        raise ReportError(f"{where}.results: must be an array")
    p.candidates = [_candidate(r, f"{where}.results[{i}]") for i, r in enumerate(results)]
    p.select_s = _num(doc.get("seconds")) if not doc.get("from_cache") else None
    return _finish(p)


def _tunes(docs: list, path: str) -> Run:
    """`gemmtune tune --json` outputs ([(member name, doc)]): one run, a problem per document."""
    run = Run(path=path, kind="tune")
    envs, devices, roofs = [], [], []
    for name, doc in docs:
        suffix = f" [{name}]" if len(docs) > 1 else ""
        run.problems.append(_tune_problem(doc, path, f"{path}:{name}" if name else path, suffix))
        if doc.get("environment") and doc["environment"] not in envs:
            envs.append(doc["environment"])
        if doc.get("device") and doc["device"] not in devices:
            devices.append(doc["device"])
        roof = doc.get("roof") or {}
        if "measured" in str(roof.get("source", "")):
            roofs.append(roof)
    run.device = "; ".join(devices) or None
    for d in devices:
        run.environment.append(("device", d))
    for env in envs:
        run.environment.extend(_env_pairs(env))
    if roofs:
        run.ceilings = roofs[0]
    else:
        run.notes.append("the tune outputs hold no measured ceilings (their roof, if any, is the nominal one)")
    run.notes.append("`gemmtune tune --json` records neither the command line nor the compile machine")
    return run


# ---- the tuning cache: export JSON and SQLite ----------------------------------------------

def parse_canonical(text: str) -> dict:
    """GemmProblem::canonical() ("gemm1;m=..;n=..;k=..;a=dtype/layout/ld;b=..;d=..;...;scale=..")
    or SoftmaxProblem's ("softmax1;rows=..;cols=..;..;in=..;out=..") or GroupedGemmProblem's
    ("grouped1;g=..;n=..;k=..;rows=..;layout=..;a=..;d=..;...") as a dict; {} when none."""
    parts = text.split(";")
    ops = {"gemm1": "gemm", "softmax1": "softmax", "grouped1": "grouped"}
    if not parts or parts[0] not in ops:
        return {}
    out = {"op": ops[parts[0]]}
    for part in parts[1:]:
        k, _, v = part.partition("=")
        out[k] = v
    return out


def _cache_entry(e: dict, source: str, where: str, version: int) -> Problem:
    canon = parse_canonical(str(_need(e, "problem", where)))
    results = _need(e, "results", where)
    if not isinstance(results, list):
        raise ReportError(f"{where}.results: must be an array")
    if canon.get("op") == "softmax":
        p = Problem(source=source, label=f"softmax {canon.get('rows')}x{canon.get('cols')} {canon.get('in')}",
                    op="softmax", dtype=str(canon.get("in")))
    elif canon.get("op") == "grouped":
        try:
            g, n, k, rows = int(canon["g"]), int(canon["n"]), int(canon["k"]), int(canon["rows"])
        except (KeyError, ValueError):
            raise ReportError(f"{where}.problem: '{e['problem']}' has no valid g, n, k, rows") from None
        a = canon.get("a", "bf16")
        fam = family(a, canon.get("scale", "none"))
        p = Problem(source=source, label=f"grouped {g}x{n}x{k} rows/group {rows} {canon.get('layout')} {fam}",
                    op="grouped", dtype=fam, m=g * rows, n=n, k=k, flops=2.0 * g * rows * n * k)
    elif canon.get("op") == "gemm":
        try:
            m, n, k = int(canon["m"]), int(canon["n"]), int(canon["k"])
        except (KeyError, ValueError):
            raise ReportError(f"{where}.problem: '{e['problem']}' has no valid m, n, k") from None
        a = canon.get("a", "bf16").split("/")[0]
        d = canon.get("d", "bf16").split("/")[0]
        fam = family(a, canon.get("scale", "none"))
        p = Problem(source=source, label=f"{m}x{n}x{k} {fam}", op="gemm", dtype=fam, m=m, n=n, k=k,
                    flops=2.0 * m * n * k, min_bytes=gemm_traffic(m, n, k, a, d))
    else:
        raise ReportError(f"{where}.problem: '{e['problem']}' is not a canonical gemm1 / softmax1 / grouped1 problem")
    for i, r in enumerate(results):
        if version == 1:  # export v1: candidate_id, candidate_name, rel_err -1 when not measured
            r = dict(r, id=r.get("candidate_id", ""), name=r.get("candidate_name", ""))
        p.candidates.append(_candidate(r, f"{where}.results[{i}]"))
    return _finish(p)


def _cache_run(entries: list, path: str, version: int) -> Run:
    run = Run(path=path, kind="cache")
    envs: dict = {}
    tuned = []
    for i, e in enumerate(entries):
        where = f"{path}.entries[{i}]"
        run.problems.append(_cache_entry(e, path, where, version))
        env = str(e.get("environment", ""))
        envs[env] = envs.get(env, 0) + 1
        t = e.get("tuned_at")
        if _num(t):
            tuned.append(float(t))
    for env, n in envs.items():
        pairs = _env_pairs(env)
        run.environment.append(("environment", f"{n} entr{'y' if n == 1 else 'ies'}"))
        run.environment.extend(pairs)
        dev = dict(pairs).get("device")
        if dev and not run.device:
            run.device = dev
    if tuned:
        import datetime as dt
        lo, hi = (dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M") for t in (min(tuned), max(tuned)))
        run.environment.append(("tuned (UTC)", lo if lo == hi else f"{lo} .. {hi}"))
    else:
        run.environment.append(("tuned (UTC)", "not recorded"))
    run.notes.append("a tuning cache records no ceilings, no baselines (torch, Inductor), no command and no "
                     "compile machine: timings are the race's medians")
    return run


def _cache_export(doc: dict, path: str) -> Run:
    version = _need(doc, "version", path)
    if version not in (1, 2):
        raise ReportError(f"{path}.version: {version!r} is not supported (1 or 2)")
    entries = _need(doc, "entries", path)
    if not isinstance(entries, list):
        raise ReportError(f"{path}.entries: must be an array")
    return _cache_run(entries, path, version)


def _sqlite(path: str) -> Run:
    """The tuning cache's SQLite file (src/store/tuning_cache.cpp's schema), opened read-only."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise ReportError(f"{path}: cannot open the tuning cache: {e}") from None
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"choices", "results"} <= tables:
            raise ReportError(f"{path}: not a gemmtune tuning cache (no choices / results tables)")
        cols = ("backend, candidate_id, candidate_name, status, reason, rel_err, median_us, p20_us, p80_us, "
                "samples, compile_s, is_default, winner")
        entries = []
        for key, env, problem, tuned_at in db.execute(
                "SELECT key, environment, problem, tuned_at FROM choices ORDER BY key"):
            results = [dict(zip([c.strip() for c in cols.split(",")], row))
                       for row in db.execute(f"SELECT {cols} FROM results WHERE key = ?", (key,))]
            entries.append({"key": key, "environment": env, "problem": problem, "tuned_at": tuned_at,
                            "results": results})
    except sqlite3.Error as e:
        raise ReportError(f"{path}: reading the tuning cache failed: {e}") from None
    finally:
        db.close()
    return _cache_run(entries, path, 1)  # the SQLite columns are export v1's names


# ---- dispatch ------------------------------------------------------------------------------

def _parse_json_text(text: str, where: str):
    """One JSON document, or JSON lines (a suite's output) as a list of objects."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        out = []
        for i, ln in enumerate(lines):
            try:
                obj = json.loads(ln)
            except json.JSONDecodeError as e:
                raise ReportError(f"{where}: not JSON ({first.msg} at line {first.lineno}) nor JSON lines "
                                  f"(line {i + 1}: {e.msg})") from None
            if not isinstance(obj, dict):
                raise ReportError(f"{where}:{i + 1}: a JSON line must be an object")
            out.append(obj)
        return out


def _kind_of(doc) -> str:
    if isinstance(doc, list):
        if doc and all(isinstance(r, dict) and "backend" in r and "status" in r for r in doc):
            return "suite"
        return ""
    if not isinstance(doc, dict):
        return ""
    if doc.get("format") == "gemmtune-cache":
        return "cache"
    if "rows" in doc and "summary" in doc:
        return "bench"
    if "problem" in doc and "results" in doc:
        return "tune"
    return ""


def _from_doc(doc, path: str) -> Run:
    kind = _kind_of(doc)
    if kind == "bench":
        return _bench(doc, path)
    if kind == "suite":
        return _suite(doc, path)
    if kind == "cache":
        return _cache_export(doc, path)
    if kind == "tune":
        return _tunes([("", doc)], path)
    raise ReportError(f"{path}: not a bench result, suite output, tune output or tuning-cache export "
                      "(see docs/report.md for the inputs)")


def _archive(data: bytes, path: str) -> list:
    runs, tunes = [], []
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if not member.isfile() or not member.name.endswith((".json", ".json.xz", ".jsonl")):
                    continue
                raw = tar.extractfile(member).read()
                if member.name.endswith(".xz"):
                    raw = lzma.decompress(raw)
                where = f"{path}:{member.name}"
                doc = _parse_json_text(raw.decode("utf-8", errors="replace"), where)
                if _kind_of(doc) == "tune":
                    tunes.append((Path(member.name).name, doc))
                else:
                    runs.append(_from_doc(doc, where))
    except (tarfile.TarError, lzma.LZMAError, EOFError) as e:
        raise ReportError(f"{path}: unreadable archive: {e}") from None
    if tunes:
        runs.append(_tunes(tunes, path))
    if not runs:
        raise ReportError(f"{path}: the archive holds no .json result")
    return runs


def load(path: str) -> list:
    """The runs in the input file `path` (an archive may hold several)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror})") from None
    if data.startswith(b"SQLite format 3\x00"):
        return [_sqlite(path)]
    if data.startswith(b"\xfd7zXZ\x00"):
        try:
            data = lzma.decompress(data)
        except lzma.LZMAError as e:
            raise ReportError(f"{path}: bad xz data: {e}") from None
    elif data[:2] == b"\x1f\x8b" or p.name.endswith((".tgz", ".tar.gz", ".tar")):
        return _archive(data, path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text, an xz file, a tar archive or a SQLite tuning cache") from None
    return [_from_doc(_parse_json_text(text, path), path)]
