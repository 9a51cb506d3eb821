"""The stream ceiling (issue 14, deliver 3), measured in the ceilings part: how long this GPU needs to
read B bytes once from a cold L2 with a streaming-read kernel of the bench's own (stream_read.py),
best of its configs, at powers of two from 4 MiB to 1 GiB and at the exact byte count of every
memory-bound problem of the run; and each memory-bound problem's time as a multiple of it."""

from __future__ import annotations

import math
import time

from .. import log, warn
from ..stats import summarize

POW2_SIZES = tuple(1 << e for e in range(22, 31))   # 4 MiB .. 1 GiB
DECODE_M = 128   # m <= DECODE_M is memory-bound by definition (the decode m values of m_values.csv)


def memory_bound(c, p):
    """Whether GEMM problem p counts as memory-bound: m <= DECODE_M, or the roof's memory term
    (min_bytes at the measured copy bandwidth) exceeds its compute term (flops at the measured peak
    of p's dtype). Without ceilings c, m <= DECODE_M only."""
    if p.m <= DECODE_M:
        return True
    if not c:
        return False
    peak = c["bf16_tflops"] if p.dtype == "bf16" else c["fp8_tflops"]
    return p.min_bytes / (c["copy_TBps"] * 1e12) > p.flops / (peak * 1e12)


def stream_sizes(c, problems):
    """The byte counts to measure: POW2_SIZES and the min_bytes of every memory-bound problem."""
    return sorted(set(POW2_SIZES) | {p.min_bytes for p in problems if memory_bound(c, p)})


def measure_stream(run, sizes):
    """run.stream: {sizes[{bytes, median_us, p20_us, p80_us, spread, samples, config, GBps}], configs,
    checks{config: ok}, seconds, what}. Per size every config is timed in the same interleaved rounds
    (cold L2, events, --ceiling-rounds), and the config with the lowest median is kept. A config whose
    sum is wrong is a mismatch and is not timed."""
    gpu, a = run.gpu, run.args
    t0 = time.monotonic()
    gpu.stream_setup(max(sizes))
    # the check: a size whose last BLOCK is partial (program 0's tail) and a power of two
    checks = {}
    for nbytes in (sizes[0] + 4 * 1000, POW2_SIZES[0]):
        for name, ok in gpu.stream_check(nbytes).items():
            checks[name] = checks.get(name, True) and ok
    bad = sorted(n for n, ok in checks.items() if not ok)
    for n in bad:
        msg = f"MISMATCH stream ceiling: config {n}'s sum differs from torch's"
        run.mismatches.append(msg)
        warn(msg)
    out = []
    for nbytes in sizes:
        fns = {n: f for n, f in gpu.stream_fns(nbytes).items() if n not in bad}
        st = {n: summarize(v) for n, v in gpu.time_interleaved(fns, a.ceiling_rounds, 5.0).items()}
        best = min(st, key=lambda n: st[n]["median_us"])
        b = st[best]
        out.append({"bytes": nbytes, "median_us": b["median_us"], "p20_us": b["p20_us"], "p80_us": b["p80_us"],
                    "spread": b["spread"], "samples": b["samples"], "config": best,
                    "GBps": nbytes / b["median_us"] * 1e-3})
    gpu.stream_release()
    run.stream = {"sizes": out, "configs": sorted(checks), "checks": checks, "seconds": time.monotonic() - t0,
                  "what": "one read of B bytes from a cold L2 (256 MiB flush and a GPU spin before every sample), "
                          "launch included (events around one launch); per size the best config's median of "
                          f"{a.ceiling_rounds} rounds, all configs interleaved; powers of two 4 MiB .. 1 GiB and the "
                          "exact min_bytes of every memory-bound problem (others log-log interpolated)"}
    pick = lambda n: next(e for e in out if e["bytes"] == n)  # noqa: E731
    log(f"stream ceiling: {len(out)} sizes in {run.stream['seconds']:.1f} s; "
        + ", ".join(f"{n >> 20} MiB {pick(n)['median_us']:.1f} us" for n in (1 << 23, 1 << 26, 1 << 30)))


def stream_us(stream, nbytes):
    """The streaming time of nbytes from the measured curve: the measured value at that size, else
    linear in log(time) over log(bytes) between its neighbours (the nearest two at either end); None
    without a curve."""
    pts = [(e["bytes"], e["median_us"]) for e in (stream or {}).get("sizes", []) if e.get("median_us")]
    if not pts:
        return None
    for b, us in pts:
        if b == nbytes:
            return us
    if len(pts) == 1:
        return pts[0][1] * nbytes / pts[0][0]
    i = next((j for j, (b, _) in enumerate(pts) if b > nbytes), len(pts))
    (b0, t0), (b1, t1) = pts[min(max(i - 1, 0), len(pts) - 2)], pts[min(max(i, 1), len(pts) - 1)]
    f = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
    return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))

