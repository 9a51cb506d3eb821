"""decoder (issue 14, deliver 4): one decoder layer's GEMMs (qkv, o, gate_up, down) per model, m and
dtype (problems.load_decoder_chains), back to back on one stream and captured in one CUDA graph:
gemmtune's picks against the same chain of torch.mm / torch._scaled_mm, and gemmtune's picks with
every GEMM after the first launched with overlap_previous (a programmatic dependent launch where the
kernel supports it: it reads its weights while the previous GEMM finishes), the three graphs
replayed interleaved in the same rounds from a cold L2."""

from __future__ import annotations

import time
import traceback

from .. import log, warn
from ..render import fnum, fpct, fratio
from ..rows import result_row
from ..stats import estimate, summarize
from .stream import memory_bound, stream_us


def part_decoder(run, chains):
    """Every chain that fits the budget (before its end less --reserve-s); each GEMM is tuned by an
    engine on the suite's tuning cache (pass 1), so a problem the suite tuned is a cache hit with the
    suite's pick and only the others are tuned now."""
    a = run.args
    deadline = run.budget.end() - a.reserve_s
    eng = run.engine(run.cache1)
    log(f"decoder: {len(chains)} chains planned ({', '.join(a.decoder_model_list)}; m {a.decoder_m_values})")
    durations = []
    try:
        for i, ch in enumerate(chains):
            if not run.budget.fits(deadline, estimate(durations, 8.0)):
                run.skipped["decoder"].append(ch.label)
                continue
            t0 = time.monotonic()
            s = decoder_chain(run, eng, ch)
            s["wall_s"] = time.monotonic() - t0
            durations.append(s["wall_s"])
            run.decoder.append(s)
            log(f"[decoder {i + 1}/{len(chains)}] {ch.label}: " + (
                f"gemmtune {fnum(s['gemmtune']['median_us'])} us vs torch {fnum(s['torch']['median_us'])} us: "
                f"x{fratio(s['speedup_vs_torch'])} (noise {fpct(s['noise'])}), stream {fnum(s['stream_us'])} us"
                if s.get("speedup_vs_torch") else f"{s['status'].upper()} {'; '.join(s['errors'])[:200]}"))
    finally:
        eng.close()
    if run.skipped["decoder"]:
        warn(f"decoder: budget reached, {len(run.skipped['decoder'])} chains skipped (see summary.coverage)")


def tune_gemm(eng, p):
    """(kernel, {layer, n, k, pick_backend, candidate, candidate_id, tune_median_us, from_cache, select_s,
    n_candidates, n_wrong}): gemmtune's pick for one GEMM of a chain."""
    t0 = time.monotonic()
    kernel, rep = eng.select(p.gt())
    results = rep.get("results", [])
    win = next((r for r in results if r.get("winner")), None)
    if win is None:
        kernel.close()
        raise RuntimeError(f"{p.layer}: the report has no winner")
    return kernel, {"layer": p.layer, "n": p.n, "k": p.k, "pick_backend": win["backend"], "candidate": win["name"],
                    "candidate_id": win["id"], "tune_median_us": win.get("median_us"),
                    "from_cache": rep.get("from_cache"), "select_s": time.monotonic() - t0,
                    "n_candidates": len(results), "n_wrong": sum(r["status"] == "wrong" for r in results)}


def decoder_chain(run, eng, ch):
    """One chain: its summary (summary.decoder.chains[]); its two rows and any mismatch go to run."""
    a, gpu = run.args, run.gpu
    s = {"label": ch.label, "index": ch.index, **ch.fields(), "flops": ch.flops, "min_bytes": ch.min_bytes,
         "status": "ok", "errors": [], "gemms": []}
    per = [stream_us(run.stream, p.min_bytes) if memory_bound(run.ceilings, p) else None for p in ch.gemms]
    s["stream_us"] = sum(per) if all(per) else None
    kernels = []
    try:
        gpu.empty_cache()
        for p, su in zip(ch.gemms, per):
            k, g = tune_gemm(eng, p)
            kernels.append(k)
            s["gemms"].append({**g, "stream_us": su})
        xs = [gpu.make_inputs(p, a.seed + 7919 * p.index) for p in ch.gemms]
        gt = {nm: gpu.capture([gpu.gemmtune_call(k, p, x, overlap=overlap and i > 0)
                               for i, (k, p, x) in enumerate(zip(kernels, ch.gemms, xs))])
              for nm, overlap in (("gemmtune", False), ("gemmtune_pdl", True))}
        th_replay, th_outs = gpu.capture([gpu.baseline_call(p, x) for p, x in zip(ch.gemms, xs)])
        checks = check_chain(run, ch, xs, gt, th_replay, th_outs)
        samples = gpu.time_interleaved({"gemmtune": gt["gemmtune"][0], "gemmtune_pdl": gt["gemmtune_pdl"][0],
                                        "torch": th_replay}, a.rounds, a.warmup_ms)
        host_us = dict(getattr(gpu, "last_host_us", {}))
        picks = ("; ".join(f"{g['layer']}: {g['pick_backend']} {g['candidate']}" for g in s["gemms"]),
                 ",".join(f"{g['pick_backend']}:{g['candidate_id']}" for g in s["gemms"]))
        ids = {"gemmtune": ("gemmtune", *picks, "pick"), "gemmtune_pdl": ("gemmtune", *picks, "pick_overlapped"),
               "torch": (ch.baseline, ch.baseline, "", "baseline")}
        rows = []
        for nm, smp in samples.items():
            st = summarize(smp)
            backend, cand, cid, role = ids[nm]
            c = checks[nm]
            rows.append(result_row(
                ch, backend=backend, candidate=cand, candidate_id=cid, role=role, contender=nm, timing="decoder_graph",
                times=st, rel_err=c["rel_err"], rel_err_vs_torch=c.get("rel_err_vs_torch"), correct=c["correct"],
                winner=nm == "gemmtune", memory_bound=s["stream_us"] is not None, stream_us=s["stream_us"],
                host_us=host_us.get(nm), input_sets=1, graph=True))
            s[nm] = {"backend": backend, "candidate": cand, "median_us": st["median_us"], "p20_us": st["p20_us"],
                     "p80_us": st["p80_us"], "spread": st["spread"], **ch.throughput(st["median_us"]), **c}
        run.add_rows(rows)
        chain_ratios(s)
        if not all(c["correct"] for c in checks.values()):
            s["status"] = "mismatch"
    except Exception as e:
        s["status"] = "error"
        s["errors"].append(f"{type(e).__name__}: {e}")
        warn(f"{ch.label}: {type(e).__name__}: {e}")
        if not isinstance(e, run.GemmtuneError):
            traceback.print_exc()
    finally:
        for k in kernels:
            try:
                k.close()
            except Exception:
                pass
    return s


def check_chain(run, ch, xs, gt, th_replay, th_outs):
    """{<each of gt>, torch: {rel_err, rel_err_vs_torch (gemmtune's), correct}}: one replay of each
    graph (gt: name -> (replay, outputs) of gemmtune's graphs, which share their output buffers:
    each is poisoned, replayed and checked in turn), every GEMM's output against the fp32 reference
    (and gemmtune's against torch's); rel_err the worst GEMM's (NaN if any is NaN); a mismatch is
    reported per GEMM."""
    a, gpu = run.args, run.gpu
    th_replay()
    gpu.sync()
    refs = [gpu.reference(p, x) for p, x in zip(ch.gemms, xs)]
    worst = lambda v: float("nan") if any(e != e for e in v) else max(v)  # noqa: E731

    def check(nm, outs, vs_torch):
        errs, vss, correct = [], [], True
        for p, out, o, ref in zip(ch.gemms, outs, th_outs, refs):
            rel, finite = gpu.check(out, ref)
            vs = gpu.rel_diff(out, o) if vs_torch else None
            errs.append(rel)
            if vs is not None:
                vss.append(vs)
            if not (finite and rel <= a.tol and (vs is None or vs <= a.tol)):
                correct = False
                msg = (f"MISMATCH {ch.label} {nm} {p.layer} (in the graph): rel_err {rel:.3g} vs fp32 reference, "
                       f"{'-' if vs is None else f'{vs:.3g}'} vs {p.baseline}, finite={finite} (tol {a.tol})")
                run.mismatches.append(msg)
                warn(msg)
        out = {"rel_err": worst(errs), "correct": correct}
        if vs_torch:
            out["rel_err_vs_torch"] = worst(vss)
        return out

    checks = {}
    for nm, (replay, outs) in gt.items():
        for d in outs:
            gpu.poison(d)
        replay()
        gpu.sync()
        checks[nm] = check(nm, outs, True)
    checks["torch"] = check("torch", th_outs, False)
    del refs
    return checks


def chain_ratios(s):
    """speedup_vs_torch (torch's median / gemmtune's), noise (the larger spread), faster / slower
    beyond noise, and both medians over the chain's streaming time, into s."""
    gm, tm = s["gemmtune"]["median_us"], s["torch"]["median_us"]
    pm = s.get("gemmtune_pdl", {}).get("median_us")
    s["speedup_pdl_vs_torch"] = tm / pm if (pm and tm) else None
    s["speedup_pdl_vs_plain"] = gm / pm if (pm and gm) else None
    noise = max(s["gemmtune"]["spread"] or 0, s["torch"]["spread"] or 0)
    su = s.get("stream_us")
    s.update({"speedup_vs_torch": tm / gm if (gm and tm) else None, "noise": noise,
              "faster_beyond_noise": bool(gm and tm and gm * (1 + noise) < tm),
              "slower_beyond_noise": bool(gm and tm and tm * (1 + noise) < gm),
              "gemmtune_over_stream": gm / su if (gm and su) else None,
              "torch_over_stream": tm / su if (tm and su) else None})
