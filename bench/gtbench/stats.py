"""Sample statistics of both benches (bench/README.md "Method")."""

from __future__ import annotations

import math
import statistics


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


def estimate(durations, default):
    """A cautious guess for the next item of a part: the larger of the median and the mean of the
    last 5 durations; `default` before the first."""
    if not durations:
        return default
    last = durations[-5:]
    return max(statistics.median(durations), sum(last) / len(last))
