"""coldtune: one problem (--cold-tune-problem), a cold gemmtune tune in a new process (empty tuning
cache and artifact store: every Triton candidate compiled now, compile workers started on demand)
against Inductor max-autotune (its default gemm backends) from a cold cache in this process (after
Inductor's one-time start-up, which is reported apart)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback

from .. import REPO, log, warn
from ..engine import bindings, compile_options
from ..mock_engine import MockEngine
from ..problems import cold_tune_problem
from ..render import fnum
from ..rows import tune_rows
from ..summary import backend_stats, compile_stats

RESULT_TAG = "COLDTUNE_RESULT "


def part_coldtune(run):
    a, gpu = run.args, run.gpu
    p = cold_tune_problem(a)
    res = {"label": p.label, **p.fields(), "backends": a.cold_backends, "status": "ok", "errors": []}
    run.coldtune = res
    deadline = run.budget.end() - a.reserve_s
    est = 30.0 + 2 * a.inductor_triton_estimate_s
    if not run.budget.fits(deadline, est):
        res["status"] = "skipped"
        res["errors"].append(f"not enough budget left (estimate {est:.0f} s)")
        warn(f"coldtune: skipped, not enough budget left (estimate {est:.0f} s)")
        return

    # 1. gemmtune, cold, in a child process (bench/h200.py --cold-tune-child SPEC: cold_tune_child()).
    d = run.tmp / "coldtune"
    d.mkdir(parents=True, exist_ok=True)
    if a.cold_tune_pack:  # a copy of a kernel pack (what a fresh machine with the pack has)
        shutil.copytree(a.cold_tune_pack, d / "artifacts", dirs_exist_ok=True)
        res["artifacts"] = f"a copy of the kernel pack {a.cold_tune_pack}"
    # The cache and the store do not exist yet (unless a pack was copied): empty.
    spec = {"problem": p.gt(), "backends": a.cold_backends, "tune": a.tune, "cache": str(d / "tuning.sqlite"),
            "compile": compile_options(d / "artifacts"), "mock": bool(a.mock)}
    env = os.environ.copy()
    lt = gpu.loaded_cublaslt()
    if lt:  # the same cuBLASLt as this process (and torch)
        env["LD_PRELOAD"] = lt + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    cmd = [sys.executable, str(REPO / "bench" / "h200.py"), "--cold-tune-child", json.dumps(spec)]
    timeout = a.cold_tune_timeout_s
    if not run.budget.unlimited():
        timeout = max(30.0, min(timeout, deadline - time.monotonic() - a.inductor_triton_estimate_s))
    log(f"coldtune: {p.label}: gemmtune ({','.join(a.cold_backends)}) from an empty cache and artifact store, "
        f"in a new process")
    t0 = time.monotonic()
    log_path = run.out / "coldtune-gemmtune.log"
    child = None
    try:
        with open(log_path, "w") as errf:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=errf, text=True, timeout=timeout, env=env)
        rc = r.returncode
        for line in r.stdout.splitlines():
            if line.startswith(RESULT_TAG):
                child = json.loads(line[len(RESULT_TAG):])
    except subprocess.TimeoutExpired:
        rc = "timeout"
    process_s = time.monotonic() - t0
    g = {"process_s": process_s, "rc": rc, "log": log_path.name}
    if child is None or child.get("error"):
        err = (child or {}).get("error") or f"rc={rc}, no result line"
        g["error"] = err
        try:
            g["log_tail"] = log_path.read_text()[-1500:]
        except OSError:
            pass
        res["errors"].append(f"gemmtune cold tune: {err}")
        warn(f"coldtune: gemmtune failed: {err}")
    else:
        rep = child.pop("report", {}) or {}
        results = rep.get("results", [])
        win = next((r for r in results if r.get("winner")), None)
        g.update(child)
        g["seconds"] = child["engine_s"] + child["select_s"]
        g["report_seconds"] = rep.get("seconds")
        g["from_cache"] = rep.get("from_cache")
        g["pick"] = {"backend": win["backend"], "candidate": win["name"], "candidate_id": win["id"],
                     "median_us": win.get("median_us")} if win else None
        g["backends_stats"] = backend_stats(results)
        g["triton_compile"] = compile_stats([r.get("compile_s") for r in results if r.get("backend") == "triton"],
                                            a.compile_hit_s)
        g["notes"] = rep.get("notes", [])
        if rep.get("from_cache"):
            res["errors"].append("the cold tune was answered from a cache: not cold")
        run.add_rows(tune_rows(p, rep, timing="coldtune"))
        log(f"coldtune: gemmtune {g['seconds']:.2f} s (engine start {child['engine_s']:.2f} s + select "
            f"{child['select_s']:.2f} s; process {process_s:.2f} s); {len(results)} candidates; pick "
            f"{(g['pick'] or {}).get('backend')} {(g['pick'] or {}).get('candidate')}")
    res["gemmtune"] = g

    # 2. Inductor max-autotune (its default gemm backends), cold cache, this process.
    ind = run.inductor
    try:
        gpu.empty_cache()
        x = gpu.make_inputs(p, a.seed + 104729)
        ind.init()
        ind.reset()
        fn, compile_s, info = ind.fn(p, [x], a.inductor_mode, fresh_dir=run.inductor_dir("coldtune"),
                                     code_path=run.out / "inductor-code" / f"coldtune-inductor-{p.slug}.py")
        ref = gpu.reference(p, x)
        rel, finite = gpu.check(fn(), ref)
        res["inductor"] = {"seconds": compile_s, "mode": a.inductor_mode, "defaults": ind.defaults(),
                           "init_s": ind.init_s, "rel_err": rel, "finite": finite, **info}
        log(f"coldtune: inductor ({a.inductor_mode}, default gemm backends) {compile_s:.2f} s "
            f"(one-time start-up {fnum(ind.init_s, 1)} s excluded), kernels {info.get('kind')}")
        fn = x = ref = None
    except Exception as e:
        res["errors"].append(f"inductor: {type(e).__name__}: {str(e)[:300]}")
        warn(f"coldtune: inductor failed: {type(e).__name__}: {e}")
        traceback.print_exc()
    # Like for like: each side's one-time start-up (gemmtune: the engine with its compile
    # workers; Inductor: imports, its compile pool and a first small compile) counted on both
    # sides, or on neither. gemmtune is faster when it is in both comparisons. The mixed
    # figure of earlier runs (gemmtune with its engine start vs Inductor without its start-up)
    # is kept as inductor_over_gemmtune_mixed.
    g, ind = res.get("gemmtune") or {}, res.get("inductor") or {}
    gs, it = g.get("seconds"), ind.get("seconds")
    sel, init = g.get("select_s"), ind.get("init_s")
    if gs and it:
        res["inductor_over_gemmtune_mixed"] = it / gs
    if gs and it and sel and init is not None:
        res["with_startup"] = {"gemmtune_s": gs, "inductor_s": init + it}
        res["without_startup"] = {"gemmtune_s": sel, "inductor_s": it}
        res["inductor_over_gemmtune"] = (init + it) / gs
        res["inductor_over_gemmtune_without_startup"] = it / sel
        res["gemmtune_faster"] = gs < init + it and sel < it
    if res["errors"]:
        res["status"] = "error"
    gpu.empty_cache()


def cold_tune_child(spec_json):
    """bench/h200.py --cold-tune-child SPEC, in a new process: creates an engine with SPEC's options
    (the parent gives an empty cache and artifact store) and tunes one problem; prints
    COLDTUNE_RESULT {import_s, engine_s, select_s, report, engine_backends} or {error}."""
    spec = json.loads(spec_json)
    out = {}
    try:
        t0 = time.perf_counter()
        Engine = MockEngine if spec.get("mock") else bindings().Engine
        out["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        eng = Engine(cache_path=spec["cache"], backends=spec["backends"], tune=spec.get("tune"), log_to_stderr=True,
                     compile=spec["compile"])
        out["engine_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        kernel, rep = eng.select(spec["problem"])
        out["select_s"] = time.perf_counter() - t0
        out["report"] = rep
        try:
            out["engine_backends"] = eng.info().get("backends")
        except Exception:
            pass
        kernel.close()
        eng.close()
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    print(RESULT_TAG + json.dumps(out), flush=True)
    return 0 if "error" not in out else 1
