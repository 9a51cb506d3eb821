"""What bench/h200.py (GEMM) and bench/softmax.py share: sample statistics and the interleaved
timing loop (docs: bench/README.md "Method")."""

from __future__ import annotations

import math
import time


def quantile(sorted_vals, q):
    """Linear interpolation between closest ranks (numpy's default); 0.0 for no values."""
    if not sorted_vals:
        return 0.0
    pos = (len(sorted_vals) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(samples):
    """{median_us, p20_us, p80_us, min_us, samples, spread = (p80 - p20) / median} over the finite
    samples (None values where there are none)."""
    s = sorted(x for x in samples if x is not None and math.isfinite(x))
    if not s:
        return {"median_us": None, "p20_us": None, "p80_us": None, "min_us": None, "samples": 0, "spread": None}
    med = quantile(s, 0.5)
    p20, p80 = quantile(s, 0.2), quantile(s, 0.8)
    return {"median_us": med, "p20_us": p20, "p80_us": p80, "min_us": s[0], "samples": len(s),
            "spread": (p80 - p20) / med if med > 0 else None}


def geomean(xs):
    """Geometric mean of the positive finite values; None when there are none."""
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def time_interleaved(torch, fns, rounds, warmup_ms, before_sample, warm_up_with_it=False):
    """({name: [us, ...]}, {name: median host us per call}).

    Warm-up: rounds of one call of every fn (preceded by before_sample() when warm_up_with_it)
    until warmup_ms have passed, at least two. Then `rounds` rounds, each one sample of every fn in
    an order rotated by the round: before_sample() (an L2 flush and a GPU spin: outside the timed
    region), CUDA events around one call; one synchronisation a round. The host time of each call
    is kept: a call whose host side outlasts the spin would have its launch overhead inside the
    timed region."""
    names = list(fns)
    t0 = time.perf_counter()
    n = 0
    while True:
        for nm in names:
            if warm_up_with_it:
                before_sample()
            fns[nm]()
        n += 1
        torch.cuda.synchronize()
        if n >= 2 and (time.perf_counter() - t0) * 1e3 >= warmup_ms:
            break
    starts = [torch.cuda.Event(enable_timing=True) for _ in names]
    ends = [torch.cuda.Event(enable_timing=True) for _ in names]
    out = {nm: [] for nm in names}
    host = {nm: [] for nm in names}
    clock = time.perf_counter
    for r in range(rounds):
        shift = r % len(names)
        order = names[shift:] + names[:shift]
        for j, nm in enumerate(order):
            before_sample()
            starts[j].record()
            h0 = clock()
            fns[nm]()
            host[nm].append((clock() - h0) * 1e6)
            ends[j].record()
        ends[len(order) - 1].synchronize()
        for j, nm in enumerate(order):
            out[nm].append(starts[j].elapsed_time(ends[j]) * 1e3)
    return out, {nm: quantile(sorted(v), 0.5) for nm, v in host.items()}
