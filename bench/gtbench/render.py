"""The result files of both benches: <stem>.json (rows one a line) and <stem>.md (tables), and the
number formats they share."""

from __future__ import annotations

import json
import math

from .problems import SOFTMAX_CONTENDERS
from .stats import geomean


def fnum(x, digits=1, none="-"):
    if x is None:
        return none
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}f}"


def fratio(x):
    return "-" if x is None else f"{x:.3f}"


def duel_text(notes):
    """The race's duels (engine notes 'duel: A (champion) vs B: paired time ratio 1.0123 ->
    challenger'), shortened to 'ratio 1.0123 -> challenger' and joined by '; '."""
    if isinstance(notes, str):
        notes = [notes] if notes else []
    if not notes:
        return "-"
    return "; ".join(n.split(": paired time ", 1)[-1] if ": paired time " in n else n for n in notes)


def fpct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def dump_json(doc):
    """Indented JSON, except that each element of rows[] is one line (diff-friendly, compact)."""
    rows = doc.get("rows", [])
    head = dict(doc)
    head["rows"] = "__ROWS__"
    text = json.dumps(head, indent=1, default=str)
    body = ",\n".join("  " + json.dumps(r, default=str) for r in rows)
    return text.replace('"__ROWS__"', "[\n" + body + "\n ]" if rows else "[]", 1)


def write_doc(out, stem, doc):
    """<stem>.json (replaced atomically: it is rewritten after every part) and <stem>.md in out."""
    jp = out / f"{stem}.json"
    tmp = jp.with_suffix(".json.tmp")
    tmp.write_text(dump_json(doc))
    tmp.replace(jp)
    (out / f"{stem}.md").write_text(render_markdown(doc))


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(doc):
    s = doc["summary"]
    env = doc["environment"]
    L = [f"# gemmtune on the {doc['device'] or 'GPU'}, {doc['date']}", ""]
    L.append(f"Device: {doc['device']}  ")
    v = env.get("versions", {})
    L.append(f"torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), triton {v.get('triton')}, gemmtune "
             f"{env.get('engine', {}).get('version')}, cuBLASLt loaded from `{env.get('cublaslt')}`  ")
    L.append(f"Environment key: `{env.get('engine', {}).get('environment')}`")
    L += ["", "Command:", "", "```", doc["command"], "```", ""]
    L += render_shards_markdown(doc)
    if not doc.get("final"):
        L += ["**Partial results: the run did not finish.**", ""]
    cov = s["coverage"]
    L.append(f"Coverage: {cov['finished']} of {cov['planned']} planned suite problems finished; "
             f"{len(cov['skipped_for_budget'].get('suite', []))} skipped for the time budget, "
             f"{len(cov['errors'])} errors, {len(cov['skipped_not_supported'])} not supported. Part times (s"
             + (", the longest shard's" if doc.get("shards") else "") + "): "
             + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items()))
    L.append("")
    L.append("Method: random inputs; 256 MB L2 flush (a read of a clean buffer: the L2 left clean) before every timed sample (outside the timed region); warm-up; "
             "CUDA events around one call; gemmtune's contenders and torch rotate over several input sets "
             "(as the engine's race: over 3x L2, at least 3; Inductor on set 0); contenders interleaved in rounds with a rotating order in one process; "
             "medians with p20/p80; speedup = other's median / gemmtune pick's median (> 1: gemmtune faster); "
             "spread = (p80 - p20) / median. Correctness: relative Frobenius error vs a float32 reference of the same "
             "inputs and vs torch's output.")
    L.append("")
    for title, key in (("Ceilings (start of run)", "ceilings"), ("Ceilings (end of run)", "ceilings_end")):
        c = doc.get(key) or {}
        if c:
            if doc.get("shards"):
                title += ", shard 0's GPU"
            L += [f"## {title}", "", md_table(["what", "median", "best sample"], [
                ["copy, read+write, TB/s", fnum(c.get("copy_TBps"), 2), fnum(c.get("copy_TBps_best"), 2)],
                ["bf16 torch.mm 8192^3, TFLOP/s", fnum(c.get("bf16_tflops"), 0), fnum(c.get("bf16_tflops_best"), 0)],
                ["fp8 torch._scaled_mm 8192^3, TFLOP/s", fnum(c.get("fp8_tflops"), 0), fnum(c.get("fp8_tflops_best"), 0)]]), ""]
            if c.get("gpu_state"):
                L += [f"GPU state: {c['gpu_state']}", ""]
    L += render_stream_markdown(doc)
    L += ["## Summary (geomeans over finished problems)", ""]
    rows = []
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        rows.append([name, g["n"], fratio(g.get("speedup_vs_default")), fratio(g.get("speedup_vs_torch")),
                     fratio(g.get("speedup_vs_triton_best")), fratio(g.get("triton_best_vs_torch")),
                     fratio(g.get("speedup_vs_inductor")), fnum(g.get("pick_tflops_geomean"), 1),
                     fpct(g.get("fraction_of_roof_geomean")), fratio(g.get("pick_over_stream")),
                     fratio(g.get("torch_over_stream")),
                     ", ".join(f"{b} {n}" for b, n in (g.get("pick_backends") or {}).items())])
    L += [md_table(["group", "n", "pick vs cuBLASLt default", "pick vs torch", "pick vs Triton best",
                    "Triton best vs torch", "pick vs inductor", "pick TFLOP/s", "of measured roof", "pick / stream",
                    "torch / stream", "picks by backend"], rows), ""]
    L.append("pick = gemmtune's tuned pick over all its backends; ratios are the other's median / the first's "
             "median (> 1: the first is faster); pick / stream and torch / stream: the median over the stream "
             "ceiling's time for the problem's bytes, geomean over the group's memory-bound problems (1.000 = at the "
             "streaming limit; see below).")
    L.append("")
    pv = s.get("pick_vs_default", {})
    if pv.get("n"):
        L.append(f"gemmtune's pick at least as fast as cuBLASLt's default within noise: **{pv['at_least_as_fast_within_noise']}"
                 f"/{pv['n']}** (faster beyond noise: {pv['faster_beyond_noise']}; same kernel as the default: "
                 f"{pv['same_kernel']}). Rule: {pv['rule']}.")
        if s.get("noise"):
            L.append(f"Noise (max spread of pick and default, per problem): median {fpct(s['noise'].get('median'))}, "
                     f"max {fpct(s['noise'].get('max'))}; where pick = default (same kernel), default/pick geomean "
                     f"{fratio(s['noise'].get('same_kernel_ratio_geomean'))}.")
        if pv.get("slower_beyond_noise"):
            L.append("Slower than the default beyond noise: " + ", ".join(
                f"{e['label']} ({fratio(e['speedup_vs_default'])}, noise {fpct(e['noise'])})" for e in pv["slower_beyond_noise"]))
        L.append("")
    t = s.get("tune") or {}
    if t:
        L += [f"Tuning (gemmtune select from an empty cache): median {fnum(t['select_s_median'], 2)} s, max "
              f"{fnum(t['select_s_max'], 2)} s, total {fnum(t['select_s_total'], 0)} s; median {t['candidates_median']} "
              f"candidates; {t['wrong_total']} wrong and {t['failed_total']} failed candidates in all (never selected).", ""]
    if s.get("inductor"):
        L += ["## TorchInductor max-autotune subset (its default gemm backends)", "", md_table(
            ["problem", "m", "n", "k", "compile+autotune s", "inductor TFLOP/s", "gemmtune TFLOP/s", "torch.mm TFLOP/s",
             "pick vs inductor", "gemmtune tune s"],
            [[e["label"], e["m"], e["n"], e["k"], fnum(e["compile_s"], 1), fnum(e["inductor_tflops"], 1),
              fnum(e["pick_tflops"], 1), fnum(e["torch_tflops"], 1), fratio(e["speedup_vs_inductor"]),
              fnum(e["gemmtune_tune_s"], 2)] for e in s["inductor"]]), ""]
        if doc["environment"].get("inductor_init_s") is not None:
            L += [f"(Inductor's one-time start-up, excluded above: {fnum(doc['environment']['inductor_init_s'], 1)} s.)", ""]
    L += render_block_markdown(doc)
    L += render_memory_bound_markdown(doc)
    L += render_decoder_markdown(doc)
    L += render_triton_markdown(doc)
    L += render_best_pairs_markdown(doc)
    st = s.get("stability")
    if st:
        L += ["## Stability: re-tuned from an empty cache", "",
              f"{st['same_pick']}/{st['n']} same pick; {st['different_pick']} different, of which "
              f"{st['different_within_noise']} within noise when timed head to head (second/first geomean "
              f"{fratio(st['ratio_geomean_different'])}, worst {fratio(st['worst_ratio'])}).", ""]
        diff = [e for e in st["problems"] if e.get("status") == "ok" and not e["same"]]
        if diff:
            L += [md_table(["problem", "first pick", "second pick", "second/first h2h", "noise", "within noise",
                            "ratio in 1st tune", "ratio in 2nd tune", "duel in 1st tune", "duel in 2nd tune"],
                           [[e["label"], e.get("first_name", ""), e.get("second_name", ""), fratio(e.get("ratio")),
                             fpct(e.get("noise")), e.get("within_noise"), fratio(e.get("ratio_in_first_tune")),
                             fratio(e.get("ratio_in_second_tune")), duel_text(e.get("duel_first_tune")),
                             duel_text(e.get("duel_second_tune"))] for e in diff]), ""]
    ch = s.get("cachehit")
    if ch:
        L += ["## Cache hits: select() answered from pass 1's cache", ""]
        rows = []
        for where, label in (("cli", "separate process (gemmtune CLI suite --cache)"), ("in_process", "in process (new engine)")):
            r = ch.get(where) or {}
            rows.append([label, r.get("n", 0), r.get("n_from_cache", "-"), fnum(r.get("median_ms"), 3),
                         fnum(r.get("p90_ms"), 3), fnum(r.get("max_ms"), 3), fnum(r.get("max_ms_after_first"), 3),
                         r.get("n_under_1ms", "-"), r.get("n_same_pick", "-"),
                         (r.get("error") or r.get("warning") or "")[:200]])
        L += [md_table(["where", "n", "from cache", "median ms", "p90 ms", "max ms", "max ms after the first",
                        "under 1 ms", "same pick as pass 1", "note"], rows), ""]
        runs = (ch.get("cli") or {}).get("runs") or []
        for r in runs:
            L.append(f"- `{r['command']}`: rc {r['rc']}, {fnum(r['wall_s'], 1)} s")
        L.append("")
    if s.get("mismatches"):
        L += ["## CORRECTNESS FAILURES", ""] + [f"- {m}" for m in s["mismatches"]] + [""]
    if s.get("part_errors"):
        L += ["## Part errors", ""] + [f"- {m}" for m in s["part_errors"]] + [""]
    if cov["errors"] or cov["skipped_not_supported"]:
        L += ["## Problem errors / not supported", ""] + [f"- {m}" for m in cov["errors"] + cov["skipped_not_supported"]] + [""]
    L += ["## Per problem (side-by-side medians)", ""]
    rows = []
    for p in sorted(s["problems"], key=lambda p: (p["dtype_name"], p["model"], p["layer"], p["m"])):
        if not p.get("pick"):
            continue
        rows.append([p["model"], p["layer"], p["m"], p["n"], p["k"], p["dtype_name"],
                     fnum(p["pick"].get("tflops"), 1), fnum((p.get("default") or {}).get("tflops"), 1),
                     fnum((p.get("triton_best") or {}).get("tflops"), 1),
                     fnum((p.get("torch") or {}).get("tflops"), 1), fnum((p.get("inductor") or {}).get("tflops"), 1),
                     fnum((p.get("inductor_triton") or {}).get("tflops"), 1),
                     fratio(p.get("speedup_vs_default")), fratio(p.get("speedup_vs_triton_best")),
                     fratio(p.get("speedup_vs_torch")), fpct(p.get("noise")),
                     {True: "yes", False: "NO", None: "-"}[p.get("pick_within_noise_of_default")],
                     "=" if p.get("same_kernel") else "", fpct(p.get("fraction_of_roof")), fratio(p.get("pick_over_stream")),
                     fnum(p.get("tune", {}).get("select_s"), 2), p.get("tune", {}).get("n_candidates", ""),
                     f"{p['pick'].get('rel_err', 0) or 0:.1e}", p.get("pick_backend", ""), p["pick"].get("candidate", "")])
    L += [md_table(["model", "layer", "m", "n", "k", "dtype", "gemmtune TFLOP/s", "cuBLASLt default", "Triton best",
                    "torch", "inductor", "inductor-triton", "pick vs default", "pick vs Triton best", "pick vs torch",
                    "noise", "within noise", "same", "of roof", "pick / stream", "tune s", "cands", "rel err", "pick backend",
                    "gemmtune pick"], rows), ""]
    skipped = cov["skipped_for_budget"]
    if any(skipped.values()):
        L += ["## Skipped for the time budget", ""]
        for part, labels in skipped.items():
            if labels:
                L.append(f"- {part}: {len(labels)}: " + ", ".join(labels))
        L.append("")
    L += ["JSON: rows[] (one per problem and candidate/baseline; `timing` = tune | coldtune | side_by_side | decoder_graph | stability_h2h) "
          "and summary{} as documented in bench/README.md.", ""]
    return "\n".join(L)


def render_block_markdown(doc):
    """Block-scaled FP8 (--dtypes fp8-block): the pick against the block-scaled baseline (torch's
    _scaled_mm where it takes block scales, else the bench's Triton kernel: named per row) and
    against the tensorwise pick of the same shape, timed in the same rounds."""
    ps = [p for p in doc["summary"]["problems"] if p.get("scale") == "block" and p.get("pick")]
    if not ps:
        return []
    L = ["## Block-scaled FP8 (1x128 scales of A, 128x128 of W)", "",
         "Each problem's block-scaled pick, each backend's best, the block-scaled baseline and gemmtune's "
         "tensorwise pick of the same shape, side by side in the same rounds. pick vs baseline: baseline median / "
         "pick median (> 1: the pick is faster); block / tensorwise: the block pick's median over the tensorwise "
         "pick's (<= 1.10: within 10%).", ""]
    rows = []
    for p in sorted(ps, key=lambda p: (p["m"], p["model"], p["layer"])):
        g = lambda k: p.get(k) or {}  # noqa: E731
        rows.append([p["label"], p["m"], p["n"], p["k"], p.get("pick_backend", ""), fnum(g("pick").get("tflops"), 1),
                     fnum(g("cublaslt_best").get("tflops") or g("default").get("tflops"), 1),
                     fnum(g("triton_best").get("tflops"), 1), fnum(g("cutlass_best").get("tflops"), 1),
                     fnum(g("cutedsl_best").get("tflops"), 1), fnum(g("torch").get("tflops"), 1),
                     g("torch").get("backend", "-"), fratio(p.get("speedup_vs_torch")),
                     fnum(g("tensorwise_pick").get("tflops"), 1), fratio(p.get("block_over_tensorwise")),
                     "yes" if all(g(k).get("correct") is not False for k in ("pick", "torch", "tensorwise_pick")) else "NO"])
    L += [md_table(["problem", "m", "n", "k", "pick backend", "pick TFLOP/s", "cuBLASLt TFLOP/s", "Triton best TFLOP/s",
                    "CUTLASS best TFLOP/s", "CuTe DSL best TFLOP/s", "baseline TFLOP/s", "baseline", "pick vs baseline", "tensorwise pick TFLOP/s", "block / tensorwise",
                    "checks"], rows), ""]
    L.append(f"Geomean over {len(ps)} problems: pick vs baseline {fratio(geomean([p.get('speedup_vs_torch') for p in ps]))}, "
             f"block / tensorwise {fratio(geomean([p.get('block_over_tensorwise') for p in ps]))}.")
    L.append("")
    return L


def render_stream_markdown(doc):
    """The stream ceiling: its powers of two (and how many exact sizes were measured), the configs and
    their check."""
    st = doc.get("stream") or {}
    if not st.get("sizes"):
        return []
    pow2 = [e for e in st["sizes"] if e["bytes"] & (e["bytes"] - 1) == 0]
    bad = [n for n, ok in (st.get("checks") or {}).items() if not ok]
    return ["## Stream ceiling (start of run)" + (", shard 0's GPU" if doc.get("shards") else ""), "",
            f"{st.get('what')}. Configs of the streaming-read kernel (bench/gtbench/stream_read.py): "
            f"{', '.join(st.get('configs', []))}; each config's sum checked against torch's: "
            f"{'all correct' if not bad else '**WRONG: ' + ', '.join(bad) + '**'}. {len(st['sizes']) - len(pow2)} "
            f"more sizes measured (the problems' exact bytes; in the JSON's `stream.sizes`), {fnum(st.get('seconds'), 1)} s "
            "in all.", "",
            md_table(["bytes", "median us", "p20 us", "p80 us", "GB/s", "best config"],
                     [[f"{e['bytes'] >> 20} MiB", fnum(e["median_us"], 1), fnum(e["p20_us"], 1), fnum(e["p80_us"], 1),
                       fnum(e["GBps"], 0), e["config"]] for e in pow2]), ""]


def render_memory_bound_markdown(doc):
    """Memory-bound suite problems against the stream ceiling: geomeans per dtype x m, then the ten
    farthest from it."""
    s = doc["summary"]
    groups = [(k, g) for k, g in s["by_dtype_m"].items() if g.get("n_memory_bound")]
    if not groups:
        return []
    L = ["## Memory-bound problems vs the stream ceiling", "",
         "Memory-bound: m <= 128, or the roof's memory term (min_bytes at the measured copy bandwidth) over its compute "
         "term. stream = the stream ceiling's time for the problem's min_bytes (A, W read once, D written once), measured "
         "at that size in this run; pick / stream = the pick's side-by-side median over it (1.000 = at the streaming "
         "limit; issue 14's target: <= 1.10 in geomean per m and dtype). The copy-bandwidth roof is beside it.", "",
         md_table(["group", "memory-bound n", "pick / stream", "torch / stream", "pick vs torch", "of measured roof"],
                  [[k, g["n_memory_bound"], fratio(g.get("pick_over_stream")), fratio(g.get("torch_over_stream")),
                    fratio(g.get("speedup_vs_torch")), fpct(g.get("fraction_of_roof_geomean"))] for k, g in groups]), ""]
    far = sorted((p for p in s["problems"] if p.get("pick_over_stream")), key=lambda p: -p["pick_over_stream"])[:10]
    L += ["Farthest from the stream ceiling:", "",
          md_table(["problem", "MiB", "stream us", "pick us", "pick / stream", "torch / stream", "of roof", "pick"],
                   [[p["label"], fnum(p["min_bytes"] / (1 << 20), 1), fnum(p["stream_us"], 1),
                     fnum(p["pick"].get("median_us"), 1), fratio(p["pick_over_stream"]), fratio(p.get("torch_over_stream")),
                     fpct(p.get("fraction_of_roof")), f"{p.get('pick_backend')} {p['pick'].get('candidate')}"]
                    for p in far]), ""]
    return L


def render_decoder_markdown(doc):
    """The decoder part: per chain both graphs' medians and the speed-up, then the geomeans."""
    d = doc["summary"].get("decoder")
    if not d:
        return []
    L = ["## Decoder step: one layer's GEMMs in one CUDA graph", "", f"{d['what']}. Target (issue 14): gemmtune's chains "
         f">= {d['target']}x faster than torch's in geomean: "
         + {True: "**met**", False: "**not met**", None: "-"}[d.get("meets_target")] + ".", ""]
    rows = []
    for c in d["chains"]:
        g, t, pd = c.get("gemmtune") or {}, c.get("torch") or {}, c.get("gemmtune_pdl") or {}
        rows.append([c["model"], c["m"], c["dtype_name"], fnum(g.get("median_us"), 1), fnum(t.get("median_us"), 1),
                     fratio(c.get("speedup_vs_torch")), fnum(pd.get("median_us"), 1), fratio(c.get("speedup_pdl_vs_torch")),
                     fpct(c.get("noise")), fnum(c.get("stream_us"), 1),
                     fratio(c.get("gemmtune_over_stream")), fratio(c.get("torch_over_stream")),
                     "ok" if (g.get("correct") and t.get("correct") and pd.get("correct", True)) else c["status"].upper(),
                     "; ".join(f"{e['layer']} {e['pick_backend']}{' (cached)' if e.get('from_cache') else ''}"
                               for e in c.get("gemms", [])),
                     "; ".join(c["errors"])[:200]])
    L += [md_table(["model", "m", "dtype", "gemmtune us", "torch us", "speed-up", "with PDL us", "PDL speed-up", "noise",
                    "stream us", "gemmtune / stream",
                    "torch / stream", "checks", "picks (cached = the suite's tune)", "errors"], rows), ""]
    L += [md_table(["group", "n", "speed-up vs torch", "with PDL vs torch", "PDL vs plain", "gemmtune / stream",
                    "torch / stream", "faster beyond noise", "slower beyond noise"],
                   [[k, g["n"], fratio(g["speedup_vs_torch"]), fratio(g.get("speedup_pdl_vs_torch")),
                     fratio(g.get("speedup_pdl_vs_plain")), fratio(g["gemmtune_over_stream"]),
                     fratio(g["torch_over_stream"]), g["faster_beyond_noise"], g["slower_beyond_noise"]]
                    for k, g in d["geomean"].items()]), ""]
    return L


def gpu_name(g):
    """A shard's GPU in a few words: nvidia-smi's index and bus id, else CUDA_VISIBLE_DEVICES."""
    g = g or {}
    if g.get("index") is not None:
        return f"GPU {g['index']} ({g.get('pci.bus_id', '?')})"
    return f"CUDA_VISIBLE_DEVICES={g.get('cuda_visible_devices')}"


def render_shards_markdown(doc):
    """A shard's own report says which part it is; a merged one says how it ran and lists its shards."""
    if doc.get("shard"):
        sh = doc["shard"]
        return [f"Shard {sh['index']} of {sh['count']} ({gpu_name(sh.get('gpu'))}): only the suite problems whose index "
                f"in the ordering % {sh['count']} == {sh['index']}; `h200.py --merge` makes the run's report.", ""]
    shards = doc.get("shards")
    if not shards:
        return []
    n = shards[0]["count"]
    L = [f"Ran as {n} shards on {n} GPUs of one host (`GPUS={n} bench/device.sh`, merged with "
         f"`{doc['environment'].get('merge_command', 'h200.py --merge')}`): the suite's problems were dealt round-robin "
         f"over the ordering, each shard's problems timed side by side on its own GPU, the shards in parallel (their "
         f"compiles share the host's CPUs). The summary below covers every shard's problems; each problem's share of "
         f"the roof uses its own GPU's ceilings.", "",
         md_table(["shard", "GPU", "problems finished / planned", "skipped for budget (suite, stability)",
                   "copy TB/s start / end", "bf16 TFLOP/s start / end", "fp8 TFLOP/s start / end", "part times (s)"],
                  [[e["index"], gpu_name(e.get("gpu")),
                    f"{e['coverage']['finished']} / {e['coverage']['planned']}",
                    f"{e['coverage']['skipped_for_budget'].get('suite', 0)}, "
                    f"{e['coverage']['skipped_for_budget'].get('stability', 0)}"]
                   + [f"{fnum((e.get('ceilings') or {}).get(k), d)} / {fnum((e.get('ceilings_end') or {}).get(k), d)}"
                      for k, d in (("copy_TBps", 2), ("bf16_tflops", 0), ("fp8_tflops", 0))]
                   + [", ".join(f"{k} {v:.0f}" for k, v in e.get("part_times", {}).items())] for e in shards]), ""]
    return L


# (backend, its name, the backend it is measured against, that one's name): issue 4 compares CUTLASS's
# best with cuBLASLt's, issue 5 CuTe DSL's with CUTLASS's (target: within 5% or faster on >= 70% of the
# problems with m >= 2048). Suite problems carry <a>_best_vs_<b>_best where both raced.
BEST_PAIRS = (("cutlass", "CUTLASS", "cublaslt", "cuBLASLt"), ("cutedsl", "CuTe DSL", "cutlass", "CUTLASS"))


def render_best_pairs_markdown(doc):
    """Each BEST_PAIRS backend's best beside the other's, per problem where both raced."""
    L = []
    for a, an, b, bn in BEST_PAIRS:
        key = f"{a}_best_vs_{b}_best"
        probs = [p for p in doc["summary"]["problems"] if p.get(key)]
        if not probs:
            continue
        big = [p[key] for p in probs if p["m"] >= 2048]
        L += [f"## {an} best vs {bn} best (timed side by side)", ""]
        if big:
            ok = sum(r >= 1 / 1.05 for r in big)
            L += [f"m >= 2048: {an}'s best within 5% of {bn}'s best or faster on {ok}/{len(big)} "
                  f"({ok / len(big):.0%}; target 70%), geomean {fratio(geomean(big))}.", ""]
        L += [md_table(["problem", "dtype", "m", "n", "k", f"{an} best TFLOP/s", f"{bn} best TFLOP/s",
                        f"{bn}/{an} time", f"{an} config", f"{bn} config", "tune s", "pick backend"],
                       [[p["label"], p["dtype_name"], p["m"], p["n"], p["k"], fnum(p[f"{a}_best"].get("tflops"), 1),
                         fnum((p.get(f"{b}_best") or {}).get("tflops"), 1), fratio(p[key]),
                         p[f"{a}_best"].get("candidate", ""), (p.get(f"{b}_best") or {}).get("candidate", ""),
                         fnum(p.get("tune", {}).get("select_s"), 2), p.get("pick_backend", "")] for p in probs]), ""]
    return L


def render_triton_markdown(doc):
    """The Triton backend's sections: candidates and compile times, Triton's best vs Inductor
    restricted to Triton, the cold tune vs Inductor."""
    s = doc["summary"]
    L = []
    tr = s.get("triton") or {}
    c = tr.get("candidates") or {}
    if c.get("n"):
        L += ["## Triton backend", ""]
        L.append(f"Triton candidates in the suite's tunes: {c['n']} over {tr.get('problems_with_candidates')} problems: "
                 f"{c.get('ok', 0)} ok, {c.get('pruned', 0)} pruned, **{c.get('wrong', 0)} wrong**, {c.get('failed', 0)} "
                 f"failed (wrong and failed ones are never selected).")
        if tr.get("wrong"):
            L += ["", "Wrong Triton candidates:", ""] + [
                f"- {e['label']}: {e['candidate']} (`{e['candidate_id']}`), rel_err {fnum(e.get('rel_err'), 4)}: "
                f"{(e.get('reason') or '')[:200]}" for e in tr["wrong"][:40]]
        if tr.get("failed_reasons"):
            L += ["", "Failed Triton candidates by reason:", ""] + [f"- {n} x {r}" for r, n in tr["failed_reasons"].items()]
        if tr.get("problems_without_correct_candidate"):
            L += ["", "Problems where Triton had no correct timed candidate: "
                  + ", ".join(tr["problems_without_correct_candidate"])]
        cs = tr.get("compile_s") or {}
        L += ["", md_table(["compile time per Triton candidate", "n", "median s", "p90 s", "max s"], [
            ["every candidate (store hits included)", cs.get("n"), fnum(cs.get("median_s"), 3), "-", fnum(cs.get("max_s"), 2)],
            ["compiled in this run (not store hits)", cs.get("n_compiled"), fnum(cs.get("compiled_median_s"), 3),
             fnum(cs.get("compiled_p90_s"), 2), fnum(cs.get("compiled_max_s"), 2)]]
            + ([["cold tune (empty store: every candidate compiled)", ctc.get("n"), fnum(ctc.get("median_s"), 3),
                 fnum(ctc.get("compiled_p90_s"), 2), fnum(ctc.get("max_s"), 2)]]
               if (ctc := ((s.get("coldtune") or {}).get("gemmtune") or {}).get("triton_compile")) else [])), ""]
        L.append(f"{tr.get('compile_note', '')}")
        L.append("")
        pb = tr.get("pick_backends") or {}
        L.append(f"Picks by backend: {', '.join(f'{b} {n}' for b, n in pb.items()) or '-'}; pick vs Triton's best "
                 f"(geomean, > 1: the pick is faster): {fratio(tr.get('speedup_vs_triton_best_geomean'))} over "
                 f"{tr.get('n_triton_best')} problems; Triton's best vs torch: {fratio(tr.get('triton_best_vs_torch_geomean'))}, "
                 f"vs cuBLASLt's default: {fratio(tr.get('triton_best_vs_default_geomean'))}.")
        L.append("")
    it = s.get("inductor_triton") or {}
    if it.get("problems"):
        L += ["## Triton's best vs torch.compile max-autotune restricted to Triton (`inductor-triton`)", ""]
        L.append(f"`torch.compile(options=list_mode_options('{it.get('mode')}') + max_autotune_gemm_backends='TRITON'"
                 + (f" + {json.dumps(it.get('extra_options'))}" if it.get("extra_options") else "")
                 + ")`, cold cache per problem; timed interleaved with gemmtune's pick, Triton's best, cuBLASLt's "
                   "default and torch in the same rounds. Ratio = inductor-triton median / Triton best median (> 1: "
                   f"Triton's best faster). Target: geomean >= {it.get('target')}.")
        L += ["", md_table(["problem", "m", "n", "k", "Triton best TFLOP/s", "inductor-triton TFLOP/s",
                            "Triton best vs inductor-triton", "noise", "pick TFLOP/s (backend)", "pick vs inductor-triton",
                            "torch TFLOP/s", "compile s", "Inductor kernels", "Inductor config", "Triton best config"],
                           [[e["label"], e["m"], e["n"], e["k"], fnum(e["triton_best_tflops"], 1),
                             fnum(e["inductor_triton_tflops"], 1), fratio(e["triton_best_vs_inductor_triton"]),
                             fpct(e.get("noise")), f"{fnum(e['pick_tflops'], 1)} ({e.get('pick_backend')})",
                             fratio(e["pick_vs_inductor_triton"]), fnum(e["torch_tflops"], 1), fnum(e["compile_s"], 1),
                             e.get("kind") or "-", e.get("config") or "-", e.get("triton_best") or "-"]
                            for e in it["problems"]]), ""]
        L += [md_table(["group", "n", "Triton best vs inductor-triton (geomean)", "pick vs inductor-triton",
                        f"meets {it.get('target')}", "compiles not Triton-only"],
                       [[name, g["n"], fratio(g.get("triton_best_vs_inductor_triton")), fratio(g.get("pick_vs_inductor_triton")),
                         {True: "yes", False: "**NO**", None: "-"}[g.get("meets_target")], g.get("n_not_triton_only")]
                        for name, g in it.get("geomean", {}).items()]), ""]
    ct = s.get("coldtune") or {}
    if ct:
        L += [f"## Cold tune vs Inductor: {ct.get('label')}", ""]
        g, ind = ct.get("gemmtune") or {}, ct.get("inductor") or {}
        rows = []
        if g:
            bs = g.get("backends_stats") or {}
            rows.append([f"gemmtune ({', '.join(ct.get('backends', []))}), new process, empty tuning cache and artifact store",
                         fnum(g.get("seconds"), 2),
                         f"engine start {fnum(g.get('engine_s'), 2)} s + select {fnum(g.get('select_s'), 2)} s; whole process "
                         f"{fnum(g.get('process_s'), 2)} s; candidates " + ", ".join(f"{b} {v.get('n')}" for b, v in bs.items())
                         + (f"; pick {g['pick']['backend']} {g['pick']['candidate']}" if g.get("pick") else "")
                         + (f"; ERROR {g['error']}" if g.get("error") else "")])
        if ind:
            rows.append([f"Inductor {ind.get('mode')} (gemm backends "
                         f"{(ind.get('defaults') or {}).get('max_autotune_gemm_backends')}), cold cache, in process",
                         fnum(ind.get("seconds"), 2),
                         f"compile + autotune of the first call; Inductor's one-time start-up ({fnum(ind.get('init_s'), 1)} s) "
                         f"excluded; kernels: {ind.get('kind')} {ind.get('config') or ''}"])
        L += [md_table(["what", "wall s", "detail"], rows), ""]
        ws, wo = ct.get("with_startup"), ct.get("without_startup")
        if ws and wo:
            L.append(f"Like for like, one-time start-ups counted on both sides: gemmtune {fnum(ws['gemmtune_s'], 2)} s "
                     f"(engine start + select) vs Inductor {fnum(ws['inductor_s'], 2)} s (start-up + compile and "
                     f"autotune), Inductor / gemmtune {fratio(ct.get('inductor_over_gemmtune'))}; on neither side: "
                     f"gemmtune select {fnum(wo['gemmtune_s'], 2)} s vs Inductor compile and autotune "
                     f"{fnum(wo['inductor_s'], 2)} s, {fratio(ct.get('inductor_over_gemmtune_without_startup'))}. "
                     f"gemmtune faster in both: **{'yes' if ct.get('gemmtune_faster') else 'NO'}**. (Mixed, as "
                     f"reported before: gemmtune with its engine start vs Inductor without its start-up, "
                     f"{fratio(ct.get('inductor_over_gemmtune_mixed'))}.)")
        elif ct.get("inductor_over_gemmtune_mixed"):
            L.append(f"Inductor / gemmtune (gemmtune with its engine start, Inductor without its start-up): "
                     f"{fratio(ct['inductor_over_gemmtune_mixed'])}; no like-for-like figure (a start-up time is missing).")
        for e in ct.get("errors", []):
            L.append(f"- error: {e}")
        L.append("")
    return L


def render_softmax_markdown(doc):
    """bench/softmax.py's .md: a table per problem (summary.problems), the summary per dtype, the criteria."""
    s = doc["summary"]
    v = doc["environment"]["versions"]
    L = [f"# gemmtune softmax on the H200, {doc['date']}", "",
         f"Device: {doc['device']}; torch {v.get('torch')}, triton {v.get('triton')}; "
         f"gemmtune {doc['environment']['gemmtune'].get('version')}  ",
         f"Command: `{doc['command']}`  ",
         f"Copy bandwidth measured in this run: **{s['copy']['copy_TBps']:.3f} TB/s** ({s['copy']['what']})", "",
         "TB/s = (bytes of x read + bytes of y written) / median time; % copy = of the copy bandwidth above.", "",
         "| rows x cols | dtype | gemmtune pick | gemmtune TB/s | % copy | gemmtune us | torch us | torch TB/s | plain Triton TB/s | vs torch | vs plain | tune s | checks |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["problems"]:
        if "speedup_vs_torch" not in r:  # not timed
            L.append(f"| {r['rows']}x{r['cols']} | {r['dtype']} | error: {r.get('error', '?')} | | | | | | | | | | |")
            continue
        pk, tr, pl = r["pick"], r["torch"], r["triton_plain"]
        ok = all(r[n]["correct"] for n in SOFTMAX_CONTENDERS)
        L.append(f"| {r['rows']}x{r['cols']} | {r['dtype']} | {pk['backend']} {pk['candidate_id']} | {pk['tbps']:.3f} | "
                 f"{pk['pct_copy']:.1f} | {pk['median_us']:.1f} | {tr['median_us']:.1f} | {tr['tbps']:.3f} | {pl['tbps']:.3f} | "
                 f"{r['speedup_vs_torch']:.2f} | {r['speedup_vs_triton_plain']:.2f} | {r.get('tune_s', 0):.1f} | "
                 f"{'ok' if ok else 'FAIL'} |")
    L += ["", "## Summary", ""]
    for d, b in s["by_dtype"].items():
        L.append(f"- {d}: min {b['min_pct_copy']:.1f}% of copy, min x{b['min_speedup_vs_torch']:.2f} vs torch "
                 f"(geomean x{b['geomean_speedup_vs_torch']:.2f}; vs plain Triton x{b['geomean_speedup_vs_triton_plain']:.2f})")
    L.append("")
    for k, val in s["criteria"].items():
        L.append(f"- {k}: {'**met**' if val else '**not met**'}")
    if s["failures"]:
        L += ["", "## Failures", ""] + [f"- {f}" for f in s["failures"]]
    if s["skipped"]:
        L += ["", f"Skipped (budget): {', '.join(s['skipped'])}"]
    return "\n".join(L) + "\n"
