"""The result row, one schema for every op's bench (bench/README.md "rows[]"): one row per
(problem, candidate or contender, kind of timing)."""

from __future__ import annotations


def result_row(p, *, backend, candidate, candidate_id, role, timing, times, contender=None, rel_err=None,
               rel_err_vs_torch=None, compile_s=None, correct=None, status="ok", reason="", winner=False,
               default=False, memory_bound=None, stream_us=None, **extra):
    """p: the problem (GEMM Problem or SoftmaxProblem: its fields() come first, its throughput() takes
    the median). times: {median_us, p20_us, p80_us, samples}, from stats.summarize() or a tune
    report's result; median_us 0 or None = not timed, then every time field is null. rel_err: null
    when not measured, also for a negative value (a report's -1); NaN stays (an output with NaN).
    memory_bound, stream_us: the stream ceiling (parts/stream.py), given on GEMM side-by-side and
    decoder_graph rows, null elsewhere: memory_bound (m <= 128, or the roof's memory term over its
    compute term), stream_us (the measured time to stream the problem's min_bytes once from a cold
    L2; a decoder chain: the sum over its GEMMs; null unless memory-bound); the row's over_stream =
    median_us / stream_us (1.0 = at the streaming limit; null without both).
    extra: the fields of some rows only, last (side by side: backend_best, host_us, input_sets;
    GEMM: inductor; decoder_graph: graph (true: the median is one CUDA-graph replay of the chain);
    softmax: pct_copy, worst_ratio)."""
    med = times.get("median_us")
    timed = bool(med) and med > 0
    p20, p80 = (times.get("p20_us"), times.get("p80_us")) if timed else (None, None)
    row = p.fields()
    row.update({"backend": backend, "candidate": candidate, "candidate_id": candidate_id, "role": role})
    if contender is not None:
        row["contender"] = contender
    row.update({"timing": timing, "median_us": med if timed else None, "p20_us": p20, "p80_us": p80,
                "samples": times.get("samples"), **p.throughput(med if timed else None),
                "rel_err": None if (rel_err is not None and rel_err < 0) else rel_err,
                "rel_err_vs_torch": rel_err_vs_torch, "compile_s": compile_s, "correct": correct, "status": status,
                "reason": reason, "winner": bool(winner), "default": bool(default),
                "spread": (p80 - p20) / med if (timed and p20 is not None and p80 is not None) else None,
                "memory_bound": memory_bound, "stream_us": stream_us,
                "over_stream": med / stream_us if (timed and stream_us) else None})
    row.update(extra)
    return row


def tune_rows(p, report, timing="tune"):
    """A tune report's candidates as rows (role candidate): gemmtune's own race during select."""
    return [result_row(p, backend=r["backend"], candidate=r["name"], candidate_id=r["id"], role="candidate",
                       timing=timing, times=r, rel_err=r.get("rel_err"), compile_s=r.get("compile_s"),
                       correct=r["status"] in ("ok", "pruned"), status=r["status"], reason=r.get("reason", ""),
                       winner=r.get("winner"), default=r.get("is_default"))
            for r in report.get("results", [])]
