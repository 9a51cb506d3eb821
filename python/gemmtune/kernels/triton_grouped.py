"""gemmtune's Triton grouped GEMM (mixture-of-experts layers; docs/grouped.md).

G groups share n and k. Group g computes, for each of its m_g rows r,

    D[r, :] = act(alpha * sa * sb * (A[r, :] @ B[g]^T) + bias[g])      fp32 accumulation

B is [G, N, K] (each expert's weight in nn.Linear layout, K contiguous); A and D are row-major
with leading dimensions lda, ldd (elements). The rows of A and D belong to the groups in one of
two layouts (MASKED constexpr), both described only by int32 arrays on the GPU (no host sync):

  contiguous (MASKED false)  A is [M_ROWS, K], D [M_ROWS, N]; rows[g] is the END of group g's
                             rows (cumulative, as torch._grouped_mm's offs): group g owns rows
                             rows[g-1] .. rows[g] - 1 (rows[-1] = 0). Rows past rows[G-1] are
                             neither read into D nor written.
  masked (MASKED true)       A is [G, MAX_M, K] viewed as [G * MAX_M, K], D likewise; rows[g] is
                             group g's count of valid rows (the first rows[g] of its MAX_M).
                             Rows past the count are not written.

The kernel clamps what it reads from `rows` (ends to [0, M_ROWS], counts to [0, MAX_M]) so that
bad device data can never make it read or write outside the buffers; such a split gives wrong
(but bounded) results, and the host API checks splits it can see.

Scales (SCALE): 0 none; 1 tensorwise: sa one float, sb[G] one per group (each expert's weight
quantized alone); 2 rowwise: sa[r] one per row of A (indexed like A's rows), sb[G, N]. bias:
[G, N] in D's dtype when HAS_BIAS. ACT: 0 none, 1 relu, 2 gelu_tanh, 3 silu.

The tile scheduler runs on the GPU: NUM_SMS programs each load the G row counts once, form the
cumulative tile counts (cdiv(m_g, BLOCK_M) * cdiv(N, BLOCK_N) per group), and stride over the
total; a tile finds its group by counting the groups whose cumulative count it has passed. Within
a group tiles go in grouped order (GROUP_M row-tiles swept together, column by column), so the
programs working at one time share B[g]'s tiles in L2. A and B are read with TMA through tensor
descriptors made in the kernel (needs global scratch, like gemm_persistent): one over all of A
(a box crossing a group's end reads the next group's rows, whose products the store drops), one
over B viewed as [G * N, K]. D is written with masked stores (each group's end is ragged).

MAX_G (constexpr) is a power of two >= G (the scheduler's vectors). K-major operands as wgmma
needs them for fp8: A row-major, B [N, K]; lda, K and the base pointers 16-byte aligned (TMA).
"""

import triton
import triton.language as tl

# The runtime arguments of grouped_gemm, in order (the constexprs follow).
RUNTIME_ARGS = (
    "a", "b", "d", "rows", "bias", "scale_a", "scale_b",
    "G", "M_ROWS", "MAX_M", "N", "K", "lda", "ldd", "alpha",
)

ACT_CODES = {"none": 0, "relu": 1, "gelu_tanh": 2, "silu": 3}
SCALE_CODES = {"none": 0, "tensorwise": 1, "rowwise": 2}


@triton.jit
def _group_tile(local, m, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(tile_m, tile_n) of a group's local tile index, grouped order (as triton_gemm._tile_coords)."""
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_band = GROUP_M * tiles_n
    band = local // per_band
    first_m = band * GROUP_M
    band_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    in_band = local - band * per_band
    return first_m + in_band % band_rows, in_band // band_rows


# G, M_ROWS and MAX_M change with the model and batch: never specialized (one compile serves all).
@triton.jit(do_not_specialize=["G", "M_ROWS", "MAX_M"])
def grouped_gemm(a, b, d, rows, bias, scale_a, scale_b,
                 G, M_ROWS, MAX_M, N, K, lda, ldd, alpha,
                 MASKED: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
                 MAX_IMPRECISE: tl.constexpr, MAX_G: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    # ---- the split, once per program: first row and row count of each group ([MAX_G]) -------
    gi = tl.arange(0, MAX_G)
    live = gi < G
    if MASKED:
        count = tl.load(rows + gi, mask=live, other=0)
        count = tl.minimum(tl.maximum(count, 0), MAX_M)
        start = gi * MAX_M
    else:
        end = tl.load(rows + gi, mask=live, other=0)
        end = tl.minimum(tl.maximum(end, 0), M_ROWS)
        start = tl.load(rows + gi - 1, mask=live & (gi > 0), other=0)
        start = tl.minimum(tl.maximum(start, 0), M_ROWS)
        count = tl.maximum(end - start, 0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(count, BLOCK_M) * tiles_n      # 0 for groups past G and empty groups
    cum = tl.cumsum(tiles, 0)                       # inclusive
    total = tl.sum(tiles, 0)

    if MASKED:
        a_desc = tl.make_tensor_descriptor(a, shape=[G * MAX_M, K], strides=[lda, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
    else:
        a_desc = tl.make_tensor_descriptor(a, shape=[M_ROWS, K], strides=[lda, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b, shape=[G * N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    k_tiles = tl.cdiv(K, BLOCK_K)

    for tile in tl.range(tl.program_id(0), total, NUM_SMS, flatten=True):
        # The group: how many groups' tiles end at or before this tile.
        g = tl.sum((cum <= tile).to(tl.int32), 0)
        here = gi == g
        first_tile = tl.sum(tl.where(here, cum - tiles, 0), 0)
        m_g = tl.sum(tl.where(here, count, 0), 0)
        row0 = tl.sum(tl.where(here, start, 0), 0)
        tile_m, tile_n = _group_tile(tile - first_tile, m_g, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = row0 + tile_m * BLOCK_M
        off_n = tile_n * BLOCK_N
        off_bn = g * N + off_n
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            off_k = kt * BLOCK_K
            a_t = a_desc.load([off_m, off_k])
            b_t = b_desc.load([off_bn, off_k])
            acc = tl.dot(a_t, b_t.T, acc, max_num_imprecise_acc=MAX_IMPRECISE, out_dtype=tl.float32)

        # ---- epilogue: rows of this group, columns < N --------------------------------------
        lm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)   # row within the group
        rn = off_n + tl.arange(0, BLOCK_N)
        in_m = lm < m_g
        in_n = rn < N
        r = (row0 + lm).to(tl.int64)
        v = acc * alpha
        if SCALE == 1:
            v = v * (tl.load(scale_a) * tl.load(scale_b + g))
        elif SCALE == 2:
            sa = tl.load(scale_a + r, mask=in_m, other=0.0)
            sb = tl.load(scale_b + g.to(tl.int64) * N + rn, mask=in_n, other=0.0)
            v = v * sa[:, None] * sb[None, :]
        if HAS_BIAS:
            v = v + tl.load(bias + g.to(tl.int64) * N + rn, mask=in_n, other=0.0).to(tl.float32)[None, :]
        if ACT == 1:
            v = tl.maximum(v, 0.0)
        elif ACT == 2:
            u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
            v = v / (1.0 + tl.exp(-2.0 * u))
        elif ACT == 3:
            v = v / (1.0 + tl.exp(-v))
        d_ptrs = d + r[:, None] * ldd + rn[None, :]
        tl.store(d_ptrs, v.to(d.dtype.element_ty), mask=in_m[:, None] & in_n[None, :])


KERNELS = {"grouped_gemm": grouped_gemm}
