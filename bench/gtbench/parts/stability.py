"""stability: a second engine with an empty cache re-tunes every finished suite problem; a different
pick is timed head to head against the first (rows with timing stability_h2h)."""

from __future__ import annotations

import time

from .. import log, warn
from ..gpu import Rotation, input_sets
from ..render import fpct, fratio
from ..rows import result_row
from ..stats import estimate, summarize


def part_stability(run):
    a = run.args
    deadline = run.budget.end() - a.reserve_s
    eng = run.engine(run.cache2)
    log(f"stability: re-tuning {len(run.done)} problems from an empty cache")
    durations = []
    try:
        for p, id1, backend1, rep1 in run.done:
            if not run.budget.fits(deadline, estimate(durations, 1.0)):
                run.skipped["stability"].append(p.label)
                continue
            t0 = time.monotonic()
            e = retune(run, eng, p, id1, backend1, rep1)
            dt = time.monotonic() - t0
            e["wall_s"] = dt
            durations.append(dt)
            run.stability.append(e)
            if e["status"] == "ok" and not e["same"]:
                log(f"stability {p.label}: different pick, second/first {fratio(e.get('ratio'))} "
                    f"({'within' if e.get('within_noise') else 'OUTSIDE'} noise {fpct(e.get('noise'))})")
    finally:
        eng.close()
    if run.skipped["stability"]:
        warn(f"stability: budget reached, {len(run.skipped['stability'])} problems skipped")


def retune(run, eng, p, id1, backend1, rep1):
    """summary.stability.problems[] entry of one problem (first pick id1 of backend1, its report rep1)."""
    a, gpu = run.args, run.gpu
    e = {"label": p.label, "index": p.index, **p.fields(), "first_id": id1}
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
            # The race's final duel in each tune (engine notes "duel: ..."), if it had one.
            e["duel_first_tune"] = [n for n in rep1.get("notes", []) if n.startswith("duel:")]
            e["duel_second_tune"] = [n for n in rep2.get("notes", []) if n.startswith("duel:")]
            k1 = eng.load(p.gt(), backend1, id1)
            xs = input_sets(gpu, p, a.seed + 7919 * p.index, a.input_sets)
            e["input_sets"] = len(xs)
            f1 = Rotation([gpu.gemmtune_fn(k1, p, xj)[0] for xj in xs])
            f2 = Rotation([gpu.gemmtune_fn(k2, p, xj)[0] for xj in xs])
            smp = gpu.time_interleaved({"first": f1, "second": f2}, a.rounds, a.warmup_ms)
            s1, s2 = summarize(smp["first"]), summarize(smp["second"])
            e["first"], e["second"] = s1, s2
            e["ratio"] = s2["median_us"] / s1["median_us"]  # > 1: the second pick is slower
            noise = max(s1["spread"] or 0, s2["spread"] or 0)
            e["noise"] = noise
            e["within_noise"] = abs(e["ratio"] - 1) <= noise
            run.add_rows([result_row(p, backend=backend, candidate=nm, candidate_id=rid, role=f"stability_{tag}",
                                     timing="stability_h2h", times=st, winner=tag == "first", input_sets=len(xs))
                          for tag, st, rid, nm, backend in (("first", s1, id1, e["first_name"], backend1),
                                                            ("second", s2, w2["id"], e["second_name"], w2["backend"]))])
            xs = f1 = f2 = None
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
    return e
