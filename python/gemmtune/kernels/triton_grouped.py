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
quantized alone); 2 rowwise: sa[r] one per row of A (indexed like A's rows), sb[G, N]; 3 block
(DeepSeek-V3's, BLOCK_K = 128): sa one per 1x128 slice of each row of A, [KB, M_ROWS] (k block
outer, A's rows as the kernel indexes them inner: sa[j * M_ROWS + r]), sb one per 128x128 block
of each expert's weight, [G, NB, round_up(KB, 4)] (KB = cdiv(K, 128), NB = cdiv(N, 128)); each k
tile's MMA sums are scaled by its row's and column block's scales before the fp32 accumulator
takes them. bias: [G, N] in D's dtype when HAS_BIAS. ACT: 0 none, 1 relu, 2 gelu_tanh, 3 silu.

The tile scheduler runs on the GPU: NUM_SMS programs each load the G row counts once, form the
cumulative tile counts (cdiv(m_g, BLOCK_M) * cdiv(N, BLOCK_N) per group), and stride over the
total; a tile finds its group by counting the groups whose cumulative count it has passed. Within
a group tiles go in grouped order (GROUP_M row-tiles swept together, column by column), so the
programs working at one time share B[g]'s tiles in L2. A and B are read with TMA through tensor
descriptors made in the kernel (needs global scratch, like gemm_persistent): one over all of A
(a box crossing a group's end reads the next group's rows, whose products the store drops), one
over B viewed as [G * N, K]. D is written with masked stores (each group's end is ragged).

Row slices (CHUNKS, 1-4): a tile may span CHUNKS slices of BLOCK_M rows of one group; each k step
loads B's tile once and multiplies it with every slice the group's rows reach (each slice its own
fp32 accumulator; a variant of the k loop per slice count, picked at run time). Where groups are
short and uneven (decode, skewed routing), a group of up to CHUNKS * BLOCK_M rows then reads each
weight tile into the SM once instead of once per BLOCK_M rows. Block scales take CHUNKS = 1.

MAX_G (constexpr) is a power of two >= G (the scheduler's vectors). K-major operands as wgmma
needs them for fp8: A row-major, B [N, K]; lda, K and the base pointers 16-byte aligned (TMA).
"""

import time
from typing import Any, Optional

import triton
import triton.language as tl

# The runtime arguments of grouped_gemm, in order (the constexprs follow).
RUNTIME_ARGS = (
    "a", "b", "d", "rows", "bias", "scale_a", "scale_b",
    "G", "M_ROWS", "MAX_M", "N", "K", "lda", "ldd", "alpha",
)

ACT_CODES = {"none": 0, "relu": 1, "gelu_tanh": 2, "silu": 3}
SCALE_CODES = {"none": 0, "tensorwise": 1, "rowwise": 2, "block": 3}


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


@triton.jit
def _tile(a_desc, b_desc, d, bias, scale_a, scale_b, g, off_m, lm0, m_g, row0, off_n, N, k_tiles, a_rows, ld_sb,
          nb, ldd, alpha,
          HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, C: tl.constexpr):
    """One tile: C slices of BLOCK_M rows (A rows off_m + c * BLOCK_M, group rows lm0 + c * BLOCK_M)
    times BLOCK_N columns of B[g]; each k step loads B's tile once for all C slices."""
    off_bn = g * N + off_n
    acc0 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if C > 1:
        acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if C > 2:
        acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if C > 3:
        acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SCALE == 3:  # this tile's rows of A (past A's end: scale 0) and B's column blocks
        ra = off_m + tl.arange(0, BLOCK_M)
        sa_ptrs = scale_a + ra
        sb_ptrs = scale_b + (g * nb + (off_n + tl.arange(0, BLOCK_N)) // 128).to(tl.int64) * ld_sb
    for kt in range(k_tiles):
        off_k = kt * BLOCK_K
        a_t = a_desc.load([off_m, off_k])
        b_t = b_desc.load([off_bn, off_k]).T
        if SCALE == 3:  # BLOCK_K == 128 and C == 1: k tile kt is scale block kt
            part = tl.dot(a_t, b_t, max_num_imprecise_acc=MAX_IMPRECISE, out_dtype=tl.float32)
            sa = tl.load(sa_ptrs + kt.to(tl.int64) * a_rows, mask=ra < a_rows, other=0.0)
            sb = tl.load(sb_ptrs + kt, mask=off_n + tl.arange(0, BLOCK_N) < N, other=0.0)
            acc0 += part * sa[:, None] * sb[None, :]
        else:
            acc0 = tl.dot(a_t, b_t, acc0, max_num_imprecise_acc=MAX_IMPRECISE, out_dtype=tl.float32)
        if C > 1:
            acc1 = tl.dot(a_desc.load([off_m + BLOCK_M, off_k]), b_t, acc1, max_num_imprecise_acc=MAX_IMPRECISE,
                          out_dtype=tl.float32)
        if C > 2:
            acc2 = tl.dot(a_desc.load([off_m + 2 * BLOCK_M, off_k]), b_t, acc2,
                          max_num_imprecise_acc=MAX_IMPRECISE, out_dtype=tl.float32)
        if C > 3:
            acc3 = tl.dot(a_desc.load([off_m + 3 * BLOCK_M, off_k]), b_t, acc3,
                          max_num_imprecise_acc=MAX_IMPRECISE, out_dtype=tl.float32)
    _store(acc0, d, bias, scale_a, scale_b, g, lm0, m_g, row0, off_n, N, ldd, alpha,
           HAS_BIAS, ACT, SCALE, BLOCK_M, BLOCK_N)
    if C > 1:
        _store(acc1, d, bias, scale_a, scale_b, g, lm0 + BLOCK_M, m_g, row0, off_n, N, ldd, alpha,
               HAS_BIAS, ACT, SCALE, BLOCK_M, BLOCK_N)
    if C > 2:
        _store(acc2, d, bias, scale_a, scale_b, g, lm0 + 2 * BLOCK_M, m_g, row0, off_n, N, ldd, alpha,
               HAS_BIAS, ACT, SCALE, BLOCK_M, BLOCK_N)
    if C > 3:
        _store(acc3, d, bias, scale_a, scale_b, g, lm0 + 3 * BLOCK_M, m_g, row0, off_n, N, ldd, alpha,
               HAS_BIAS, ACT, SCALE, BLOCK_M, BLOCK_N)


@triton.jit
def _store(acc, d, bias, scale_a, scale_b, g, lm0, m_g, row0, off_n, N, ldd, alpha,
           HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The epilogue of one BLOCK_M x BLOCK_N slice whose first row is the group's row lm0: rows of
    the group, columns < N."""
    lm = lm0 + tl.arange(0, BLOCK_M)   # row within the group
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


# G, M_ROWS and MAX_M change with the model and batch: never specialized (one compile serves all).
@triton.jit(do_not_specialize=["G", "M_ROWS", "MAX_M"])
def grouped_gemm(a, b, d, rows, bias, scale_a, scale_b,
                 G, M_ROWS, MAX_M, N, K, lda, ldd, alpha,
                 MASKED: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, SCALE: tl.constexpr,
                 MAX_IMPRECISE: tl.constexpr, MAX_G: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, CHUNKS: tl.constexpr,
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
    TILE_M: tl.constexpr = BLOCK_M * CHUNKS         # a tile's rows: CHUNKS slices sharing B's tiles
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(count, TILE_M) * tiles_n        # 0 for groups past G and empty groups
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
    if MASKED:
        a_rows = G * MAX_M                          # rows of A as indexed (block scales' stride)
    else:
        a_rows = M_ROWS
    ld_sb = (tl.cdiv(K, 128) + 3) // 4 * 4          # block scales: sb's leading dimension
    nb = tl.cdiv(N, 128)

    # One slice a tile: the k loop is flattened into the tile loop (the next tile's loads overlap
    # this one's epilogue). Several: each tile runs the k loop of as many slices as its rows need.
    for tile in tl.range(tl.program_id(0), total, NUM_SMS, flatten=CHUNKS == 1):
        # The group: how many groups' tiles end at or before this tile.
        g = tl.sum((cum <= tile).to(tl.int32), 0)
        here = gi == g
        first_tile = tl.sum(tl.where(here, cum - tiles, 0), 0)
        m_g = tl.sum(tl.where(here, count, 0), 0)
        row0 = tl.sum(tl.where(here, start, 0), 0)
        tile_m, tile_n = _group_tile(tile - first_tile, m_g, N, TILE_M, BLOCK_N, GROUP_M)
        lm0 = tile_m * TILE_M
        off_m = row0 + lm0
        off_n = tile_n * BLOCK_N
        if CHUNKS == 1:
            _tile(a_desc, b_desc, d, bias, scale_a, scale_b, g, off_m, lm0, m_g, row0, off_n, N,
                  k_tiles, a_rows, ld_sb, nb, ldd, alpha, HAS_BIAS, ACT, SCALE, MAX_IMPRECISE,
                  BLOCK_M, BLOCK_N, BLOCK_K, 1)
        else:
            # The slices this tile's rows need (>= 1), at most CHUNKS: one variant a count, its
            # count a constexpr (a k loop and accumulators per slice), exactly one of them taken.
            slices = tl.cdiv(m_g - lm0, BLOCK_M)
            for c in tl.static_range(1, CHUNKS + 1):
                take = slices == c
                if c == CHUNKS:
                    take = slices >= c
                if take:
                    _tile(a_desc, b_desc, d, bias, scale_a, scale_b, g, off_m, lm0, m_g, row0, off_n, N,
                          k_tiles, a_rows, ld_sb, nb, ldd, alpha, HAS_BIAS, ACT, SCALE, MAX_IMPRECISE,
                          BLOCK_M, BLOCK_N, BLOCK_K, c)


KERNELS = {"grouped_gemm": grouped_gemm}


# ---- ahead-of-time compilation (gemmtune.worker: kernel "grouped_gemm") -------------------------
# Launch ABI (src/backends/triton/triton_grouped.cpp): RUNTIME_ARGS in order, then Triton's two
# hidden scratch pointers; grid (NUM_SMS, 1, 1).
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "fp8e4nv"}
_SCHEMA = {  # name: (type, default; None = required)
    "kernel": (str, None), "a_dtype": (str, None), "out_dtype": (str, None), "masked": (bool, None),
    "has_bias": (bool, False), "act": (str, "none"), "scale": (str, "none"), "fp8_fast_accum": (bool, False),
    "max_g": (int, None), "block_m": (int, None), "block_n": (int, None), "block_k": (int, None),
    "chunks": (int, 1), "group_m": (int, 8), "num_sms": (int, None), "num_warps": (int, 4), "num_stages": (int, 3),
    "n_div16": (bool, False), "k_div16": (bool, False), "template": (str, ""),
}


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def normalize_params(params: Any, kernel: Optional[str] = None) -> dict:
    """Checks types and values, fills defaults; raises CompileFailure("bad_request")."""
    from ..triton_compile import CompileFailure, checked_fields

    def bad(msg):
        return CompileFailure("bad_request", msg)

    out = checked_fields(params, _SCHEMA, kernel)
    if out["kernel"] not in KERNELS:
        raise bad(f"params.kernel: {out['kernel']!r} is not one of {', '.join(KERNELS)}")
    if out["a_dtype"] not in ("bf16", "fp16", "e4m3"):
        raise bad(f"params.a_dtype: {out['a_dtype']!r} is not one of bf16, fp16, e4m3")
    if out["out_dtype"] not in ("bf16", "fp16", "fp32"):
        raise bad(f"params.out_dtype: {out['out_dtype']!r} is not one of bf16, fp16, fp32")
    if out["act"] not in ACT_CODES:
        raise bad(f"params.act: {out['act']!r} is not one of {', '.join(ACT_CODES)}")
    if out["scale"] not in SCALE_CODES:
        raise bad(f"params.scale: {out['scale']!r} is not one of {', '.join(SCALE_CODES)}")
    if (out["scale"] != "none") != (out["a_dtype"] == "e4m3"):
        raise bad("params.scale: fp8 inputs take tensorwise, rowwise or block scales, other inputs none")
    if out["scale"] == "block" and out["block_k"] != 128:
        raise bad(f"params.block_k: block scales need block_k 128 (one k tile a scale block), got {out['block_k']}")
    for key, lo, hi in (("block_m", 16, 256), ("block_n", 16, 256), ("block_k", 16, 256), ("max_g", 16, 1024)):
        if not _pow2(out[key]) or not lo <= out[key] <= hi:
            raise bad(f"params.{key}: {out[key]} is not a power of two in [{lo}, {hi}]")
    if not 1 <= out["chunks"] <= 4:
        raise bad(f"params.chunks: {out['chunks']} not in [1, 4]")
    if out["scale"] == "block" and out["chunks"] != 1:
        raise bad(f"params.chunks: block scales take one row slice a tile, got {out['chunks']}")
    if not 1 <= out["group_m"] <= 64:
        raise bad(f"params.group_m: {out['group_m']} not in [1, 64]")
    if not 1 <= out["num_sms"] <= 1024:
        raise bad(f"params.num_sms: {out['num_sms']} not in [1, 1024]")
    if not _pow2(out["num_warps"]) or out["num_warps"] > 16:
        raise bad(f"params.num_warps: {out['num_warps']} is not a power of two in [1, 16]")
    if not 1 <= out["num_stages"] <= 8:
        raise bad(f"params.num_stages: {out['num_stages']} not in [1, 8]")
    return out


def build_source_args(p: dict):
    """(fn, signature, constexprs, attrs) for triton.compiler.ASTSource from normalized params."""
    fn = KERNELS[p["kernel"]]
    fp8 = p["a_dtype"] == "e4m3"
    in_t, out_t = "*" + DTYPES[p["a_dtype"]], "*" + DTYPES[p["out_dtype"]]
    types = {"a": in_t, "b": in_t, "d": out_t, "rows": "*i32", "bias": out_t, "scale_a": "*fp32", "scale_b": "*fp32",
             "G": "i32", "M_ROWS": "i32", "MAX_M": "i32", "N": "i32", "K": "i32", "lda": "i32", "ldd": "i32",
             "alpha": "fp32"}
    constexprs = {"MASKED": p["masked"], "HAS_BIAS": p["has_bias"], "ACT": ACT_CODES[p["act"]],
                  "SCALE": SCALE_CODES[p["scale"]],
                  "MAX_IMPRECISE": p["block_k"] if fp8 and not p["fp8_fast_accum"] else None,
                  "MAX_G": p["max_g"], "BLOCK_M": p["block_m"], "BLOCK_N": p["block_n"], "BLOCK_K": p["block_k"],
                  "CHUNKS": p["chunks"], "GROUP_M": p["group_m"], "NUM_SMS": p["num_sms"]}
    arg_names = list(fn.arg_names)
    assert arg_names[:len(RUNTIME_ARGS)] == list(RUNTIME_ARGS), arg_names
    assert sorted(arg_names[len(RUNTIME_ARGS):]) == sorted(constexprs), arg_names
    signature = {n: types[n] for n in RUNTIME_ARGS}
    signature.update({n: "constexpr" for n in arg_names[len(RUNTIME_ARGS):]})
    # Every pointer is 16-byte aligned (the engine checks); lda = K and ldd = N.
    div16 = [n for n in RUNTIME_ARGS if types[n].startswith("*")]
    div16 += (["N", "ldd"] if p["n_div16"] else []) + (["K", "lda"] if p["k_div16"] else [])
    attrs = {(arg_names.index(n),): [["tt.divisibility", 16]] for n in div16}
    return fn, signature, constexprs, attrs


def compile_grouped(params: Any, out_dir: str, kernel: Optional[str] = None) -> dict:
    """Compiles grouped_gemm for sm_90a into <out_dir>/<name>-<hash16>.cubin; returns {"artifact",
    "name", "kernel", "hash", "meta", "compile_s"} (as compile_gemm). Raises CompileFailure."""
    from .. import triton_compile as tc
    t0 = time.perf_counter()
    p = normalize_params(params, kernel)
    if not isinstance(out_dir, str) or not out_dir:
        raise tc.CompileFailure("bad_request", "out_dir: expected a path")
    in_bytes = 1 if p["a_dtype"] == "e4m3" else 2
    if p["chunks"] * p["block_m"] * p["block_n"] // (32 * p["num_warps"]) > tc.MAX_ACC_PER_THREAD:
        raise tc.CompileFailure("resource", f"{p['chunks']} {p['block_m']}x{p['block_n']} fp32 accumulators over "
                                f"{p['num_warps']} warps spill")
    stage = (p["block_m"] + p["block_n"]) * p["block_k"] * in_bytes
    if stage * max(1, p["num_stages"] - 1) > tc.MAX_SHARED_BYTES:
        raise tc.CompileFailure("resource", f"{p['num_stages'] - 1} stages of {stage} bytes exceed "
                                f"{tc.MAX_SHARED_BYTES} bytes of shared memory")
    out = tc.build_cubin(build_source_args(p), {"num_warps": p["num_warps"], "num_stages": p["num_stages"]}, out_dir)
    return {**out, "kernel": p["kernel"], "compile_s": round(time.perf_counter() - t0, 4)}
