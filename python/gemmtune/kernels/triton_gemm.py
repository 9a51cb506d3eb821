"""gemmtune's Triton GEMM templates (the contract is docs/triton-backend.md).

    D = act(alpha * sa * sb * (A @ B) + beta * C + bias)      fp32 accumulation

A [M, K], B [K, N], C and D [M, N], each row-major (*_ROW) or column-major with a leading
dimension in elements. Three kernels share one runtime argument list (see RUNTIME_ARGS):

  gemm_tiled        one output tile per program, grouped tile order (any M, N, K, any layout,
                    any leading dimension): loads read rows rm % M / columns rn % N (no
                    row/column masks), K is masked unless EVEN_K, the store masks; A/B offsets
                    in i32 when I32_OFFSETS (the caller checked they fit), else int64.
                    SPLIT_K > 1 writes raw fp32 partials to workspace [SPLIT_K, M, N]
                    (row-major, packed) and applies no epilogue.
  gemm_persistent   NUM_SMS programs loop over the tiles (grouped order); A and B are read with
                    TMA through tensor descriptors made in the kernel (tl.make_tensor_descriptor:
                    needs global scratch). TMA needs 16-byte aligned row strides and, for fp8
                    and fp32, K-major operands: see PERSISTENT_LAYOUTS.
  splitk_reduce     D = epilogue(sum over SPLIT_K of workspace).

Programmatic dependent launch: each kernel waits for the previous kernel on the stream
(gdc_wait: griddepcontrol.wait) before its first memory access, and lets the next kernel launch
(gdc_launch_dependents) once its main loop is done. The C++ backend launches them without the
programmatic-stream-serialization attribute (docs/triton-backend.md says why), so the wait is a
no-op; the trigger still lets an overlapped kernel after this one start early.

These functions are compiled ahead of time by gemmtune.triton_compile (no GPU needed) and
launched from C++; they are also ordinary @triton.jit kernels (tests/python/gpu_smoke_triton.py
launches them directly with torch tensors).

Constexpr codes: ACT 0 none, 1 relu, 2 gelu_tanh, 3 silu; SCALE 0 none, 1 tensorwise (one
float each), 2 rowwise (sa[m], sb[n]), 3 block (DeepSeek-V3's fine-grained scaling: sa[kb, m]
M-major, one per 1x128 slice of A's rows; sb[nb, round_up(kb, 4)] row-major, one per 128x128
block of B; layouts in include/gemmtune/problem.hpp). With block scales each BLOCK_K slice's
MMA result is multiplied by its scales before it is added to the fp32 accumulator (BLOCK_K must
divide 128, so a slice never straddles two scale blocks), and the epilogue applies none. DOT_PRECISION is tl.dot's input_precision ("ieee", or
"tf32" for fp32 inputs with tf32 allowed). MAX_IMPRECISE is tl.dot's max_num_imprecise_acc:
None (Triton's default: for fp8 on sm_90 that is "fast accumulation", never promoted) or, for
fp8 with precise accumulation, BLOCK_K (the MMA's partial sums are added into the fp32
accumulator after every BLOCK_K slice, as cuBLAS does without fast accumulation).
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

# The runtime arguments of gemm_tiled and gemm_persistent, in order (the constexprs follow).
RUNTIME_ARGS = (
    "a", "b", "c", "d", "bias", "scale_a", "scale_b", "workspace",
    "M", "N", "K", "lda", "ldb", "ldc", "ldd", "alpha", "beta",
)
# The runtime arguments of splitk_reduce, in order.
REDUCE_RUNTIME_ARGS = (
    "workspace", "c", "d", "bias", "scale_a", "scale_b", "M", "N", "ldc", "ldd", "alpha", "beta",
)

ACT_CODES = {"none": 0, "relu": 1, "gelu_tanh": 2, "silu": 3}
SCALE_CODES = {"none": 0, "tensorwise": 1, "rowwise": 2, "block": 3}
SCALE_BLOCK = 128  # block scaling's k (and n) block

# gemm_persistent reads A and B with TMA. Supported: every layout for 16-bit inputs (the MMA
# reads transposed 16-bit tiles from shared memory); for fp8 and fp32 inputs only K-major
# operands, i.e. A row-major and B column-major (Hopper's wgmma takes fp8 / tf32 operands
# K-major only). Always: ld_div16 of a and b true (TMA row strides must be multiples of
# 16 bytes). C and D are read and written with ordinary (masked) loads and stores: any
# layout, any leading dimension.
PERSISTENT_LAYOUTS = {
    "16bit": [(True, True), (True, False), (False, True), (False, False)],  # (a_row, b_row)
    "fp8": [(True, False)],
    "fp32": [(True, False)],
}


@triton.jit
def _tile_coords(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M row-tiles are swept together, column by column (L2 reuse)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = tile // per_group
    first_m = group * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    in_group = tile - group * per_group
    tile_m = first_m + in_group % rows
    tile_n = in_group // rows
    return tile_m, tile_n


@triton.jit
def _epilogue(acc, om, on, M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
              C_ROW: tl.constexpr, D_ROW: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
              ACT: tl.constexpr, SCALE: tl.constexpr):
    """acc: fp32 sums of A @ B at rows om, columns on (broadcastable index tensors: [BM, 1] and
    [1, BN] in the GEMM kernels, equal-shaped vectors in splitk_reduce). Stores D. SCALE 3
    (block): acc is already scaled."""
    in_m = om < M
    in_n = on < N
    mask = in_m & in_n
    v = acc * alpha
    if SCALE == 1:
        v = v * (tl.load(scale_a) * tl.load(scale_b))
    elif SCALE == 2:
        sa = tl.load(scale_a + om, mask=in_m, other=0.0)
        sb = tl.load(scale_b + on, mask=in_n, other=0.0)
        v = v * sa * sb
    if HAS_C:
        if C_ROW:
            c_ptrs = c + om.to(tl.int64) * ldc + on
        else:
            c_ptrs = c + om + on.to(tl.int64) * ldc
        v = v + beta * tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        v = v + tl.load(bias + on, mask=in_n, other=0.0).to(tl.float32)
    if ACT == 1:
        v = tl.maximum(v, 0.0)
    elif ACT == 2:
        # gelu(tanh): 0.5 v (1 + tanh(u)) = v * sigmoid(2u), u = sqrt(2/pi) (v + 0.044715 v^3)
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        v = v / (1.0 + tl.exp(-2.0 * u))
    elif ACT == 3:
        v = v / (1.0 + tl.exp(-v))
    if D_ROW:
        d_ptrs = d + om.to(tl.int64) * ldd + on
    else:
        d_ptrs = d + om + on.to(tl.int64) * ldd
    tl.store(d_ptrs, v.to(d.dtype.element_ty), mask=mask)


@triton.jit
def _block_scaled(part, k0, rows, cols, M, N, K, scale_a, scale_b, MASKED: tl.constexpr):
    """part * sa[kb, rows][:, None] * sb[cols // 128, kb][None, :]: one BLOCK_K slice's MMA
    result (starting at k index k0) with its block scales. rows / cols: [BM] / [BN] indices,
    in range unless MASKED (then rows >= M, cols >= N read 0)."""
    kb = k0 // 128
    ld_sb = ((K + 127) // 128 + 3) // 4 * 4  # sb's leading dimension: round_up(ceil(K / 128), 4)
    sa_ptrs = scale_a + kb.to(tl.int64) * M + rows
    sb_ptrs = scale_b + (cols // 128).to(tl.int64) * ld_sb + kb
    if MASKED:
        sa = tl.load(sa_ptrs, mask=rows < M, other=0.0)
        sb = tl.load(sb_ptrs, mask=cols < N, other=0.0)
    else:
        sa = tl.load(sa_ptrs)
        sb = tl.load(sb_ptrs)
    return part * sa[:, None] * sb[None, :]


@triton.jit
def _offset(x, I32_OFFSETS: tl.constexpr):
    """x in the index type of the main loop: i32 where the caller promises every A/B offset
    (padded K included) is below 2^31, else int64."""
    if I32_OFFSETS:
        return x
    else:
        return x.to(tl.int64)


@triton.jit
def gemm_tiled(a, b, c, d, bias, scale_a, scale_b, workspace,
               M, N, K, lda, ldb, ldc, ldd, alpha, beta,
               A_ROW: tl.constexpr, B_ROW: tl.constexpr, C_ROW: tl.constexpr, D_ROW: tl.constexpr,
               HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
               DOT_PRECISION: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr,
               EVEN_K: tl.constexpr, I32_OFFSETS: tl.constexpr):
    gdc_wait()
    tile_m, tile_n = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    pid_k = tl.program_id(1)
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)

    # The loads read rows rm % M and columns rn % N: always in range, so the main loop needs no
    # row/column masks (rows/columns past M/N hold repeated data whose results the masked store
    # below drops). Only K is masked, and only when EVEN_K is false (K % (BLOCK_K * SPLIT_K) != 0).
    # No loop-carried pointer tensors; per operand, whichever form compiles to fewer
    # instructions per K step (measured in SASS, docs/triton-backend.md):
    # - K contiguous (A row-major, B column-major): row pointers made once, plus the k index
    #   each step (one wide multiply-add per address);
    # - K strided (A column-major, B row-major): a scalar base per step (64-bit scalar
    #   arithmetic) plus the tile's offsets, made once.
    ra = rm % M
    rb = rn % N
    if A_ROW:
        a_rows = a + _offset(ra[:, None], I32_OFFSETS) * lda  # [BM, 1] pointers
    else:
        a_tile = ra[:, None] + _offset(rk[None, :], I32_OFFSETS) * lda  # [BM, BK] offsets
    if B_ROW:
        b_tile = _offset(rk[:, None], I32_OFFSETS) * ldb + rb[None, :]  # [BK, BN] offsets
    else:
        b_cols = b + _offset(rb[None, :], I32_OFFSETS) * ldb  # [1, BN] pointers

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Program pid_k of SPLIT_K sums the K tiles pid_k, pid_k + SPLIT_K, ...
    for kt in range(pid_k, tl.cdiv(K, BLOCK_K), SPLIT_K):
        k0 = kt * BLOCK_K
        if A_ROW:
            a_ptrs = a_rows + (k0 + rk)[None, :]
        else:
            a_ptrs = (a + k0.to(tl.int64) * lda) + a_tile
        if B_ROW:
            b_ptrs = (b + k0.to(tl.int64) * ldb) + b_tile
        else:
            b_ptrs = b_cols + (k0 + rk)[:, None]
        if EVEN_K:
            a_t = tl.load(a_ptrs)
            b_t = tl.load(b_ptrs)
        else:
            # (Mask forms chosen by SASS count, as above.)
            if A_ROW:
                a_t = tl.load(a_ptrs, mask=(k0 + rk)[None, :] < K, other=0.0)
            else:
                a_t = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
            if B_ROW:
                b_t = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
            else:
                b_t = tl.load(b_ptrs, mask=(k0 + rk)[:, None] < K, other=0.0)
        if SCALE == 3:
            # Block scales: the slice's sums alone, scaled, then accumulated (rows ra / columns rb
            # are in range: the scale loads need no masks).
            part = tl.dot(a_t, b_t, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                          out_dtype=tl.float32)
            acc += _block_scaled(part, k0, ra, rb, M, N, K, scale_a, scale_b, False)
        else:
            acc = tl.dot(a_t, b_t, acc, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                         out_dtype=tl.float32)

    gdc_launch_dependents()
    if SPLIT_K == 1:
        _epilogue(acc, rm[:, None], rn[None, :], M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
                  C_ROW, D_ROW, HAS_C, HAS_BIAS, ACT, SCALE)
    else:
        # Raw partial sums; splitk_reduce applies alpha, scales, C, bias and act.
        w_ptrs = workspace + (pid_k.to(tl.int64) * M + rm[:, None]) * N + rn[None, :]
        tl.store(w_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gemm_persistent(a, b, c, d, bias, scale_a, scale_b, workspace,
                    M, N, K, lda, ldb, ldc, ldd, alpha, beta,
                    A_ROW: tl.constexpr, B_ROW: tl.constexpr, C_ROW: tl.constexpr, D_ROW: tl.constexpr,
                    HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
                    DOT_PRECISION: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    gdc_wait()
    # Descriptors over the matrices as stored: a column-major A is A^T [K, M] row-major.
    # Out-of-bounds boxes are zero-filled by TMA: no masks in the main loop.
    if A_ROW:
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[lda, 1], block_shape=[BLOCK_M, BLOCK_K])
    else:
        a_desc = tl.make_tensor_descriptor(a, shape=[K, M], strides=[lda, 1], block_shape=[BLOCK_K, BLOCK_M])
    if B_ROW:
        b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[ldb, 1], block_shape=[BLOCK_K, BLOCK_N])
    else:
        b_desc = tl.make_tensor_descriptor(b, shape=[N, K], strides=[ldb, 1], block_shape=[BLOCK_N, BLOCK_K])

    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        tile_m, tile_n = _tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = tile_m * BLOCK_M
        off_n = tile_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(k_tiles):
            off_k = kt * BLOCK_K
            if A_ROW:
                a_t = a_desc.load([off_m, off_k])
            else:
                a_t = a_desc.load([off_k, off_m]).T
            if B_ROW:
                b_t = b_desc.load([off_k, off_n])
            else:
                b_t = b_desc.load([off_n, off_k]).T
            if SCALE == 3:
                part = tl.dot(a_t, b_t, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                              out_dtype=tl.float32)
                acc += _block_scaled(part, off_k, off_m + tl.arange(0, BLOCK_M), off_n + tl.arange(0, BLOCK_N),
                                     M, N, K, scale_a, scale_b, True)
            else:
                acc = tl.dot(a_t, b_t, acc, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                             out_dtype=tl.float32)
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        _epilogue(acc, rm[:, None], rn[None, :], M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
                  C_ROW, D_ROW, HAS_C, HAS_BIAS, ACT, SCALE)
    gdc_launch_dependents()


@triton.jit
def splitk_reduce(workspace, c, d, bias, scale_a, scale_b, M, N, ldc, ldd, alpha, beta,
                  C_ROW: tl.constexpr, D_ROW: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
                  ACT: tl.constexpr, SCALE: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    gdc_wait()
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mn = M.to(tl.int64) * N
    live = idx < mn
    acc = tl.zeros((BLOCK, ), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(workspace + s * mn + idx, mask=live, other=0.0)
    gdc_launch_dependents()
    om = idx // N
    on = idx % N
    # Lanes past M * N have om >= M: the epilogue masks them.
    _epilogue(acc, om, on, M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
              C_ROW, D_ROW, HAS_C, HAS_BIAS, ACT, SCALE)


KERNELS = {
    "gemm_tiled": gemm_tiled,
    "gemm_persistent": gemm_persistent,
    "splitk_reduce": splitk_reduce,
}
