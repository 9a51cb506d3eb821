"""summary{} of a GEMM run from its raw results: one function (build_summary) for one run and for the
shards of one run merged, so every aggregate is computed over all problems the same way; the
statistics the parts keep (backends, compile times, cache-hit select times). Softmax:
softmax_summary."""

from __future__ import annotations

import statistics

from .stats import geomean, quantile

INDUCTOR_TRITON_TARGET = 0.98   # the bar: Triton's best >= 0.98x Inductor-Triton's pick (geomean)


def backend_stats(results):
    """{backend: {n, ok, pruned, wrong, failed}} over a report's results."""
    out = {}
    for r in results:
        b = out.setdefault(r.get("backend", "?"), {"n": 0, "ok": 0, "pruned": 0, "wrong": 0, "failed": 0})
        b["n"] += 1
        if r.get("status") in b:
            b[r["status"]] += 1
    return out


def compile_stats(values, hit_s):
    """Compile times (s) of Triton candidates: all, and those over hit_s (compiled now, not
    artifact-store hits)."""
    vals = sorted(v for v in values if v is not None)
    comp = [v for v in vals if v >= hit_s]
    out = {"n": len(vals), "median_s": quantile(vals, 0.5) if vals else None, "max_s": vals[-1] if vals else None,
           "n_compiled": len(comp), "store_hit_below_s": hit_s}
    if comp:
        out.update({"compiled_median_s": quantile(comp, 0.5), "compiled_p90_s": quantile(comp, 0.9),
                    "compiled_max_s": comp[-1], "compiled_total_s": sum(comp)})
    return out


def select_stats(per):
    """Cache-hit select times: per = [{label, select_ms, from_cache, same_pick} or {label, error}]."""
    ok = [e for e in per if "select_ms" in e]
    ms = sorted(e["select_ms"] for e in ok)
    out = {"n": len(ok), "n_errors": len(per) - len(ok), "n_from_cache": sum(bool(e.get("from_cache")) for e in ok),
           "n_under_1ms": sum(x < 1.0 for x in ms),
           "n_same_pick": sum(e.get("same_pick") is True for e in ok),
           "n_different_pick": sum(e.get("same_pick") is False for e in ok)}
    if ms:
        out.update({"median_ms": quantile(ms, 0.5), "p90_ms": quantile(ms, 0.9), "max_ms": ms[-1],
                    "max_ms_after_first": max((e["select_ms"] for e in ok[1:]), default=None)})
    return out


def cli_select_stats(per, runs, lt):
    """The cachehit part's `cli` entry: select_stats of the CLI's answers, its runs, and why it answered
    nothing or not from the cache."""
    out = select_stats(per)
    out.update({"problems": per, "runs": runs, "cublaslt_preload": lt})
    if out["n"] and out["n_from_cache"] < out["n"]:
        out["warning"] = ("some problems were not answered from the cache: environment mismatch between "
                          "this process and the CLI (cuBLASLt, driver or gemmtune version)?")
    if not out["n"]:
        out["error"] = "the CLI answered nothing: " + "; ".join(f"rc={r['rc']}: {r['stderr_tail'][-400:]}" for r in runs)
    return out


def problem_ratios(s):
    """A suite problem's ratios (other's median / the pick's: > 1 = the pick faster), noise and share
    of the roof, from its side-by-side medians, into s."""
    pick = s.get("pick") or {}
    pm = pick.get("median_us")

    def sp(other):
        o = s.get(other) or {}
        om = o.get("median_us")
        return om / pm if (pm and om) else None
    s["speedup_vs_default"] = sp("default")
    s["speedup_vs_torch"] = sp("torch")
    s["speedup_vs_inductor"] = sp("inductor")
    s["speedup_vs_triton_best"] = sp("triton_best")
    # Block scales: the pick's time over the tensorwise pick's on the same shape (issue 15: <= 1.10).
    twm = (s.get("tensorwise_pick") or {}).get("median_us")
    s["block_over_tensorwise"] = pm / twm if (pm and twm) else None
    s["speedup_vs_inductor_triton"] = sp("inductor_triton")
    # Triton's best against the others (other's median / Triton best's median: > 1 = Triton faster).
    tb = (s.get("triton_best") or {}).get("median_us")
    for other in ("inductor_triton", "torch", "default"):
        om = (s.get(other) or {}).get("median_us")
        s[f"triton_best_vs_{other}"] = om / tb if (tb and om) else None
    # CUTLASS's best against cuBLASLt's best (> 1 = CUTLASS faster; issue 4: >= 1/1.05 on 70% at m >= 2048).
    cu, lt = (s.get("cutlass_best") or {}).get("median_us"), (s.get("cublaslt_best") or {}).get("median_us")
    s["cutlass_best_vs_cublaslt_best"] = lt / cu if (cu and lt) else None
    # CuTe DSL's best against CUTLASS's best (> 1 = CuTe DSL faster; issue 5: >= 1/1.05 on 70% at m >= 2048).
    cd = (s.get("cutedsl_best") or {}).get("median_us")
    s["cutedsl_best_vs_cutlass_best"] = cu / cd if (cu and cd) else None
    if tb and (s.get("inductor_triton") or {}).get("median_us"):
        s["triton_noise"] = max(s["triton_best"].get("spread") or 0, s["inductor_triton"].get("spread") or 0)
    d = s.get("default")
    if pm and d and d.get("median_us"):
        noise = max(pick.get("spread") or 0, d.get("spread") or 0)
        s["noise"] = noise
        s["pick_within_noise_of_default"] = pm <= d["median_us"] * (1 + noise)
        s["pick_faster_beyond_noise"] = pm * (1 + noise) < d["median_us"]
    if pm and s.get("roof_us"):
        s["fraction_of_roof"] = s["roof_us"] / pm
    # The stream ceiling (memory-bound problems): the median over the time to stream min_bytes once.
    su, tm = s.get("stream_us"), (s.get("torch") or {}).get("median_us")
    s["pick_over_stream"] = pm / su if (pm and su) else None
    s["torch_over_stream"] = tm / su if (tm and su) else None


def build_summary(raw, doc):
    """summary{} of a run from its raw results (raw: Run.raw(), or raw_results() of the shards' summaries
    concatenated by merge_docs()) and doc's rows and environment: one run and a merge of shards
    compute every aggregate the same way."""
    probs = [s for s in raw["problems"] if s.get("status") in ("ok", "mismatch") and s.get("pick")]
    out = {"coverage": {"planned": raw["planned"], "finished": len(probs),
                        "errors": [f"{s['label']}: {'; '.join(s['errors'])}" for s in raw["problems"] if s["status"] == "error"],
                        "skipped_not_supported": [f"{s['label']}: {'; '.join(s['errors'])}" for s in raw["problems"] if s["status"] == "skipped"],
                        "skipped_for_budget": raw["skipped"]},
           "geomean": {}, "by_dtype_m": {}, "pick_vs_default": {}, "inductor": [], "tune": {},
           "problems": raw["problems"]}

    def agg(group):
        g = {"n": len(group),
             "speedup_vs_default": geomean([s.get("speedup_vs_default") for s in group]),
             "speedup_vs_torch": geomean([s.get("speedup_vs_torch") for s in group]),
             "pick_tflops_geomean": geomean([s["pick"].get("tflops") for s in group]),
             "fraction_of_roof_geomean": geomean([s.get("fraction_of_roof") for s in group])}
        ms = [s for s in group if s.get("pick_over_stream")]
        if ms:
            g["n_memory_bound"] = len(ms)
            g["pick_over_stream"] = geomean([s["pick_over_stream"] for s in ms])
            g["torch_over_stream"] = geomean([s.get("torch_over_stream") for s in ms])
        ind = [s for s in group if s.get("speedup_vs_inductor")]
        if ind:
            g["speedup_vs_inductor"] = geomean([s["speedup_vs_inductor"] for s in ind])
            g["n_inductor"] = len(ind)
        tb = [s for s in group if s.get("speedup_vs_triton_best")]
        if tb:
            g["speedup_vs_triton_best"] = geomean([s["speedup_vs_triton_best"] for s in tb])
            g["triton_best_vs_torch"] = geomean([s.get("triton_best_vs_torch") for s in tb])
            g["n_triton_best"] = len(tb)
        it = [s for s in group if s.get("triton_best_vs_inductor_triton")]
        if it:
            g["triton_best_vs_inductor_triton"] = geomean([s["triton_best_vs_inductor_triton"] for s in it])
            g["speedup_vs_inductor_triton"] = geomean([s.get("speedup_vs_inductor_triton") for s in it])
            g["n_inductor_triton"] = len(it)
        cl = [s["cutlass_best_vs_cublaslt_best"] for s in group if s.get("cutlass_best_vs_cublaslt_best")]
        if cl:
            g["cutlass_best_vs_cublaslt_best"] = geomean(cl)
            g["cutlass_within_5pct_of_cublaslt"] = sum(r >= 1 / 1.05 for r in cl) / len(cl)
            g["n_cutlass_best"] = len(cl)
        cd = [s["cutedsl_best_vs_cutlass_best"] for s in group if s.get("cutedsl_best_vs_cutlass_best")]
        if cd:
            g["cutedsl_best_vs_cutlass_best"] = geomean(cd)
            g["cutedsl_within_5pct_of_cutlass"] = sum(r >= 1 / 1.05 for r in cd) / len(cd)
            g["n_cutedsl_best"] = len(cd)
        g["pick_backends"] = {b: sum(s.get("pick_backend") == b for s in group)
                              for b in sorted({s.get("pick_backend") for s in group if s.get("pick_backend")})}
        return g
    out["geomean"]["all"] = agg(probs)
    for d in sorted({s["dtype_name"] for s in probs}):
        out["geomean"][d] = agg([s for s in probs if s["dtype_name"] == d])
    for d in sorted({s["dtype_name"] for s in probs}):
        for m in sorted({s["m"] for s in probs if s["dtype_name"] == d}):
            out["by_dtype_m"][f"{d}/m={m}"] = agg([s for s in probs if s["dtype_name"] == d and s["m"] == m])
    with_def = [s for s in probs if s.get("pick_within_noise_of_default") is not None]
    out["pick_vs_default"] = {
        "n": len(with_def),
        "at_least_as_fast_within_noise": sum(s["pick_within_noise_of_default"] for s in with_def),
        "faster_beyond_noise": sum(bool(s.get("pick_faster_beyond_noise")) for s in with_def),
        "same_kernel": sum(bool(s.get("same_kernel")) for s in with_def),
        "slower_beyond_noise": [{"label": s["label"], "speedup_vs_default": s["speedup_vs_default"],
                                 "noise": s["noise"]} for s in with_def if not s["pick_within_noise_of_default"]],
        "rule": "pick_median <= default_median * (1 + max(spread_pick, spread_default)), spread = (p80-p20)/median "
                "of the side-by-side samples"}
    noise = [s.get("noise") for s in with_def if s.get("noise") is not None]
    if noise:
        out["noise"] = {"median": statistics.median(noise), "max": max(noise)}
    same = [s for s in with_def if s.get("same_kernel")]
    if same:
        out["noise"] = out.get("noise", {})
        out["noise"]["same_kernel_ratio_geomean"] = geomean([s["speedup_vs_default"] for s in same])
    for s in probs:
        if s.get("inductor"):
            out["inductor"].append({"label": s["label"], "m": s["m"], "n": s["n"], "k": s["k"],
                                    "compile_s": s["inductor"].get("compile_s"),
                                    "inductor_tflops": s["inductor"].get("tflops"),
                                    "pick_tflops": s["pick"].get("tflops"),
                                    "torch_tflops": (s.get("torch") or {}).get("tflops"),
                                    "speedup_vs_inductor": s.get("speedup_vs_inductor"),
                                    "gemmtune_tune_s": s.get("tune", {}).get("select_s")})
    out["inductor_triton"] = inductor_triton_summary(probs, doc["environment"])
    out["triton"] = triton_summary(probs, doc["rows"], doc["environment"])
    if raw["coldtune"]:
        out["coldtune"] = raw["coldtune"]
    tunes = [s["tune"]["select_s"] for s in probs if s.get("tune")]
    if tunes:
        out["tune"] = {"select_s_median": statistics.median(tunes), "select_s_max": max(tunes),
                       "select_s_total": sum(tunes),
                       "candidates_median": statistics.median([s["tune"]["n_candidates"] for s in probs]),
                       "wrong_total": sum(s["tune"]["n_wrong"] for s in probs),
                       "failed_total": sum(s["tune"]["n_failed"] for s in probs)}
    if raw["stability"]:
        ok = [e for e in raw["stability"] if e.get("status") == "ok"]
        diff = [e for e in ok if not e["same"]]
        out["stability"] = {"n": len(ok), "same_pick": len(ok) - len(diff), "different_pick": len(diff),
                            "different_within_noise": sum(bool(e.get("within_noise")) for e in diff),
                            "ratio_geomean_different": geomean([e.get("ratio") for e in diff]),
                            "worst_ratio": max((e.get("ratio") or 0 for e in diff), default=None),
                            "errors": [f"{e['label']}: {e.get('error')}" for e in raw["stability"] if e.get("status") != "ok"],
                            "problems": raw["stability"]}
    if raw["cachehit"]:
        out["cachehit"] = raw["cachehit"]
    if raw["decoder"]:
        out["decoder"] = decoder_summary(raw["decoder"])
    out["mismatches"] = raw["mismatches"]
    out["part_seconds"] = raw["part_seconds"]
    out["part_errors"] = raw["part_errors"]
    return out


DECODER_TARGET = 1.2   # the bar: the decoder-step chains at least 1.2x faster than torch's (geomean)


def decoder_summary(chains):
    """summary.decoder: the chains (parts/decoder.py) and geomeans of speedup_vs_torch (torch's chain
    median / gemmtune's), gemmtune_over_stream and torch_over_stream over the timed ones: all, per
    dtype, per model, per m."""
    timed = [c for c in chains if c.get("speedup_vs_torch")]

    def agg(group):
        return {"n": len(group), "speedup_vs_torch": geomean([c["speedup_vs_torch"] for c in group]),
                "speedup_pdl_vs_torch": geomean([c.get("speedup_pdl_vs_torch") for c in group]),
                "speedup_pdl_vs_plain": geomean([c.get("speedup_pdl_vs_plain") for c in group]),
                "gemmtune_over_stream": geomean([c.get("gemmtune_over_stream") for c in group]),
                "torch_over_stream": geomean([c.get("torch_over_stream") for c in group]),
                "faster_beyond_noise": sum(bool(c.get("faster_beyond_noise")) for c in group),
                "slower_beyond_noise": sum(bool(c.get("slower_beyond_noise")) for c in group)}
    gm = {"all": agg(timed)}
    for key, name in (("dtype_name", "dtype"), ("model", "model"), ("m", "m")):
        for v in sorted({c[key] for c in timed}):
            gm[f"{name}={v}"] = agg([c for c in timed if c[key] == v])
    best = gm["all"]["speedup_vs_torch"]
    return {"chains": chains, "geomean": gm, "target": DECODER_TARGET,
            "meets_target": (best >= DECODER_TARGET) if best else None,
            "errors": [f"{c['label']}: {'; '.join(c['errors'])}" for c in chains if c["status"] == "error"],
            "what": "one decoder layer's GEMMs (qkv, o, gate_up, down) back to back on one stream, captured in one "
                    "CUDA graph per contender; speedup_vs_torch = torch's chain median / gemmtune's (> 1: gemmtune "
                    "faster); speedup_pdl_* = the same with gemmtune's chain launched with overlap_previous "
                    "(programmatic dependent launches) over torch's / over gemmtune's plain chain; noise = max spread "
                    "of gemmtune's and torch's; *_over_stream = chain median / the sum of its GEMMs' streaming times"}


def inductor_triton_summary(probs, env):
    """Triton's best vs torch.compile max-autotune restricted to Triton, per subset problem."""
    opts = env.get("bench_options") or {}
    per = []
    for s in probs:
        it = s.get("inductor_triton")
        if not it:
            continue
        info = it.get("inductor") or {}
        per.append({"label": s["label"], "dtype_name": s["dtype_name"], "m": s["m"], "n": s["n"], "k": s["k"],
                    "compile_s": it.get("compile_s"), "kind": info.get("kind"), "config": info.get("config"),
                    "kernels": info.get("kernels"), "inductor_triton_us": it.get("median_us"),
                    "inductor_triton_tflops": it.get("tflops"), "inductor_triton_correct": it.get("correct"),
                    "triton_best_us": (s.get("triton_best") or {}).get("median_us"),
                    "triton_best_tflops": (s.get("triton_best") or {}).get("tflops"),
                    "triton_best": (s.get("triton_best") or {}).get("candidate"),
                    "pick_us": s["pick"].get("median_us"), "pick_tflops": s["pick"].get("tflops"),
                    "pick_backend": s.get("pick_backend"),
                    "default_tflops": (s.get("default") or {}).get("tflops"),
                    "torch_tflops": (s.get("torch") or {}).get("tflops"),
                    "triton_best_vs_inductor_triton": s.get("triton_best_vs_inductor_triton"),
                    "pick_vs_inductor_triton": s.get("speedup_vs_inductor_triton"),
                    "noise": s.get("triton_noise"), "gemmtune_tune_s": s.get("tune", {}).get("select_s")})
    out = {"problems": per, "target": INDUCTOR_TRITON_TARGET, "mode": opts.get("inductor_triton_mode"),
           "backends": "TRITON", "extra_options": opts.get("inductor_triton_options") or {}, "geomean": {},
           "what": "triton_best_vs_inductor_triton = inductor-triton median / Triton best median (> 1: Triton's "
                   "best faster); pick_vs_inductor_triton likewise for gemmtune's pick over all backends"}
    groups = {"all": per}
    for d in sorted({e["dtype_name"] for e in per}):
        groups[d] = [e for e in per if e["dtype_name"] == d]
    for name, grp in groups.items():
        ok = [e for e in grp if e["triton_best_vs_inductor_triton"]]
        gm = geomean([e["triton_best_vs_inductor_triton"] for e in ok])
        out["geomean"][name] = {"n": len(ok), "triton_best_vs_inductor_triton": gm,
                                "pick_vs_inductor_triton": geomean([e["pick_vs_inductor_triton"] for e in ok]),
                                "meets_target": (gm >= INDUCTOR_TRITON_TARGET) if gm else None,
                                "n_not_triton_only": sum(e["kind"] in ("aten", "mixed") for e in grp)}
    return out


def triton_summary(probs, rows, env):
    """The Triton backend over the suite: candidates by status (wrong ones listed), compile times
    (every tune row of backend triton), picks by backend, Triton's best against the pick."""
    hit_s = (env.get("bench_options") or {}).get("compile_hit_s", 0.05)
    # Earlier results recorded the environment the engines saw (gemmtune_env) instead of their options.
    workers = (((env.get("engine_options") or {}).get("compile") or {}).get("workers")
               or (env.get("gemmtune_env") or {}).get("GEMMTUNE_COMPILE_WORKERS"))
    tr = [r for r in rows if r.get("timing") == "tune" and r.get("backend") == "triton"]
    counts = {st: sum(r["status"] == st for r in tr) for st in ("ok", "pruned", "wrong", "failed")}
    reasons = {}
    for r in tr:
        if r["status"] == "failed":
            key = (r.get("reason") or "?").split("\n")[0][:120]
            reasons[key] = reasons.get(key, 0) + 1
    with_tb = [s for s in probs if s.get("speedup_vs_triton_best")]
    return {
        "candidates": {"n": len(tr), **counts},
        "wrong": [{"label": f"{r['model']}/{r['layer']} m={r['m']} {r['dtype_name']}", "candidate": r["candidate"],
                   "candidate_id": r["candidate_id"], "rel_err": r.get("rel_err"), "reason": r.get("reason")}
                  for r in tr if r["status"] == "wrong"],
        "failed_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:15]),
        "problems_with_candidates": len({(r["m"], r["n"], r["k"], r["dtype_name"]) for r in tr}),
        "problems_without_correct_candidate": [s["label"] for s in probs
                                               if (s.get("tune", {}).get("backends", {}).get("triton") or {}).get("n")
                                               and not s.get("triton_best")],
        "compile_s": compile_stats([r.get("compile_s") for r in tr], hit_s),
        "compile_note": (f"compile_s of every Triton candidate of the suite's tunes, on the GPU machine "
                         f"({env.get('cpu_count')} cores, {f'{workers} ' if workers else ''}compile workers in parallel, artifact store empty at the start of "
                         f"the run: a config compiled for one problem is a store hit for the next); 'compiled' = "
                         f"compile_s >= {hit_s} s. The 2-core figure (<= 1 s median) comes from the "
                         f"CPU build machine's tests."),
        "pick_backends": {b: sum(s.get("pick_backend") == b for s in probs)
                          for b in sorted({s.get("pick_backend") for s in probs if s.get("pick_backend")})},
        "speedup_vs_triton_best_geomean": geomean([s["speedup_vs_triton_best"] for s in with_tb]),
        "triton_best_vs_torch_geomean": geomean([s.get("triton_best_vs_torch") for s in with_tb]),
        "triton_best_vs_default_geomean": geomean([s.get("triton_best_vs_default") for s in with_tb]),
        "n_triton_best": len(with_tb)}


def softmax_summary(problems, failures, skipped, copy, dtypes, n_suite):
    """summary{} of a softmax run: per dtype the worst and geomean ratios over the timed problems, and
    the acceptance criteria (bf16, every suite row: >= 90% of the copy bandwidth, >= 1.3x torch)."""
    out = {"copy": copy, "failures": failures, "skipped": skipped, "by_dtype": {}}
    for dtype in dtypes:
        rs = [s for s in problems if s["dtype"] == dtype and "speedup_vs_torch" in s]
        if not rs:
            continue
        out["by_dtype"][dtype] = {
            "rows": len(rs),
            "min_pct_copy": min(s["pick"]["pct_copy"] for s in rs),
            "min_speedup_vs_torch": min(s["speedup_vs_torch"] for s in rs),
            "geomean_speedup_vs_torch": geomean([s["speedup_vs_torch"] for s in rs]),
            "geomean_speedup_vs_triton_plain": geomean([s["speedup_vs_triton_plain"] for s in rs]),
            "all_pct_copy_ge_90": all(s["meets"]["pct_copy_ge_90"] for s in rs),
            "all_vs_torch_ge_1_3": all(s["meets"]["vs_torch_ge_1_3"] for s in rs),
        }
    bf = out["by_dtype"].get("bf16")
    out["criteria"] = {
        "bf16_every_row_ge_90pct_copy": bool(bf and bf["all_pct_copy_ge_90"] and bf["rows"] == n_suite),
        "bf16_every_row_ge_1_3x_torch": bool(bf and bf["all_vs_torch_ge_1_3"] and bf["rows"] == n_suite),
        "outputs_correct": not any("check failed" in f or "wrong" in f for f in failures),
    }
    out["problems"] = problems
    return out


def exit_code(doc):
    """1: a correctness failure; 2: a part crashed; else 0 (one run and a merge alike)."""
    s = doc["summary"]
    return 1 if s.get("mismatches") else 2 if s.get("part_errors") else 0
