"""ceilings: copy TB/s, bf16 and fp8 TFLOP/s measured now (at the start and again at the end of the
run: drift), and each problem's roof from them."""

from __future__ import annotations

from .. import log


def part_ceilings(run, end=False):
    c = run.gpu.ceilings(run.args.ceiling_rounds)
    run.gpu.empty_cache()  # the ceilings' buffers are gone once ceilings() returned
    c["gpu_state"] = run.gpu.state()
    if end:
        run.ceilings_end = c
    else:
        run.ceilings = c
    log(f"ceilings{' (end)' if end else ''}: copy {c['copy_TBps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
        f"fp8 {c['fp8_tflops']:.0f} TFLOP/s")


def roof_us(c, p):
    """GEMM problem p's time at the measured ceilings c (compute or memory bound); None without them."""
    if not c:
        return None
    peak = c["bf16_tflops"] if p.dtype == "bf16" else c["fp8_tflops"]
    return max(p.flops / (peak * 1e12), p.min_bytes / (c["copy_TBps"] * 1e12)) * 1e6
