"""The HTML page: one self-contained file (figures embedded as base64 PNG, inline CSS, no script,
no URL to fetch), readable from a file with no network."""

from __future__ import annotations

import base64
import html
import statistics
from typing import Optional

from .analyze import Analysis, bests, by_m, ceilings_for, geomean, speedup
from .load import COMPILED_S

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1500px;
color:#222;padding:0 16px;line-height:1.4}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;border-bottom:2px solid #ddd;padding-bottom:3px;margin-top:34px}
h3{font-size:15px}table{border-collapse:collapse;margin:8px 0 14px;font-size:12.5px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f0f3f6}
td.n{text-align:right;font-variant-numeric:tabular-nums}figure{margin:12px 0 22px}
figure img{max-width:100%;border:1px solid #e3e3e3}figcaption{font-size:12.5px;color:#555;max-width:1100px}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;white-space:pre-wrap;word-break:break-all}
.note{color:#8a5a00}.small{font-size:12px;color:#555}ul{margin-top:4px}
"""


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def fmt(v, spec=".3f", none="-") -> str:
    if v is None:
        return none
    try:
        return format(v, spec)
    except (TypeError, ValueError):
        return str(v)


def table(head: list, rows: list, numeric: Optional[set] = None) -> str:
    numeric = numeric or set()
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td class=n>{esc(c)}</td>" if i in numeric else f"<td>{esc(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def figure_html(f, png: bytes) -> str:
    b64 = base64.b64encode(png).decode()
    return (f'<figure id="fig-{esc(f.name)}"><img alt="{esc(f.title)}" src="data:image/png;base64,{b64}">'
            f"<figcaption><b>{esc(f.title)}.</b> {esc(f.caption)}</figcaption></figure>")


def _ratio_by(probs, ratio) -> tuple:
    vals = [r for r in (ratio(p) for p in probs) if r]
    return geomean(vals), len(vals), (min(vals) if vals else None), (max(vals) if vals else None)


def summary_lines(a: Analysis) -> list:
    """The headline numbers (also the text summary on stdout)."""
    out = []
    for run in a.runs:
        n_g = sum(p.op == "gemm" for p in run.problems)
        out.append(f"{run.path}: {run.kind}, {len(run.problems)} problems ({n_g} GEMM)"
                   + (", compile times only" if run.compile_only else ""))
    for dtype in a.dtypes:
        probs = [p for p in a.gemm if p.dtype == dtype]
        picks = {}
        for p in probs:
            if p.pick:
                picks[p.pick.backend] = picks.get(p.pick.backend, 0) + 1
        line = f"{dtype}: {len(probs)} problems; picks " + ", ".join(f"{b} {n}" for b, n in sorted(picks.items()))
        g, n, lo, hi = _ratio_by(probs, lambda p: speedup(p.torch, p.pick))
        line += (f"; pick vs torch geomean {g:.3f} over {n} (min {lo:.3f}, max {hi:.3f})" if g
                 else "; pick vs torch: not measured")
        gi, ni, _, _ = _ratio_by(probs, lambda p: speedup(p.inductor, p.pick))
        if gi:
            line += f"; vs Inductor {gi:.3f} over {ni}"
        out.append(line)
    for b in a.backends:
        s = a.scores[b]
        g, w = s.geomean_vs_other, s.worst
        out.append(f"{b}: picked {s.picked}, fastest {s.fastest} of {s.problems}; vs best other geomean "
                   f"{fmt(g)}, worst {fmt(w[0]) if w else '-'}{' (' + w[1] + ')' if w else ''}; candidates "
                   f"{sum(s.status.values())}: {s.status.get('wrong', 0)} wrong, {s.status.get('failed', 0)} failed")
    if a.other_ops:
        out.append("not plotted: " + ", ".join(f"{n} {op} problems" for op, n in a.other_ops.items()))
    return out


def _scorecard_tables(a: Analysis, code: Optional[dict]) -> str:
    out = []
    head = ["backend", "GEMM kernel lines", "GEMM glue lines", "softmax lines", "configs (distinct)",
            "candidates / problem (median)", "external dependencies (pins)"]
    rows = []
    for b in a.backends:
        s = a.scores[b]
        c = code.get(b) if code else None
        rows.append([b, c.gemm_kernel if c else "not counted", c.gemm_glue if c else "not counted",
                     (c.softmax_kernel + c.softmax_glue) if c else "not counted", len(s.configs),
                     fmt(statistics.median(s.per_problem) if s.per_problem else None, ".0f"),
                     (c.dependencies + (" (" + ", ".join(c.pins) + ")" if c.pins else "")) if c else "-"])
    out.append("<h3>Maintenance</h3>" + table(head, rows, {1, 2, 3, 4, 5}))
    if code:
        shared = code.get("shared")
        out.append(f"<p class=small>Non-blank lines, counted from the source tree when this report was made "
                   f"(python/gemmtune/report/maintenance.py lists which files belong to which backend). Kernel = "
                   f"device code and kernel templates; glue = host code, configs, compile toolchain. Shared by "
                   f"the Triton and CuTe DSL backends and not counted above: the Python compile worker, "
                   f"{shared.gemm_glue if shared else 0} lines.</p>")
    else:
        out.append("<p class=note>The report did not run from a gemmtune checkout: lines of code not counted.</p>")
    head = ["backend", "candidates with a compile time", "compiled (>= %.2f s)" % COMPILED_S, "median s",
            "p90 s", "max s", "total s", "store hits / loads", "measured on"]
    rows = []
    for b in a.backends:
        s = a.scores[b]
        st = s.compile_stats()
        if st["n"] == 0:
            rows.append([b, 0, "not recorded", "-", "-", "-", "-", "-", "not recorded"])
            continue
        rows.append([b, st["n"], st["n_compiled"], fmt(st["compiled_median"], ".2f"), fmt(st["compiled_p90"], ".2f"),
                     fmt(st["compiled_max"], ".2f"),
                     fmt(st["compiled_total"], ".1f"), st["n"] - st["n_compiled"],
                     s.machines_text()])
    out.append("<h3>Compile time per candidate</h3>" + table(head, rows, {1, 2, 3, 4, 5, 6, 7}))
    out.append(f"<p class=small>compile_s as each tune recorded it: a candidate whose artifact was already in the "
               f"store (or that only loads, as cuBLASLt's) shows below {COMPILED_S} s and is counted as a store "
               f"hit / load, not as a compile.</p>")
    head = ["backend", "problems raced", "picked", "fastest best", "geomean vs best other",
            "within 5% of best other", "worst case", "worst problem"]
    rows = []
    for b in a.backends:
        s = a.scores[b]
        w = s.worst
        rows.append([b, s.problems, s.picked, s.fastest, fmt(s.geomean_vs_other),
                     f"{s.within_5pct}/{len(s.ratios)}", fmt(w[0]) if w else "-", w[1] if w else "-"])
    out.append("<h3>Performance on the inputs' problems</h3>" + table(head, rows, {1, 2, 3, 4, 6}))
    out.append("<p class=small>Per problem, the best other backend's median over this backend's best (above 1 it "
               "is faster), on one kind of timing per problem: the bench's side-by-side medians where it timed every "
               "backend's best, else the race's medians. 'picked' counts gemmtune's choices (its race and duels), "
               "'fastest best' the problems where this backend's best had the lowest median.</p>")
    return "\n".join(out)


def _correctness(a: Analysis) -> str:
    statuses = ["ok", "pruned", "wrong", "failed"]
    extra = sorted({s for b in a.backends for s in a.scores[b].status} - set(statuses))
    head = ["backend", "candidates run"] + statuses + extra + ["quarantined"]
    rows = []
    for b in a.backends:
        s = a.scores[b].status
        rows.append([b, sum(s.values())] + [s.get(x, 0) for x in statuses + extra]
                    + [s.get("quarantined", "no such status")])
    out = [table(head, rows, set(range(1, len(head) - 1)))]
    out.append("<p class=small>Every candidate is checked against gemmtune's GPU reference during its tune; a wrong "
               "one is never selectable, a failed one (compile, load or launch) is out of the race with its reason. "
               "The engine records no 'quarantined' status (its statuses are ok, pruned, wrong, failed), so that "
               "column reads 'no such status' unless an input has one.</p>")
    reasons = [(b, st, r, n) for b in a.backends for (st, r), n in a.scores[b].reasons.most_common()]
    if reasons:
        out.append("<h3>Wrong and failed candidates, with reasons</h3>"
                   + table(["backend", "status", "reason", "count"], reasons[:200], {3}))
    else:
        out.append("<p><b>No candidate was wrong or failed in these inputs.</b></p>")
    mism = [(p.label, m) for p in a.gemm for m in p.mismatches]
    notes = [n for r in a.runs for n in r.notes if n.startswith("mismatch")]
    if mism or notes:
        out.append("<h3>Side-by-side check failures</h3>" + table(["problem", "contender"], mism[:200])
                   + "".join(f"<p class=note>{esc(n)}</p>" for n in notes))
    elif any(p.pick and p.pick.timing == "side_by_side" for p in a.gemm):
        out.append("<p>The bench's own side-by-side check (every contender's output against a float32 reference "
                   "and gemmtune's against torch's) found no mismatch.</p>")
    return "\n".join(out)


def _environment(a: Analysis) -> str:
    out = []
    for run in a.runs:
        out.append(f"<h3>{esc(run.path)} ({esc(run.kind)})</h3>")
        rows = list(run.environment) or [("environment", "not recorded")]
        out.append(table(["what", "value"], rows))
        out.append("<p><b>The command that made the data:</b></p>")
        out.append(f"<pre>{esc(run.command)}</pre>" if run.command else "<p class=note>not recorded in this input</p>")
        for n in run.notes:
            if not n.startswith("mismatch"):
                out.append(f"<p class=note>{esc(n)}</p>")
    return "\n".join(out)


def _ceilings(a: Analysis) -> str:
    rows = []
    for run in a.runs:
        if run.compile_only:
            continue
        for name, c in (("start", run.ceilings), ("end", run.ceilings_end)):
            if c:
                rows.append([run.path, name, fmt(c.get("copy_TBps"), ".3f"), fmt(c.get("bf16_tflops"), ".1f"),
                             fmt(c.get("fp8_tflops"), ".1f"), c.get("what", c.get("source", ""))])
        if not run.ceilings:
            rows.append([run.path, "-", "not measured", "not measured", "not measured",
                         "this input records no measured ceilings"])
    return table(["input", "when", "copy TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "how"], rows, {2, 3, 4})


def _speedup_table(a: Analysis) -> str:
    rows = []
    for dtype in a.dtypes:
        probs = [p for p in a.gemm if p.dtype == dtype]
        g = by_m(probs, lambda p: speedup(p.torch, p.pick))
        gi = by_m(probs, lambda p: speedup(p.inductor, p.pick))
        for m in sorted({p.m for p in probs}):
            n = sum(1 for p in probs if p.m == m and speedup(p.torch, p.pick))
            rows.append([dtype, m, n, fmt(g.get(m), ".3f", "not measured"), fmt(gi.get(m), ".3f", "not measured")])
    return table(["dtype", "m", "problems with torch", "pick vs torch (geomean)", "pick vs Inductor (geomean)"],
                 rows, {1, 2, 3, 4})


def _problems(a: Analysis) -> str:
    backends = a.backends
    head = ["problem", "dtype", "m", "n", "k", "pick", "pick candidate", "pick us", "TFLOP/s", "% roof",
            "vs torch", "vs Inductor"] + [f"{b} best us" for b in backends] + ["candidates ok/pruned/wrong/failed",
                                                                              "tune s", "timing"]
    rows = []
    run_of = {}
    for run in a.runs:
        for p in run.problems:
            run_of[id(p)] = run
    for p in a.gemm:
        bb = bests(p)
        run = run_of.get(id(p))
        peak, bw = ceilings_for(run, p.dtype) if run else (None, None)
        roof = None
        if p.pick and peak and bw:
            roof_tflops = min(peak, bw * p.intensity)
            roof = 100 * (p.flops / p.pick.median_us / 1e6) / roof_tflops
        st = {s: sum(1 for c in p.candidates if c.status == s) for s in ("ok", "pruned", "wrong", "failed")}
        rows.append([p.label, p.dtype, p.m, p.n, p.k, p.pick.backend if p.pick else "-", p.pick.name if p.pick else "-",
                     fmt(p.pick.median_us if p.pick else None, ".2f"),
                     fmt(p.flops / p.pick.median_us / 1e6 if p.pick else None, ".1f"), fmt(roof, ".0f"),
                     fmt(speedup(p.torch, p.pick)), fmt(speedup(p.inductor, p.pick))]
                    + [fmt(bb[b].median_us if b in bb else None, ".2f") for b in backends]
                    + ["/".join(str(st[s]) for s in st), fmt(p.select_s, ".2f"),
                       p.pick.timing if p.pick else "-"])
    numeric = set(range(2, 5)) | set(range(7, 12 + len(backends))) | {13 + len(backends)}
    return table(head, rows, numeric)


def render(a: Analysis, figs: list, pngs: dict, code: Optional[dict], made_by: str, generated: str) -> str:
    """The page. pngs: figure name -> PNG bytes."""
    by_name = {f.name: f for f in figs}

    def fig(name):
        return figure_html(by_name[name], pngs[name]) if name in by_name else ""

    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>gemmtune report</title>"
             f"<style>{CSS}</style></head><body>",
             "<h1>gemmtune report</h1>",
             f"<p class=small>Made {esc(generated)} by <code>{esc(made_by)}</code> from "
             f"{len(a.runs)} input{'s' if len(a.runs) != 1 else ''}.</p>",
             "<h2 id=summary>Summary</h2><ul>" + "".join(f"<li>{esc(s)}</li>" for s in summary_lines(a)) + "</ul>"]
    parts.append("<h2 id=roofline>Roofline per dtype</h2>")
    parts.append(_ceilings(a))
    roofs = [f for f in figs if f.name.startswith("roofline-")]
    parts.extend(fig(f.name) for f in roofs)
    if not roofs:
        parts.append("<p class=note>No GEMM problem with a known traffic in the inputs: no roofline.</p>")
    parts.append("<h2 id=speedup>Speed-up of the pick over torch and Inductor</h2>")
    if "speedup" in by_name:
        parts.append(fig("speedup") + _speedup_table(a))
    else:
        parts.append("<p class=note>Not measured: the inputs time no torch baseline side by side with the pick "
                     "(a tuning cache and the CLI's tune / suite output hold gemmtune's own candidates only).</p>")
    parts.append("<h2 id=wins>Which backend wins where</h2>")
    parts.append(fig("backend-map") or "<p class=note>No pick in the inputs.</p>")
    parts.append("<h2 id=scorecard>The three criteria per backend</h2>")
    parts.append(fig("scorecard"))
    parts.append(_scorecard_tables(a, code))
    parts.append("<h2 id=correctness>Correctness</h2>")
    parts.append(fig("correctness"))
    parts.append(_correctness(a))
    parts.append("<h2 id=environment>Environment and the command that made the data</h2>")
    parts.append(_environment(a))
    parts.append("<h2 id=problems>Every problem</h2><details><summary>"
                 f"{len(a.gemm)} GEMM problems (click to open)</summary>")
    parts.append(_problems(a))
    parts.append("</details></body></html>")
    return "\n".join(parts)
