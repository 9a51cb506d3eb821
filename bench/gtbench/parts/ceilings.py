"""ceilings: copy TB/s, bf16 and fp8 TFLOP/s measured now (at the start and again at the end of the
run: drift), the stream ceiling at the start (parts/stream.py), and each problem's roof from them."""

from __future__ import annotations

from .. import log
from .stream import measure_stream, stream_sizes


def part_ceilings(run, end=False, stream_problems=()):
    """At the start (end False) also the stream ceiling, at POW2_SIZES and the exact bytes of the
    memory-bound ones of stream_problems (the suite's and the decoder's GEMMs)."""
    c = run.gpu.ceilings(run.args.ceiling_rounds)
    run.gpu.empty_cache()  # the ceilings' buffers are gone once ceilings() returned
    c["gpu_state"] = run.gpu.state()
    if end:
        run.ceilings_end = c
    else:
        run.ceilings = c
    log(f"ceilings{' (end)' if end else ''}: copy {c['copy_TBps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
        f"fp8 {c['fp8_tflops']:.0f} TFLOP/s")
    if not end:
        measure_stream(run, stream_sizes(c, stream_problems))


def roof_us(c, p):
    """GEMM problem p's time at the measured ceilings c (compute or memory bound); None without them."""
    if not c:
        return None
    peak = c["bf16_tflops"] if p.dtype == "bf16" else c["fp8_tflops"]
    return max(p.flops / (peak * 1e12), p.min_bytes / (c["copy_TBps"] * 1e12)) * 1e6
