"""The report's figures (matplotlib, Agg: no display needed). Each builder returns Figure objects
named for their file; a figure whose data the inputs lack is not made (the page says why).

  roofline-<dtype>    every problem's pick and each backend's best: TFLOP/s vs arithmetic intensity,
                      under the run's measured compute and bandwidth ceilings
  speedup             the pick over torch (and over Inductor where measured), by m, per dtype
  backend-map         which backend the pick is, per layer (or shape) and m, per dtype
  scorecard           the three criteria per backend: code, compile time per candidate, performance
  correctness         candidates per backend by status
"""

from __future__ import annotations

import io
import math
import zlib
from dataclasses import dataclass
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from .analyze import Analysis, bests, by_m, ceilings_for, speedup  # noqa: E402
from .load import COMPILED_S  # noqa: E402

COLORS = {"cublaslt": "#1f77b4", "triton": "#ff7f0e", "cutlass": "#2ca02c", "cutedsl": "#d62728",
          "native": "#9467bd"}
STATUS_COLORS = {"ok": "#4c9a2a", "pruned": "#a6d96a", "wrong": "#d7191c", "failed": "#fdae61"}
DPI = 100


def color(backend: str) -> str:
    return COLORS.get(backend, "#7f7f7f")


@dataclass
class Figure:
    name: str  # file stem
    title: str
    caption: str
    fig: object  # matplotlib Figure

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
        return buf.getvalue()

    def svg(self) -> str:
        buf = io.StringIO()
        self.fig.savefig(buf, format="svg", bbox_inches="tight")
        return buf.getvalue()

    def close(self):
        plt.close(self.fig)


def _style():
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "legend.fontsize": 8, "svg.fonttype": "none", "svg.hashsalt": "gemmtune",
                         "figure.facecolor": "white"})


def _log2_m_axis(ax, ms):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms)
    ax.set_xticklabels([str(m) for m in ms], rotation=0)
    ax.minorticks_off()


# ---- roofline ------------------------------------------------------------------------------

def roofline(a: Analysis) -> list:
    out = []
    for dtype in a.dtypes:
        probs = [p for p in a.gemm if p.dtype == dtype and p.min_bytes > 0]
        if not probs:
            continue
        fig, ax = plt.subplots(figsize=(9, 5.6))
        xs = [p.intensity for p in probs]
        lo, hi = min(xs) / 1.5, max(xs) * 1.5
        roofs = []
        for run in a.runs:
            if not any(p.source == run.path or p.source.startswith(run.path + ":") for p in probs):
                continue
            peak, bw = ceilings_for(run, dtype)
            if peak or bw:
                roofs.append((run, peak, bw))
        for i, (run, peak, bw) in enumerate(roofs):
            grid = [lo * (hi / lo) ** (j / 200) for j in range(201)]
            ys = [min(v for v in (peak, bw * x if bw else None) if v) for x in grid]
            what = ", ".join(x for x in ((f"{peak:.0f} TFLOP/s" if peak else "no compute ceiling"),
                                         (f"copy {bw:.2f} TB/s" if bw else "no bandwidth ceiling")))
            label = f"measured roof: {what}" + (f" ({run.path.split('/')[-1]})" if len(roofs) > 1 else "")
            ax.plot(grid, ys, color="black", lw=1.6, ls=["-", "--", ":"][i % 3], label=label, zorder=1)
        seen = set()
        for p in probs:
            for b, t in bests(p).items():
                ax.scatter(p.intensity, p.flops / t.median_us / 1e6, s=14, color=color(b), alpha=0.35,
                           edgecolors="none", zorder=2, label=f"{b} best" if b not in seen else None)
                seen.add(b)
        picked = set()
        for p in probs:
            if p.pick:
                b = p.pick.backend
                ax.scatter(p.intensity, p.flops / p.pick.median_us / 1e6, s=46, color=color(b), marker="D",
                           edgecolors="black", linewidths=0.7, zorder=3,
                           label=f"pick: {b}" if b not in picked else None)
                picked.add(b)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arithmetic intensity (flop per byte of A + B read and D written once)")
        ax.set_ylabel("achieved TFLOP/s")
        note = "" if roofs else " - no measured ceilings in the input: roof not drawn"
        ax.set_title(f"Roofline, {dtype}: {len(probs)} problems{note}")
        ax.legend(loc="lower right", ncol=2, fontsize=7.5)
        cap = (f"Each problem's pick (diamonds) and each backend's best (dots) as achieved TFLOP/s against "
               f"arithmetic intensity, {dtype}. "
               + ("The roof is min(compute ceiling, intensity x copy bandwidth) as measured in the run "
                  "(bench part 'ceilings': the medians of torch.mm / torch._scaled_mm at 8192^3 and of a 1 GiB "
                  "device copy, so a pick can sit slightly above it)."
                  if roofs else "The inputs record no measured ceilings: roof not drawn (none is invented)."))
        out.append(Figure(f"roofline-{dtype}", f"Roofline ({dtype})", cap, fig))
    return out


# ---- speed-up over torch / Inductor ------------------------------------------------------

def speedup_figure(a: Analysis) -> Optional[Figure]:
    dtypes = [d for d in a.dtypes if any(speedup(p.torch, p.pick) for p in a.gemm if p.dtype == d)]
    if not dtypes:
        return None
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.2 * len(dtypes), 4.4), squeeze=False, sharey=True)
    for ax, dtype in zip(axes[0], dtypes):
        probs = [p for p in a.gemm if p.dtype == dtype]
        ms = sorted({p.m for p in probs})
        for p in probs:
            r = speedup(p.torch, p.pick)
            if r:
                ax.scatter(p.m * (1 + 0.06 * (zlib.crc32(p.label.encode()) % 7 - 3) / 3), r, s=16,
                           color=color(p.pick.backend), alpha=0.75, edgecolors="none", zorder=2)
            ri = speedup(p.inductor, p.pick)
            if ri:
                ax.scatter(p.m, ri, s=90, marker="*", color="gold", edgecolors="black", linewidths=0.6, zorder=4)
        g = by_m(probs, lambda p: speedup(p.torch, p.pick))
        ax.plot(list(g), list(g.values()), color="black", lw=1.4, marker="o", ms=4, zorder=3)
        ax.axhline(1.0, color="gray", lw=1, ls="--", zorder=1)
        _log2_m_axis(ax, ms)
        ax.set_xlabel("m (tokens)")
        ax.set_title(f"{dtype}: pick vs torch, geomean by m (line)")
    axes[0][0].set_ylabel("speed-up (baseline median / pick median)")
    handles = [Line2D([], [], color="black", marker="o", ms=4, label="geomean vs torch by m"),
               Line2D([], [], color="gold", marker="*", ms=11, ls="", markeredgecolor="black", label="vs Inductor max-autotune")]
    handles += [Line2D([], [], color=color(b), marker="o", ls="", label=f"vs torch, pick {b}")
                for b in a.backends if any(p.pick and p.pick.backend == b for p in a.gemm)]
    fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), bbox_to_anchor=(0.5, -0.06))
    cap = ("The pick's speed-up over torch (torch.mm; fp8: torch._scaled_mm) per problem, by m, colored by the "
           "pick's backend; stars: over Inductor max-autotune where the run measured it. Medians timed side by "
           "side in the same interleaved rounds; above 1 the pick is faster.")
    return Figure("speedup", "Pick vs torch and Inductor, by m", cap, fig)


# ---- where each backend wins ---------------------------------------------------------------

def _row_key(p):
    return f"{p.model}/{p.layer}" if p.model else f"n={p.n} k={p.k}"


def backend_map(a: Analysis) -> Optional[Figure]:
    dtypes = [d for d in a.dtypes if any(p.pick for p in a.gemm if p.dtype == d)]
    if not dtypes:
        return None
    backends = [b for b in a.backends if any(p.pick and p.pick.backend == b for p in a.gemm)]
    cmap = ListedColormap([color(b) for b in backends])
    rows_all = sorted({_row_key(p): p.n * p.k for p in a.gemm}.items(), key=lambda kv: (kv[1], kv[0]))
    height = max(3.5, 0.32 * len(rows_all) + 1.5)
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.6 * len(dtypes), height), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        probs = [p for p in a.gemm if p.dtype == dtype and p.pick]
        ms = sorted({p.m for p in probs})
        rows = [r for r, _ in rows_all if any(_row_key(p) == r for p in probs)]
        grid = [[math.nan] * len(ms) for _ in rows]
        for p in probs:
            i, j = rows.index(_row_key(p)), ms.index(p.m)
            grid[i][j] = backends.index(p.pick.backend)
            bb = bests(p)
            others = [t.median_us for b, t in bb.items() if b != p.pick.backend]
            if others and p.pick.backend in bb:
                margin = min(others) / bb[p.pick.backend].median_us
                ax.text(j, i, f"{margin:.2f}", ha="center", va="center", fontsize=6.5, color="white")
        ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=len(backends) - 0.5, aspect="auto")
        ax.set_xticks(range(len(ms)))
        ax.set_xticklabels([str(m) for m in ms])
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows, fontsize=7.5)
        ax.set_xlabel("m (tokens)")
        ax.set_title(f"{dtype}: the pick's backend")
        ax.grid(False)
    handles = [Line2D([], [], color=color(b), marker="s", ms=9, ls="", label=b) for b in backends]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), bbox_to_anchor=(0.5, -0.03))
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    cap = ("Which backend gemmtune picked for each layer (rows, by n*k, smallest at the top) and m (columns). "
           "The number in a cell is the pick's backend's best against the best other backend's best "
           "(their medians' ratio; above 1 it is faster).")
    return Figure("backend-map", "Which backend wins where", cap, fig)


# ---- the scorecard: maintenance, compile time, performance -------------------------------

def scorecard(a: Analysis, code: Optional[dict]) -> Figure:
    backends = [b for b in a.backends if a.scores[b].status]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 0.55 * len(backends) + 2.6))
    ys = list(range(len(backends)))[::-1]
    # maintenance
    if code:
        k = [code[b].gemm_kernel if b in code else 0 for b in backends]
        g = [code[b].gemm_glue if b in code else 0 for b in backends]
        s = [code[b].softmax_kernel + code[b].softmax_glue if b in code else 0 for b in backends]
        ax1.barh(ys, k, color="#31688e", label="GEMM kernel")
        ax1.barh(ys, g, left=k, color="#8fd1e0", label="GEMM glue")
        ax1.barh(ys, s, left=[x + y for x, y in zip(k, g)], color="#dddddd", label="softmax (kernel + glue)")
        for y, b, end in zip(ys, backends, [x + y + z for x, y, z in zip(k, g, s)]):
            ax1.text(end, y, f" {len(a.scores[b].configs)} configs", va="center", fontsize=7.5)
        ax1.set_xlim(0, max([x + y + z for x, y, z in zip(k, g, s)] + [1]) * 1.3)
        ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3, fontsize=7.5)
    else:
        ax1.text(0.5, 0.5, "source tree not found:\nlines not counted", ha="center", va="center",
                 transform=ax1.transAxes)
    ax1.set_title("maintenance: non-blank lines of code")
    # compile time per candidate
    data = [[c for c in a.scores[b].compile_s if c >= COMPILED_S] for b in backends]
    if any(data):
        pos = [y for y, d in zip(ys, data) if d]
        ax2.boxplot([d for d in data if d], positions=pos, orientation="horizontal", widths=0.5, showfliers=True,
                    flierprops={"markersize": 2})
        ax2.set_xscale("log")
    for y, b, d in zip(ys, backends, data):
        n_all = len(a.scores[b].compile_s)
        hits = n_all - len(d)
        txt = "not recorded" if n_all == 0 else f"{len(d)} compiled, {hits} store hits / loads"
        ax2.text(0.99, y + 0.32, txt, ha="right", va="center", fontsize=7, transform=ax2.get_yaxis_transform())
    ax2.set_xlabel(f"seconds per compiled candidate (log; compile_s >= {COMPILED_S} s)")
    ax2.set_title("compile time per candidate")
    # performance
    gm = [a.scores[b].geomean_vs_other or math.nan for b in backends]
    ax3.barh(ys, gm, color=[color(b) for b in backends], alpha=0.85)
    for y, b in zip(ys, backends):
        s = a.scores[b]
        w = s.worst
        if w:
            ax3.plot([w[0]], [y], marker="|", ms=14, color="black")
        ax3.text(0.02, y, f"{s.picked} picked, {s.fastest} fastest", va="center", fontsize=7.5,
                 transform=ax3.get_yaxis_transform(), color="white", fontweight="bold")
    ax3.axvline(1.0, color="gray", ls="--", lw=1)
    ax3.set_xlabel("geomean of (best other backend / this backend's best); |: worst problem")
    ax3.set_title("performance vs the best other backend")
    for ax in (ax1, ax2, ax3):
        ax.set_yticks(ys)
        ax.set_yticklabels(backends)
        ax.set_ylim(-0.6, len(backends) - 0.4)
    fig.tight_layout()
    cap = ("The seed's three criteria per backend, side by side: the code it takes (counted from the source "
           "tree when this report was made) and its number of configs (distinct candidates in the inputs); "
           "compile time per candidate as recorded by the tunes; performance as the geomean over problems of the "
           "best other backend's median over this backend's best (above 1 it is faster), with its worst problem.")
    return Figure("scorecard", "Scorecard: maintenance, compile time, performance", cap, fig)


def correctness(a: Analysis) -> Figure:
    backends = [b for b in a.backends if a.scores[b].status]
    statuses = ["ok", "pruned", "wrong", "failed"]
    statuses += sorted({s for b in backends for s in a.scores[b].status} - set(statuses))
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(backends) + 1.8))
    ys = list(range(len(backends)))[::-1]
    left = [0] * len(backends)
    for st in statuses:
        vals = [a.scores[b].status.get(st, 0) for b in backends]
        ax.barh(ys, vals, left=left, color=STATUS_COLORS.get(st, "#999999"), label=st)
        left = [x + v for x, v in zip(left, vals)]
    for y, b, total in zip(ys, backends, left):
        s = a.scores[b].status
        ax.text(total, y, f"  {total} run, {s.get('wrong', 0)} wrong, {s.get('failed', 0)} failed",
                va="center", fontsize=8)
    ax.set_yticks(ys)
    ax.set_yticklabels(backends)
    ax.set_xlim(0, max(left + [1]) * 1.35)
    ax.set_xlabel("candidates (every problem's tune)")
    ax.legend(loc="lower right")
    ax.set_title("Correctness: every candidate checked against gemmtune's reference")
    cap = ("Candidates per backend by status: ok (correct, timed), pruned (correct, dropped early as clearly "
           "slower), wrong (failed verification: never selectable), failed (compile, load or launch failed).")
    return Figure("correctness", "Correctness", cap, fig)


def build(a: Analysis, code: Optional[dict]) -> list:
    _style()
    figs = roofline(a)
    for f in (speedup_figure(a), backend_map(a)):
        if f:
            figs.append(f)
    if a.scores:
        figs.append(scorecard(a, code))
        figs.append(correctness(a))
    return figs
