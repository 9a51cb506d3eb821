"""What a GEMM run prints on stdout: a line per suite problem as it finishes, and the summary LAST
(what the device tool's output tail shows)."""

from __future__ import annotations

import os
import time

from . import T_START, log
from .render import fnum, fpct, fratio, gpu_name
from .stats import geomean


def print_problem(i, total, s):
    """The log line of suite problem i of total (its per-problem summary s)."""
    if s["status"] == "skipped":
        log(f"[{i}/{total}] {s['label']}: skipped ({'; '.join(s['errors'])[:120]})")
        return
    if s["status"] == "error":
        log(f"[{i}/{total}] {s['label']}: ERROR {'; '.join(s['errors'])[:200]}")
        return
    pk = s.get("pick", {})
    line = (f"[{i}/{total}] {s['label']}: pick ({s.get('pick_backend', '?')}) {fnum(pk.get('median_us'), 1)} us "
            f"{fnum(pk.get('tflops'), 0)} TF | vs default {fratio(s.get('speedup_vs_default'))} vs torch "
            f"{fratio(s.get('speedup_vs_torch'))} vs triton-best {fratio(s.get('speedup_vs_triton_best'))}")
    if s.get("inductor"):
        line += f" vs inductor {fratio(s.get('speedup_vs_inductor'))} (compile {fnum(s['inductor'].get('compile_s'), 1)} s)"
    if s.get("inductor_triton"):
        line += (f" | triton-best vs inductor-triton {fratio(s.get('triton_best_vs_inductor_triton'))} (compile "
                 f"{fnum(s['inductor_triton'].get('compile_s'), 1)} s, {s['inductor_triton'].get('inductor', {}).get('kind')})")
    if s.get("cutlass_best_vs_cublaslt_best"):
        line += f" | cutlass-best vs cublaslt-best {fratio(s['cutlass_best_vs_cublaslt_best'])}"
    line += f" | tune {fnum(s.get('tune', {}).get('select_s'), 2)} s, {s.get('tune', {}).get('n_candidates')} cands"
    if s["status"] != "ok":
        line += f" [{s['status'].upper()}]"
    log(line)


def print_summary(doc):
    s = doc["summary"]
    P = print
    P("")
    P("=" * 100)
    P(f"gemmtune H200 bench {doc['date']} on {doc['device']}")
    P(f"command: {doc['command']}")
    c = doc.get("ceilings") or {}
    ce = doc.get("ceilings_end") or {}
    if c:
        P(f"ceilings: copy {fnum(c.get('copy_TBps'), 2)} TB/s, bf16 {fnum(c.get('bf16_tflops'), 0)}, fp8 "
          f"{fnum(c.get('fp8_tflops'), 0)} TFLOP/s" + (f"  (end: {fnum(ce.get('copy_TBps'), 2)}, "
                                                       f"{fnum(ce.get('bf16_tflops'), 0)}, {fnum(ce.get('fp8_tflops'), 0)})" if ce else ""))
    for e in doc.get("shards") or []:
        c, ce, ec = e.get("ceilings") or {}, e.get("ceilings_end") or {}, e["coverage"]
        P(f"shard {e['index']} of {e['count']} on {gpu_name(e.get('gpu'))}: {ec['finished']}/{ec['planned']} problems; "
          f"ceilings copy {fnum(c.get('copy_TBps'), 2)} TB/s, bf16 {fnum(c.get('bf16_tflops'), 0)}, fp8 "
          f"{fnum(c.get('fp8_tflops'), 0)} (end {fnum(ce.get('copy_TBps'), 2)}, {fnum(ce.get('bf16_tflops'), 0)}, "
          f"{fnum(ce.get('fp8_tflops'), 0)}); parts " + ", ".join(f"{k} {v:.0f}" for k, v in e.get("part_times", {}).items()))
    st = doc.get("stream") or {}
    pow2 = [e for e in st.get("sizes", []) if e["bytes"] & (e["bytes"] - 1) == 0]
    if pow2:
        P("stream ceiling (cold L2, best config): " + ", ".join(f"{e['bytes'] >> 20} MiB {fnum(e['median_us'], 1)} us"
                                                              for e in pow2)
          + f"; {len(st['sizes'])} sizes" + ("" if all(st.get("checks", {}).values()) else "; A CONFIG IS WRONG"))
    cov = s["coverage"]
    P(f"coverage: {cov['finished']}/{cov['planned']} suite problems; skipped for budget: suite "
      f"{len(cov['skipped_for_budget'].get('suite', []))}, decoder {len(cov['skipped_for_budget'].get('decoder', []))}, "
      f"stability {len(cov['skipped_for_budget'].get('stability', []))}; "
      f"errors {len(cov['errors'])}; not supported {len(cov['skipped_not_supported'])}")
    P("")
    P(f"{'group':<22}{'n':>4}{'vs default':>12}{'vs torch':>10}{'vs trit.best':>13}{'vs induct':>11}{'pick TF':>9}"
      f"{'of roof':>9}{'pick/strm':>10}{'torch/strm':>11}  picks")
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        P(f"{name:<22}{g['n']:>4}{fratio(g.get('speedup_vs_default')):>12}{fratio(g.get('speedup_vs_torch')):>10}"
          f"{fratio(g.get('speedup_vs_triton_best')):>13}"
          f"{fratio(g.get('speedup_vs_inductor')):>11}{fnum(g.get('pick_tflops_geomean'), 1):>9}"
          f"{fpct(g.get('fraction_of_roof_geomean')):>9}{fratio(g.get('pick_over_stream')):>10}"
          f"{fratio(g.get('torch_over_stream')):>11}  "
          + ",".join(f"{b} {n}" for b, n in (g.get("pick_backends") or {}).items()))
    pv = s.get("pick_vs_default") or {}
    if pv.get("n"):
        P(f"pick >= default within noise: {pv['at_least_as_fast_within_noise']}/{pv['n']} (faster beyond noise "
          f"{pv['faster_beyond_noise']}, same kernel {pv['same_kernel']}); noise median "
          f"{fpct((s.get('noise') or {}).get('median'))} max {fpct((s.get('noise') or {}).get('max'))}")
        for e in pv.get("slower_beyond_noise", [])[:12]:
            P(f"  slower: {e['label']}: {fratio(e['speedup_vs_default'])} (noise {fpct(e['noise'])})")
    probs = [p for p in s["problems"] if p.get("speedup_vs_default")]
    if probs:
        worst = sorted(probs, key=lambda p: p["speedup_vs_default"])[:6]
        best = sorted(probs, key=lambda p: -p["speedup_vs_default"])[:6]
        P("worst vs default: " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in worst))
        P("best vs default:  " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in best))
    t = s.get("tune") or {}
    if t:
        P(f"tune: median {fnum(t['select_s_median'], 2)} s, max {fnum(t['select_s_max'], 2)} s, total "
          f"{fnum(t['select_s_total'], 0)} s; {t['candidates_median']} candidates median; wrong {t['wrong_total']}, "
          f"failed {t['failed_total']}")
    for e in s.get("inductor", []):
        P(f"inductor {e['label']}: compile {fnum(e['compile_s'], 1)} s, {fnum(e['inductor_tflops'], 1)} TF vs gemmtune "
          f"{fnum(e['pick_tflops'], 1)} TF (pick/inductor {fratio(e['speedup_vs_inductor'])}), torch {fnum(e['torch_tflops'], 1)}")
    tr = s.get("triton") or {}
    c = tr.get("candidates") or {}
    if c.get("n"):
        cs = tr.get("compile_s") or {}
        P(f"triton candidates: {c['n']} ({c.get('ok')} ok, {c.get('pruned')} pruned, {c.get('wrong')} WRONG, "
          f"{c.get('failed')} failed); compile_s median {fnum(cs.get('median_s'), 3)} max {fnum(cs.get('max_s'), 2)} "
          f"(compiled in this run: n {cs.get('n_compiled')}, median {fnum(cs.get('compiled_median_s'), 3)}, "
          f"max {fnum(cs.get('compiled_max_s'), 2)}; GPU machine, {os.cpu_count()} cores)")
        P(f"triton: picks by backend {tr.get('pick_backends')}; pick vs triton-best geomean "
          f"{fratio(tr.get('speedup_vs_triton_best_geomean'))}; triton-best vs torch {fratio(tr.get('triton_best_vs_torch_geomean'))}")
        for e in tr.get("wrong", [])[:10]:
            P(f"  WRONG triton candidate: {e['label']}: {e['candidate']} rel_err {fnum(e.get('rel_err'), 4)}")
    it = s.get("inductor_triton") or {}
    for e in it.get("problems", []):
        P(f"inductor-triton {e['label']}: triton-best {fnum(e['triton_best_tflops'], 1)} TF vs inductor-triton "
          f"{fnum(e['inductor_triton_tflops'], 1)} TF ({fratio(e['triton_best_vs_inductor_triton'])}, noise "
          f"{fpct(e.get('noise'))}); compile {fnum(e['compile_s'], 1)} s, kernels {e.get('kind')} {e.get('config') or ''}")
    for name, g in (it.get("geomean") or {}).items():
        if g.get("n"):
            P(f"inductor-triton geomean {name}: triton-best/inductor-triton {fratio(g.get('triton_best_vs_inductor_triton'))} "
              f"over {g['n']} (target {it.get('target')}: {'met' if g.get('meets_target') else 'NOT met'}); "
              f"pick/inductor-triton {fratio(g.get('pick_vs_inductor_triton'))}")
    cl = [p for p in s["problems"] if p.get("cutlass_best_vs_cublaslt_best") and p["m"] >= 2048]
    if cl:
        r = [p["cutlass_best_vs_cublaslt_best"] for p in cl]
        P(f"cutlass-best vs cublaslt-best, m >= 2048: within 5% or faster on {sum(x >= 1 / 1.05 for x in r)}/{len(r)} "
          f"(target 70%); geomean {fratio(geomean(r))}; worst "
          + "; ".join(f"{p['label']} {fratio(p['cutlass_best_vs_cublaslt_best'])}"
                      for p in sorted(cl, key=lambda p: p["cutlass_best_vs_cublaslt_best"])[:4]))
    cd = [p for p in s["problems"] if p.get("cutedsl_best_vs_cutlass_best") and p["m"] >= 2048]
    if cd:
        r = [p["cutedsl_best_vs_cutlass_best"] for p in cd]
        P(f"cutedsl-best vs cutlass-best, m >= 2048: within 5% or faster on {sum(x >= 1 / 1.05 for x in r)}/{len(r)} "
          f"(target 70%); geomean {fratio(geomean(r))}; worst "
          + "; ".join(f"{p['label']} {fratio(p['cutedsl_best_vs_cutlass_best'])}"
                      for p in sorted(cd, key=lambda p: p["cutedsl_best_vs_cutlass_best"])[:4]))
    dec = s.get("decoder")
    if dec:
        for c in dec["chains"]:
            P(f"decoder {c['label']}: " + (f"gemmtune {fnum(c['gemmtune']['median_us'], 1)} us vs torch "
              f"{fnum(c['torch']['median_us'], 1)} us: x{fratio(c['speedup_vs_torch'])} (noise {fpct(c.get('noise'))}), "
              f"with PDL x{fratio(c.get('speedup_pdl_vs_torch'))}; "
              f"/stream {fratio(c.get('gemmtune_over_stream'))} vs {fratio(c.get('torch_over_stream'))}"
              if c.get("speedup_vs_torch") else f"{c['status'].upper()} {'; '.join(c['errors'])[:200]}"))
        g = dec["geomean"]["all"]
        P(f"decoder geomean over {g['n']} chains: x{fratio(g['speedup_vs_torch'])} vs torch, with PDL "
          f"x{fratio(g.get('speedup_pdl_vs_torch'))} (target {dec['target']}: "
          f"{ {True: 'met', False: 'NOT met', None: '-'}[dec.get('meets_target')]}); gemmtune/stream "
          f"{fratio(g['gemmtune_over_stream'])}, torch/stream {fratio(g['torch_over_stream'])}")
    ct = s.get("coldtune") or {}
    if ct:
        g, ind = ct.get("gemmtune") or {}, ct.get("inductor") or {}
        P(f"coldtune {ct.get('label')}: gemmtune ({','.join(ct.get('backends', []))}) {fnum(g.get('seconds'), 2)} s "
          f"(process {fnum(g.get('process_s'), 2)} s) vs inductor {fnum(ind.get('seconds'), 2)} s -> gemmtune faster: "
          f"{ct.get('gemmtune_faster')}" + (f"; errors: {'; '.join(ct.get('errors', []))[:300]}" if ct.get("errors") else ""))
    st = s.get("stability")
    if st:
        P(f"stability: {st['same_pick']}/{st['n']} same pick; {st['different_pick']} different "
          f"({st['different_within_noise']} within noise; second/first geomean {fratio(st['ratio_geomean_different'])}, "
          f"worst {fratio(st['worst_ratio'])}); errors {len(st['errors'])}")
    ch = s.get("cachehit")
    if ch:
        for where in ("cli", "in_process"):
            r = ch.get(where) or {}
            if r.get("n"):
                P(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache; select median {fnum(r.get('median_ms'), 3)} ms, "
                  f"p90 {fnum(r.get('p90_ms'), 3)}, max {fnum(r.get('max_ms'), 3)} (after first "
                  f"{fnum(r.get('max_ms_after_first'), 3)}); {r['n_under_1ms']}/{r['n']} under 1 ms"
                  + (f"; {r['warning']}" if r.get("warning") else ""))
            else:
                P(f"cachehit {where}: {(r.get('error') or 'nothing')[:400]}")
    P("part seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items())
      + ("" if doc.get("shards") else f"; total {time.monotonic() - T_START:.0f} s"))
    for e in s.get("part_errors", []):
        P(f"PART ERROR: {e[:300]}")
    for e in cov["errors"][:10]:
        P(f"problem error: {e[:300]}")
    if s.get("mismatches"):
        P(f"CORRECTNESS FAILURES: {len(s['mismatches'])}")
        for m in s["mismatches"][:10]:
            P(f"  {m}")
    else:
        P("correctness: every checked output within tolerance, no NaN")
