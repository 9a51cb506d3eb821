"""Runs the Triton grouped kernel (python/gemmtune/kernels/triton_grouped.py) under Triton's CPU
interpreter on small cases and prints one line per case: "<case> <relative error> <reason or ok>".
Started by test_grouped.py in a process of its own (TRITON_INTERPRET must be set before triton is
imported). fp16 (the interpreter has no bf16 arithmetic), tiles of 16 rows so that a group spans
up to 5 of them: row slices (CHUNKS 1-4), ragged, empty and unowned rows, both layouts, bias and
silu, D poisoned with NaN, compared per group with a float64 reference."""

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from gemmtune.kernels import triton_grouped as tg  # noqa: E402

triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))


def case(G, N, K, counts, chunks, masked, epilogue, seed):
    """(relative error, reason): the kernel's D against float64 per group; '' when it passes."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(G, N, K, generator=gen).half()
    bias = torch.randn(G, N, generator=gen).half() if epilogue else None
    max_m = max(counts) if masked else 0
    if masked:
        a = torch.randn(G, max_m, K, generator=gen).half()
        rows = torch.tensor(counts, dtype=torch.int32)
        d = torch.full((G, max_m, N), float("nan"), dtype=torch.float16)
    else:
        a = torch.randn(sum(counts) + 5, K, generator=gen).half()  # 5 rows no group owns
        rows = torch.tensor(counts, dtype=torch.int32).cumsum(0).to(torch.int32)
        d = torch.full((a.shape[0], N), float("nan"), dtype=torch.float16)
    m_rows = G * max_m if masked else a.shape[0]
    tg.grouped_gemm[(3,)](a, w, d, rows, bias, None, None, G, m_rows, max_m, N, K, K, N, 0.5,
                          MASKED=masked, HAS_BIAS=epilogue, ACT=3 if epilogue else 0, SCALE=0,
                          MAX_IMPRECISE=None, MAX_G=16, BLOCK_M=16, BLOCK_N=32, BLOCK_K=16,
                          CHUNKS=chunks, GROUP_M=8, NUM_SMS=3)
    a2, d2 = a.reshape(-1, K), d.reshape(-1, N)
    owned = torch.zeros(d2.shape[0], dtype=torch.bool)
    worst, start = 0.0, 0
    for g, m in enumerate(counts):
        r0 = g * max_m if masked else start
        start += m
        if m == 0:
            continue
        owned[r0:r0 + m] = True
        ref = 0.5 * (a2[r0:r0 + m].double() @ w[g].double().T)
        if epilogue:
            ref = torch.nn.functional.silu(ref + bias[g].double())
        got = d2[r0:r0 + m].double()
        if not torch.isfinite(got).all():
            return float("inf"), f"group {g}: non-finite values"
        rel = ((got - ref).norm() / ref.norm()).item()
        bad = int(((got - ref).abs() > 2 ** -8 * ref.abs() + 2 ** -8 * ref.pow(2).mean().sqrt()).sum())
        worst = max(worst, rel)
        if rel > 2 ** -9 or bad:
            return rel, f"group {g} (m={m}): rel err {rel:.3g}, {bad} elements over the bound"
    if not torch.isnan(d2[~owned].float()).all():
        return worst, "rows no group owns were written"
    return worst, ""


if __name__ == "__main__":
    splits = ([5, 0, 70, 33, 16], [64, 1, 17, 49, 32])
    for chunks in (1, 2, 3, 4):
        for masked in (False, True):
            for i, counts in enumerate(splits):
                rel, why = case(5, 48, 48, counts, chunks, masked, epilogue=(i == 1), seed=chunks * 10 + i)
                print(f"chunks={chunks} masked={masked} counts={counts} {rel:.3g} {why or 'ok'}", flush=True)
