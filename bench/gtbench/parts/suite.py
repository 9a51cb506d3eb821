"""suite: every planned problem (problems.load_problems) tuned by gemmtune from an empty cache, then
its pick, cuBLASLt's default, each backend's best (Triton's; CUTLASS's, cuBLASLt's and CuTe DSL's
when CUTLASS or CuTe DSL raced), torch and, on the Inductor subsets, torch.compile timed side by
side; every output checked."""

from __future__ import annotations

import time
import traceback

from .. import T_START, log, warn
from ..console import print_problem
from ..gpu import Rotation, first_fn, input_sets
from ..problems import Problem
from ..rows import result_row, tune_rows
from ..stats import estimate, summarize
from ..summary import backend_stats, problem_ratios
from .ceilings import roof_us
from .stream import memory_bound, stream_us


def part_suite(run, problems):
    a = run.args
    deadline = run.budget.end() - a.reserve_s
    if "stability" in a.parts and not run.budget.unlimited():
        deadline = T_START + (a.budget_s - a.reserve_s) * a.suite_share
    if "decoder" in a.parts:
        deadline -= a.decoder_s
    eng = run.engine(run.cache1)
    run.env["engine"] = eng.info()
    log(f"suite: {len(problems)} problems planned ({sum(p.inductor for p in problems)} with Inductor, "
        f"{sum(p.inductor_triton for p in problems)} with Inductor-Triton); engine "
        f"{run.env['engine'].get('version')}, {run.env['engine']['device'].get('str')}; backends "
        + ", ".join(f"{b.get('name')}: {b.get('status')}" for b in run.env['engine'].get('backends', [])))
    for k, v in getattr(a, "subset_unmatched", {}).items():
        if v:
            log(f"suite: {k} subset entries that name no planned problem (dtype not in --dtypes?): {', '.join(v)}")
    durations, extra_inductor, extra_itriton = [], [], []
    try:
        for p in problems:
            est = (estimate(durations, 1.5) + (estimate(extra_inductor, 10.0) if p.inductor else 0)
                   + (estimate(extra_itriton, a.inductor_triton_estimate_s) if p.inductor_triton else 0))
            if not run.budget.fits(deadline, est):
                run.skipped["suite"].append(p.label)
                continue
            t0 = time.monotonic()
            summary = suite_problem(run, eng, p)
            dt = time.monotonic() - t0
            summary["wall_s"] = dt
            extra = 0.0  # Inductor's compiles, estimated apart
            if p.inductor and summary.get("inductor"):
                extra_inductor.append(summary["inductor"].get("compile_s") or 0)
                extra += summary["inductor"].get("compile_s") or 0
            if p.inductor_triton and summary.get("inductor_triton"):
                extra_itriton.append(summary["inductor_triton"].get("compile_s") or 0)
                extra += summary["inductor_triton"].get("compile_s") or 0
            durations.append(max(dt - extra, 0.1) if extra else dt)
            run.problems.append(summary)
            print_problem(len(run.problems), len(problems), summary)
    finally:
        eng.close()
    if run.skipped["suite"]:
        warn(f"suite: budget reached, {len(run.skipped['suite'])} problems skipped (see summary.coverage)")


def best_of(results, backend):
    """The backend's correct (ok or pruned) timed candidate with the lowest tune median, or None.
    Pruned candidates were verified and timed too (only dropped from later rounds): on problems
    where another backend leads by > prune_ratio, a backend's best is one of them."""
    return min((r for r in results if r.get("backend") == backend and r.get("status") in ("ok", "pruned")
                and (r.get("median_us") or 0) > 0), key=lambda r: r["median_us"], default=None)


def contender(r, role, out, **more):
    """A gemmtune contender's fields from its report result r (its kernel's output buffer out)."""
    return {"backend": r["backend"], "candidate": r["name"], "candidate_id": r["id"], "role": role,
            "winner": bool(r.get("winner")), "default": bool(r.get("is_default")), "out": out,
            "compile_s": r.get("compile_s"), **more}


def suite_problem(run, eng, p):
    """One problem: its per-problem summary (summary.problems[]); rows and mismatches go to run."""
    a, gpu, ind = run.args, run.gpu, run.inductor
    s = {"label": p.label, "index": p.index, **p.fields(), "flops": p.flops, "min_bytes": p.min_bytes,
         "roof_us": roof_us(run.ceilings, p), "memory_bound": memory_bound(run.ceilings, p),
         "inductor_subset": p.inductor, "inductor_triton_subset": p.inductor_triton,
         "status": "ok", "errors": [], "notes": []}
    s["stream_us"] = stream_us(run.stream, p.min_bytes) if s["memory_bound"] else None
    kernel = dkernel = tkernel = twkernel = None
    bests = {}  # backend -> (its best result, its kernel): CUTLASS's and cuBLASLt's best when CUTLASS raced
    x = xs = ref = None
    try:
        gpu.empty_cache()
        t0 = time.monotonic()
        try:
            kernel, rep = eng.select(p.gt())
        except run.GemmtuneError as e:
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
                     "compile_s_total": sum(r.get("compile_s") or 0 for r in results),
                     "backends": backend_stats(results),
                     "triton_compile_s_total": sum(r.get("compile_s") or 0 for r in results if r.get("backend") == "triton")}
        if rep.get("from_cache"):
            s["errors"].append("pass 1 answered from the cache: nothing was tuned (stale cache file?)")
        run.add_rows(tune_rows(p, rep))
        if win is None:
            raise RuntimeError("the report has no winner")
        s["pick_backend"] = win["backend"]
        if dflt is not None and dflt["status"] in ("ok", "pruned"):
            dkernel = eng.load(p.gt(), dflt["backend"], dflt["id"])
        elif dflt is not None:
            s["errors"].append(f"cuBLASLt's default candidate is {dflt['status']}: {dflt.get('reason', '')}")
        elif not any(r.get("backend") == "cublaslt" for r in results):
            s["notes"].append("cuBLASLt has no candidate for this problem: no default to compare with")
        else:
            s["errors"].append("the report has no default candidate")
        tri = best_of(results, "triton")
        if tri is not None:
            tkernel = eng.load(p.gt(), "triton", tri["id"])
        elif any(r.get("backend") == "triton" for r in results):
            s["errors"].append("Triton has candidates but none is correct and timed")
        # When CUTLASS raced: its best and cuBLASLt's best, timed side by side like the rest (issue 4
        # compares the two); likewise CuTe DSL's best when it raced (issue 5: vs CUTLASS's best).
        # Block scales (issue 15): cuBLASLt's best too, beside Triton's best.
        if any(r.get("backend") in ("cutlass", "cutedsl") for r in results) or p.scale == "block":
            for b in ("cutlass", "cublaslt", "cutedsl"):
                if not any(r.get("backend") == b for r in results):
                    continue
                bb = best_of(results, b)
                if bb is not None:
                    bests[b] = (bb, eng.load(p.gt(), b, bb["id"]))
                else:
                    s["errors"].append(f"{b} has candidates but none is correct and timed")

        # Every contender rotates over the input sets (as the race does), except Inductor in
        # a mode with CUDA graphs (set 0 only: see TorchInductor.fn). Correctness: on set 0.
        xs = input_sets(gpu, p, a.seed + 7919 * p.index, a.input_sets)
        x = xs[0]
        s["input_sets"] = len(xs)

        def rotation(kern):  # (fn over every set, set 0's output)
            pairs = [gpu.gemmtune_fn(kern, p, xj) for xj in xs]
            return Rotation([f for f, _ in pairs]), pairs[0][1]

        # name -> fn, and its row's fields (out: gemmtune's output buffer of set 0, poisoned before the check)
        fns, meta = {}, {}
        fns["pick"], d_pick = rotation(kernel)
        meta["pick"] = contender(win, "pick", d_pick, winner=True)
        if dkernel is not None:
            fns["default"], d_def = rotation(dkernel)
            meta["default"] = contender(dflt, "default", d_def, default=True)
        if tkernel is not None:
            fns["triton_best"], d_tri = rotation(tkernel)
            meta["triton_best"] = contender(tri, "backend_best", d_tri, backend_best=True)
        for b, (bb, bk) in bests.items():
            fns[f"{b}_best"], d_b = rotation(bk)
            meta[f"{b}_best"] = contender(bb, "backend_best", d_b, backend_best=True)
        fns["torch"] = Rotation([gpu.baseline_fn(p, xj) for xj in xs])
        meta["torch"] = {"backend": p.baseline, "candidate": p.baseline, "candidate_id": "", "role": "baseline",
                         "winner": False, "default": False, "out": None, "compile_s": None}
        tw = None  # block scales: the tensorwise problem of the same shape, its pick timed alongside
        if p.scale == "block":
            try:
                tw = Problem(p.model, p.layer, p.phase, p.m, p.n, p.k, "fp8")
                twkernel, twrep = eng.select(tw.gt())
                twin = next(r for r in twrep.get("results", []) if r.get("winner"))
                tw.xs = input_sets(gpu, tw, a.seed + 7919 * p.index + 17, a.input_sets)
                pairs = [gpu.gemmtune_fn(twkernel, tw, xj) for xj in tw.xs]
                fns["tensorwise_pick"] = Rotation([f for f, _ in pairs])
                meta["tensorwise_pick"] = contender(twin, "tensorwise_pick", pairs[0][1])
                if gpu_note := getattr(gpu, "block_baseline_note", ""):
                    s["notes"].append(f"block baseline: {p.baseline} ({gpu_note})")
            except Exception as e:
                s["errors"].append(f"tensorwise pick: {type(e).__name__}: {str(e)[:300]}")
                tw = None
        if p.inductor or p.inductor_triton:
            ind.reset()  # the previous problem's compiled functions and graph pools
        if p.inductor:
            try:
                ifn, compile_s, info = ind.fn(p, xs, a.inductor_mode, fresh_dir=run.inductor_dir("max-autotune"),
                                              code_path=run.out / "inductor-code" / f"inductor-{p.slug}.py")
                fns["inductor"] = ifn
                meta["inductor"] = {"backend": "inductor", "candidate": a.inductor_mode, "candidate_id": "",
                                    "role": "baseline", "winner": False, "default": False, "out": None,
                                    "compile_s": compile_s, "inductor": info}
            except Exception as e:
                s["errors"].append(f"inductor: {type(e).__name__}: {str(e)[:300]}")
                warn(f"{p.label}: inductor: {type(e).__name__}: {str(e)[:300]}")
        if p.inductor_triton:
            try:
                ifn, compile_s, info = ind.fn(p, xs, a.inductor_triton_mode, backends="TRITON",
                                              extra_options=a.itriton_options, fresh_dir=run.inductor_dir("triton"),
                                              code_path=run.out / "inductor-code" / f"inductor-triton-{p.slug}.py")
                fns["inductor_triton"] = ifn
                desc = info.get("config") or ",".join(info.get("kernels", [])[:3])
                meta["inductor_triton"] = {"backend": "inductor-triton",
                                           "candidate": f"{a.inductor_triton_mode} TRITON: {desc}".strip(),
                                           "candidate_id": "", "role": "baseline", "winner": False, "default": False,
                                           "out": None, "compile_s": compile_s, "inductor": info}
                if info.get("kind") in ("aten", "mixed"):
                    msg = (f"inductor-triton: the generated code calls an ATen GEMM ({', '.join(info.get('extern', []))}): "
                           f"not Triton only")
                    s["errors"].append(msg)
                    warn(f"{p.label}: {msg}")
            except Exception as e:
                s["errors"].append(f"inductor-triton: {type(e).__name__}: {str(e)[:300]}")
                warn(f"{p.label}: inductor-triton: {type(e).__name__}: {str(e)[:300]}")

        # Correctness: every contender vs the fp32 reference; gemmtune's also vs torch's output.
        ref = gpu.reference(p, x)
        try:
            torch_out = first_fn(fns["torch"])()
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
                out = torch_out if nm == "torch" else first_fn(fns[nm])()
                if nm == "tensorwise_pick":  # another problem: its own reference, no torch output
                    rel, finite = gpu.check(out, gpu.reference(tw, tw.xs[0]))
                    vs = None
                else:
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
                run.mismatches.append(msg)
                warn(msg)
        del torch_out
        ref = None

        # Inductor's Python wrapper (guards, launcher) costs more host time per call than a
        # ctypes launch: a longer spin keeps it outside the timed region (same for everyone).
        # Likewise a Python-launched Triton baseline (fp8-block without torch's block scales).
        spin_scale = 3 if ("inductor" in fns or "inductor_triton" in fns or p.scale == "block") else 1
        samples = gpu.time_interleaved(fns, a.rounds, a.warmup_ms, spin_scale=spin_scale)
        host_us, spin_us = dict(getattr(gpu, "last_host_us", {})), getattr(gpu, "last_spin_us", None)
        s["spin_us"] = spin_us
        for nm, h in host_us.items():
            if spin_us and h > 0.8 * spin_us:
                msg = (f"{nm}: host time per call {h:.0f} us vs a GPU spin of about {spin_us:.0f} us before each "
                       f"sample: its launch overhead may be inside its timing")
                s["errors"].append(msg)
                warn(f"{p.label}: {msg}")
        rows = []
        for nm, smp in samples.items():
            st = summarize(smp)
            m, c = meta[nm], checks.get(nm, {})
            extra = {"inductor": {k: m["inductor"].get(k) for k in ("kind", "kernels", "extern", "config", "code_file")}
                     } if m.get("inductor") else {}
            rows.append(result_row(
                p, backend=m["backend"], candidate=m["candidate"], candidate_id=m["candidate_id"], role=m["role"],
                contender=nm, timing="side_by_side", times=st, rel_err=c.get("rel_err"),
                rel_err_vs_torch=c.get("rel_err_vs_torch"), compile_s=m["compile_s"], correct=c.get("correct"),
                winner=m["winner"], default=m["default"], backend_best=bool(m.get("backend_best")),
                host_us=host_us.get(nm), input_sets=len(xs) if isinstance(fns.get(nm), Rotation) else 1,
                memory_bound=s["memory_bound"], stream_us=s["stream_us"], **extra))
            s[nm] = {"backend": m["backend"], "candidate": m["candidate"], "candidate_id": m["candidate_id"],
                     "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                     "spread": st["spread"], **p.throughput(st["median_us"]),
                     "rel_err": c.get("rel_err"), "rel_err_vs_torch": c.get("rel_err_vs_torch"),
                     "correct": c.get("correct"), "compile_s": m["compile_s"], "host_us": host_us.get(nm)}
            if m.get("inductor"):
                s[nm]["inductor"] = m["inductor"]
        run.add_rows(rows)
        if "pick" not in s:
            raise RuntimeError("gemmtune's pick could not be checked or timed: " + "; ".join(s["errors"]))
        s["pick"]["tune_median_us"] = win.get("median_us")
        if "default" in s:
            s["default"]["tune_median_us"] = dflt.get("median_us")
        if "triton_best" in s:
            s["triton_best"]["tune_median_us"] = tri.get("median_us")
        for b, (bb, _) in bests.items():
            if f"{b}_best" in s:
                s[f"{b}_best"]["tune_median_us"] = bb.get("median_us")
        s["same_kernel"] = dflt is not None and dflt["id"] == win["id"]
        problem_ratios(s)
        run.done.append((p, win["id"], win["backend"], rep))
        if any(not c["correct"] for c in checks.values()):
            s["status"] = "mismatch"
    except Exception as e:
        s["status"] = "error"
        s["errors"].append(f"{type(e).__name__}: {e}")
        warn(f"{p.label}: {type(e).__name__}: {e}")
        if not isinstance(e, run.GemmtuneError):
            traceback.print_exc()
    finally:
        for k in (kernel, dkernel, tkernel, twkernel, *(bk for _, bk in bests.values())):
            if k is not None:
                try:
                    k.close()
                except Exception:
                    pass
        x = xs = ref = tw = None
    return s
