"""decoder (issue 14, deliver 4): one decoder layer's GEMMs (qkv, o, gate_up, down) per model, m and
dtype (problems.load_decoder_chains), back to back on one stream and captured in one CUDA graph:
gemmtune's picks against the same chain of torch.mm / torch._scaled_mm, both graphs replayed
interleaved in the same rounds from a cold L2."""

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
        gt_replay, gt_outs = gpu.capture([gpu.gemmtune_call(k, p, x) for k, p, x in zip(kernels, ch.gemms, xs)])
        th_replay, th_outs = gpu.capture([gpu.baseline_call(p, x) for p, x in zip(ch.gemms, xs)])
        checks = check_chain(run, ch, xs, gt_replay, gt_outs, th_replay, th_outs)
        samples = gpu.time_interleaved({"gemmtune": gt_replay, "torch": th_replay}, a.rounds, a.warmup_ms)
        host_us = dict(getattr(gpu, "last_host_us", {}))
        ids = {"gemmtune": ("gemmtune", "; ".join(f"{g['layer']}: {g['pick_backend']} {g['candidate']}" for g in s["gemms"]),
                            ",".join(f"{g['pick_backend']}:{g['candidate_id']}" for g in s["gemms"]), "pick"),
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


def check_chain(run, ch, xs, gt_replay, gt_outs, th_replay, th_outs):
    """{gemmtune, torch: {rel_err, rel_err_vs_torch, correct}}: one replay of each graph (gemmtune's
    outputs poisoned first), every GEMM's output against the fp32 reference (and gemmtune's against
    torch's); rel_err the worst GEMM's (NaN if any is NaN); a mismatch is reported per GEMM."""
    a, gpu = run.args, run.gpu
    for d in gt_outs:
        gpu.poison(d)
    gt_replay()
    th_replay()
    gpu.sync()
    errs = {"gemmtune": [], "torch": []}
    vs_torch, correct = [], {"gemmtune": True, "torch": True}
    for p, x, d, o in zip(ch.gemms, xs, gt_outs, th_outs):
        ref = gpu.reference(p, x)
        for nm, out in (("gemmtune", d), ("torch", o)):
            rel, finite = gpu.check(out, ref)
            vs = gpu.rel_diff(out, o) if nm == "gemmtune" else None
            errs[nm].append(rel)
            if vs is not None:
                vs_torch.append(vs)
            if not (finite and rel <= a.tol and (vs is None or vs <= a.tol)):
                correct[nm] = False
                msg = (f"MISMATCH {ch.label} {nm} {p.layer} (in the graph): rel_err {rel:.3g} vs fp32 reference, "
                       f"{'-' if vs is None else f'{vs:.3g}'} vs {p.baseline}, finite={finite} (tol {a.tol})")
                run.mismatches.append(msg)
                warn(msg)
        del ref
    worst = lambda v: float("nan") if any(e != e for e in v) else max(v)  # noqa: E731
    return {"gemmtune": {"rel_err": worst(errs["gemmtune"]), "rel_err_vs_torch": worst(vs_torch),
                         "correct": correct["gemmtune"]},
            "torch": {"rel_err": worst(errs["torch"]), "correct": correct["torch"]}}


def chain_ratios(s):
    """speedup_vs_torch (torch's median / gemmtune's), noise (the larger spread), faster / slower
    beyond noise, and both medians over the chain's streaming time, into s."""
    gm, tm = s["gemmtune"]["median_us"], s["torch"]["median_us"]
    noise = max(s["gemmtune"]["spread"] or 0, s["torch"]["spread"] or 0)
    su = s.get("stream_us")
    s.update({"speedup_vs_torch": tm / gm if (gm and tm) else None, "noise": noise,
              "faster_beyond_noise": bool(gm and tm and gm * (1 + noise) < tm),
              "slower_beyond_noise": bool(gm and tm and tm * (1 + noise) < gm),
              "gemmtune_over_stream": gm / su if (gm and su) else None,
              "torch_over_stream": tm / su if (tm and su) else None})
