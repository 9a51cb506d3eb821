"""The block-scaled FP8 baseline where torch._scaled_mm has no block scales: a plain Triton GEMM
written the way DeepSeek-V3's public inference code writes its fp8_gemm (one program per output
tile, BLOCK_K = 128 = the scale block, each k block's tl.dot result multiplied by A's 1x128 scales
and B's 128x128 scale before it is added, Triton's autotuner over a few tile shapes). Our own
code, for the bench only: what a PyTorch user would write or copy, not gemmtune's template.

    D[m, n] (bf16) = sum over k blocks j of (A[:, j] @ W[:, j]^T) * sa[j, m] * sb[n // 128, j]

Scale layouts: gemmtune's (include/gemmtune/problem.hpp): sa [kb, m] contiguous (M-major), sb
[nb, round_up(kb, 4)] contiguous.
"""

from __future__ import annotations

import triton
import triton.language as tl

NAME = "triton block-scaled (DeepSeek-V3 reference style, bench's own)"

# DeepSeek's own search space is block_m 16..64 x block_n 32..128, stages 3..6; a smaller list
# with the larger tiles that suit m >= 2048 keeps the autotuner's first call short.
_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=st, num_warps=w)
            for bm, bn, st, w in ((64, 128, 4, 4), (128, 128, 3, 8), (128, 64, 4, 4), (64, 64, 5, 4))]


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _block_fp8_gemm(a, w, d, sa, sb, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    BLOCK_K: tl.constexpr = 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    kb_count = tl.cdiv(K, BLOCK_K)
    ld_sb = (kb_count + 3) // 4 * 4
    a_ptrs = a + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]   # A [M, K] row-major
    w_ptrs = w + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]   # W [N, K] row-major, read as W^T
    sa_ptrs = sa + rm % M
    sb_ptrs = sb + (rn % N // 128) * ld_sb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for j in range(kb_count):
        kmask = rk < K - j * BLOCK_K
        x = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)
        y = tl.load(w_ptrs, mask=kmask[:, None], other=0.0)
        s_a = tl.load(sa_ptrs + j * M)
        s_b = tl.load(sb_ptrs + j)
        acc += tl.dot(x, y) * s_a[:, None] * s_b[None, :]
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    d_ptrs = d + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(d_ptrs, acc.to(d.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


_TUNED = {}  # (M, N, K) -> the autotuner's pick


def block_fp8_gemm(a, w, sa, sb, out):
    """out[m, n] (bf16) = the block-scaled A[m, k] @ W[n, k]^T (fp8, contiguous); sa, sb in
    gemmtune's layouts. Returns out. The first call of a shape autotunes; later calls launch the
    picked config directly (the autotuner's per-call Python work would outlast the bench's GPU
    spin and land inside the timing)."""
    M, K = a.shape
    N = w.shape[0]
    cfg = _TUNED.get((M, N, K))
    if cfg is None:
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))  # noqa: E731
        _block_fp8_gemm[grid](a, w, out, sa, sb, M, N, K)
        _TUNED[(M, N, K)] = _block_fp8_gemm.best_config
        return out
    bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
    _block_fp8_gemm.fn[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a, w, out, sa, sb, M, N, K, BLOCK_M=bm, BLOCK_N=bn, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return out
