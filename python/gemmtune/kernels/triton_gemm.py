"""gemmtune's Triton GEMM templates (the contract is docs/triton-backend.md).

    D = act(alpha * sa * sb * (A @ B) + beta * C + bias)      fp32 accumulation

A [M, K], B [K, N], C and D [M, N], each row-major (*_ROW) or column-major with a leading
dimension in elements. Three kernels share one runtime argument list (see RUNTIME_ARGS):

  gemm_tiled        one output tile per program, grouped tile order, masked loads (any M, N, K,
                    any layout, any leading dimension); SPLIT_K > 1 writes raw fp32 partials
                    to workspace [SPLIT_K, M, N] (row-major, packed) and applies no epilogue.
  gemm_persistent   NUM_SMS programs loop over the tiles (grouped order); A and B are read with
                    TMA through tensor descriptors made in the kernel (tl.make_tensor_descriptor:
                    needs global scratch). TMA needs 16-byte aligned row strides and, for fp8
                    and fp32, K-major operands: see PERSISTENT_LAYOUTS.
  splitk_reduce     D = epilogue(sum over SPLIT_K of workspace).

These functions are compiled ahead of time by gemmtune.triton_compile (no GPU needed) and
launched from C++; they are also ordinary @triton.jit kernels (tests/python/gpu_smoke_triton.py
launches them directly with torch tensors).

Constexpr codes: ACT 0 none, 1 relu, 2 gelu_tanh, 3 silu; SCALE 0 none, 1 tensorwise (one
float each), 2 rowwise (sa[m], sb[n]). DOT_PRECISION is tl.dot's input_precision ("ieee", or
"tf32" for fp32 inputs with tf32 allowed). MAX_IMPRECISE is tl.dot's max_num_imprecise_acc:
None (Triton's default: for fp8 on sm_90 that is "fast accumulation", never promoted) or, for
fp8 with precise accumulation, BLOCK_K (the MMA's partial sums are added into the fp32
accumulator after every BLOCK_K slice, as cuBLAS does without fast accumulation).
"""

import triton
import triton.language as tl

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
SCALE_CODES = {"none": 0, "tensorwise": 1, "rowwise": 2}

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
    [1, BN] in the GEMM kernels, equal-shaped vectors in splitk_reduce). Stores D."""
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
def gemm_tiled(a, b, c, d, bias, scale_a, scale_b, workspace,
               M, N, K, lda, ldb, ldc, ldd, alpha, beta,
               A_ROW: tl.constexpr, B_ROW: tl.constexpr, C_ROW: tl.constexpr, D_ROW: tl.constexpr,
               HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
               DOT_PRECISION: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr):
    tile_m, tile_n = _tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    pid_k = tl.program_id(1)
    rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    k_first = pid_k * BLOCK_K
    K_STEP: tl.constexpr = BLOCK_K * SPLIT_K

    # 64-bit offsets: M * lda may pass 2^31 elements.
    if A_ROW:
        a_ptrs = a + rm[:, None].to(tl.int64) * lda + (k_first + rk)[None, :]
        a_step = K_STEP
    else:
        a_ptrs = a + rm[:, None] + (k_first + rk)[None, :].to(tl.int64) * lda
        a_step = K_STEP * lda.to(tl.int64)
    if B_ROW:
        b_ptrs = b + (k_first + rk)[:, None].to(tl.int64) * ldb + rn[None, :]
        b_step = K_STEP * ldb.to(tl.int64)
    else:
        b_ptrs = b + (k_first + rk)[:, None] + rn[None, :].to(tl.int64) * ldb
        b_step = K_STEP
    in_m = rm[:, None] < M
    in_n = rn[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_first, K, K_STEP):
        k_left = K - k0
        a_t = tl.load(a_ptrs, mask=in_m & (rk[None, :] < k_left), other=0.0)
        b_t = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & in_n, other=0.0)
        acc = tl.dot(a_t, b_t, acc, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                     out_dtype=tl.float32)
        a_ptrs += a_step
        b_ptrs += b_step

    if SPLIT_K == 1:
        _epilogue(acc, rm[:, None], rn[None, :], M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
                  C_ROW, D_ROW, HAS_C, HAS_BIAS, ACT, SCALE)
    else:
        # Raw partial sums; splitk_reduce applies alpha, scales, C, bias and act.
        w_ptrs = workspace + (pid_k.to(tl.int64) * M + rm[:, None]) * N + rn[None, :]
        tl.store(w_ptrs, acc, mask=in_m & in_n)


@triton.jit
def gemm_persistent(a, b, c, d, bias, scale_a, scale_b, workspace,
                    M, N, K, lda, ldb, ldc, ldd, alpha, beta,
                    A_ROW: tl.constexpr, B_ROW: tl.constexpr, C_ROW: tl.constexpr, D_ROW: tl.constexpr,
                    HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
                    DOT_PRECISION: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
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
            acc = tl.dot(a_t, b_t, acc, input_precision=DOT_PRECISION, max_num_imprecise_acc=MAX_IMPRECISE,
                         out_dtype=tl.float32)
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        _epilogue(acc, rm[:, None], rn[None, :], M, N, c, d, bias, scale_a, scale_b, ldc, ldd, alpha, beta,
                  C_ROW, D_ROW, HAS_C, HAS_BIAS, ACT, SCALE)


@triton.jit
def splitk_reduce(workspace, c, d, bias, scale_a, scale_b, M, N, ldc, ldd, alpha, beta,
                  C_ROW: tl.constexpr, D_ROW: tl.constexpr, HAS_C: tl.constexpr, HAS_BIAS: tl.constexpr,
                  ACT: tl.constexpr, SCALE: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mn = M.to(tl.int64) * N
    live = idx < mn
    acc = tl.zeros((BLOCK, ), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(workspace + s * mn + idx, mask=live, other=0.0)
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
