"""gemmtune's Hopper (sm_90a) dense GEMM, written in NVIDIA's CuTe DSL.

Kernel terms (CuTe's (mode0, mode1, batch) convention, batch = 1):

    D[M, N] = act( alpha' * row_scale[M] * col_scale[N] * (A[M, K] . B[N, K]) + beta * C[M, N]
                   + bias[M or N] )

with alpha' = alpha (* sa[0] * sb[0] for tensorwise fp8 scales). The caller (compile.py) maps
the problem onto these terms; with swap-AB the kernel's M is the problem's n. Written for
ahead-of-time export (cute.compile on fake tensors, then export_to_c): nothing here needs a GPU.

CTA structure (warp specialization; 1 producer + W = tile_m / 64 consumer warpgroups):
- warpgroup 0, warp 0: the producer. Walks the CTA's tiles and issues TMA loads of A and B
  k-blocks into a ring of `stages` shared-memory slots (PipelineTmaAsync: per slot a "full"
  mbarrier that counts the bytes TMA delivers and an "empty" mbarrier the consumers arrive on).
  Warp 1 loads block scales, if any (below). Warpgroup 0 gives its registers up (setmaxnreg)
  to the consumers.
- With a cluster (cluster_m x cluster_n CTAs), the CTAs of a cluster row share their A tile and
  those of a cluster column their B tile: each CTA loads a 1/cluster_n slice of A and multicasts
  it to its row (same for B along the column), so L2 -> SM traffic drops by the cluster factor.
  A slot is free only when the consumers of every CTA that received data into it released it
  (the empty barrier counts (cluster_m + cluster_n - 1) x consumer warps arrivals).
- warpgroups 1..W: the consumers. Each owns 64 rows of the tile, issues wgmma (operands from
  shared memory, fp32 accumulators in registers), keeps one k-block batch in flight and releases
  a slot once the batch that read it has retired. fp8 promotes: each k-tile's wgmma batch
  accumulates into a fresh register tile that is added to the main accumulators in fp32 once
  it retired (wgmma's fp8 accumulation is not full fp32; a promotion interval of one 128-deep
  k-tile, as CUTLASS's default fp8 mainloop). Two such tiles alternate, so that the next
  k-tile's batch is in flight while the previous one is added (CUTLASS's own fp8 mainloop
  waits for all MMAs before each promotion: 8-11% slower there). Tiles wider than 128 (fp8:
  192) have room for one such tile only: each batch is promoted once it retired, and the two
  consumer warpgroups, which are not kept in step, hide each other's promotions (DeepGEMM's
  scheme), for the wider tile's lower shared-memory traffic per MMA.
  Block scales (DeepSeek-V3's 1x128 / 128x128, scale "block_m" / "block_n"): the k-tile is the
  scales' 128-deep k block, so its promotion is acc += part * sa(row, kb) * sb(col block, kb).
  The scales have their own small ring (SCALE_STAGES stages, own full / empty mbarriers), each
  stage a chunk of C = 4 or 8 k blocks of the tile's scales, loaded by warp 1 of warpgroup 0
  with two TMA loads (A's 1x128 scales, a box of their [kbs, m] array; B's block scales, a box
  of their [nb, round_up(kbs, 4)] rows): neither copies beside each k-tile's A and B tiles nor
  loads in warp 0's stream, each of which slowed the mainloop (_stage_scales). A consumer
  waits for a chunk at its first k-tile, reads its rows' A scales (2) and the tile's B scales
  before it issues each k block's batch, forms their products while the batch runs and applies
  them with one FFMA a register once it retired; the chunk is released after its last k
  block's batch retired. A tile whose extent T along the 128x128 blocks does not divide 128
  (192) straddles two blocks at a tile-dependent offset: it is cut into bands of gcd(T, 128)
  columns (64), each inside one block, one B scale per band.
- Epilogue (consumers): the fused math on the accumulators in fp32 (coordinates from an identity
  tensor partitioned like the accumulators; C, bias and scale vectors read from global memory
  with clamped indices, out-of-range values are never stored), conversion, registers -> shared
  memory (stmatrix) -> global memory (TMA store, which clips at the matrix edge), through a ring
  of epilogue buffers so that stores overlap the next tile's mainloop.
- Programmatic dependent launch (pdl != 0: launched with programmatic stream serialization, so
  the kernel may start while the previous kernel on the stream still runs): the producer loads
  the weights' first `stages` k-tiles of its first tile, then waits (griddepcontrol.wait) before
  it loads anything else; warp 1 waits before it loads block scales, the consumers before they
  read scales, C or bias or store D.
  Once the producer has issued its last load it lets the next kernel launch
  (griddepcontrol.launch_dependents). Without the launch attribute both instructions are no-ops.
- Tile scheduler: static persistent. The grid is min(#clusters of tiles, clusters that fit on
  the GPU) clusters; cluster c handles work items c, c + P, c + 2P, ... (P = clusters launched).
  A work item maps to a cluster tile in groups of `raster_group` cluster rows (M) swept along N,
  so that concurrently running clusters share A and B tiles in L2.

TMA zero-fills out-of-bounds loads and clips stores: any M, N, K >= 1 works as long as every
stride other than the unit one is a multiple of 16 bytes and the base pointers are 16-byte
aligned (the C++ side checks that).

Grouped mode (KernelConfig.grouped "contiguous" or "masked"; gemmtune/grouped.hpp; compiled
through `grouped_call`): G groups share N and K; group g multiplies its rows of A by B[g]
(B is (N, K, G)). contiguous: A (capacity, K, 1) and D (capacity, N, 1), group g owns rows
rows[g-1] .. rows[g] - 1 (rows[-1] = 0); masked: A (capacity, K, G) and D (capacity, N, G), group
g's first rows[g] rows of batch g. `rows` (int32 [G], on the GPU) is read by the kernel (ends and
counts clamped to [0, capacity], a start to its end), so the grid is the GPU's worth of CTAs and
the work is counted on the device: work item w is the w-th tile of the groups' tiles in group
order (within a group, the raster order above). A tile's A rows start at its group's first row
(a TMA coordinate offset, any row); rows past the group's end are loaded (the next group's, or
TMA's zeros) but never stored: a tile wholly inside its group is stored through TMA, the tile
that holds the group's end row by row from registers (predicated stores). No swap-AB, clusters
along N only (1 x cluster_n: the CTAs of a cluster share the group and A tile), no C; bias
[G, N], tensorwise sb[g], rowwise row_scale per row of A and col_scale [G, N]. The split may come
from the previous kernel, so a programmatic dependent launch is not offered (pdl = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cutlass_dsl import if_generate

# Shared memory one CTA may use on sm_90 (227 KiB, opt-in).
SMEM_BYTES = 232448
# Bytes set aside for the mbarriers, the struct's alignment padding and slack.
SMEM_RESERVED = 4096
ACTS = ("none", "relu", "gelu_tanh", "silu")
SCALES = ("none", "tensorwise", "rowwise", "block_m", "block_n")
# Block scaling's k block and n block (DeepSeek-V3's 1x128 / 128x128 scales).
SCALE_BLOCK = 128
# Stages of the block-scale ring (each holds scale_chunk k blocks' scales of one tile).
SCALE_STAGES = 2


@dataclass(frozen=True)
class KernelConfig:
    """Everything a compiled kernel bakes in besides the tensors' dtypes and layouts."""

    tile_m: int = 128  # 64 (one consumer warpgroup) or 128 (two)
    tile_n: int = 128  # 32..256, multiple of 32
    cluster_m: int = 1
    cluster_n: int = 1
    stages: int = 0  # mainloop slots; 0: as many as fit
    epi_stages: int = 2  # epilogue buffers
    raster_group: int = 8  # cluster rows per raster group (L2 locality)
    has_c: bool = False
    bias: str = "none"  # "none", "m" (bias[M], kernel rows) or "n" (bias[N])
    act: str = "none"
    # "tensorwise": alpha *= sa[0]*sb[0]; "rowwise": row_scale[M], col_scale[N]; block (fp8, per
    # 128-deep k block kb, applied at its promotion): "block_m": row_scale[kb * M + i] per kernel
    # row (1x128) and col_scale[(j / 128) * ld + kb] per 128x128 block (ld = round_up(kbs, 4));
    # "block_n" (the problem swapped): row_scale[(i / 128) * ld + kb], col_scale[kb * N + j].
    scale: str = "none"
    # The kernel operand that holds the problem's weights (its B; the kernel's A with swap-AB):
    # fetched before griddepcontrol.wait in a programmatic dependent launch.
    weights: str = "b"
    # "none" (a GEMM), or a grouped GEMM's row layout: "contiguous" or "masked" (module doc).
    grouped: str = "none"

    def check(self) -> None:
        if self.tile_m not in (64, 128):
            raise ValueError(f"tile_m: {self.tile_m} not in (64, 128)")
        if self.tile_n % 32 or not 32 <= self.tile_n <= 256:
            raise ValueError(f"tile_n: {self.tile_n} not a multiple of 32 in [32, 256]")
        for name in ("cluster_m", "cluster_n"):
            v = getattr(self, name)
            if v not in (1, 2, 4):
                raise ValueError(f"{name}: {v} not in (1, 2, 4)")
        if self.cluster_m * self.cluster_n > 4:
            raise ValueError(f"cluster: {self.cluster_m}x{self.cluster_n} has more than 4 CTAs")
        if self.stages < 0 or self.stages == 1:
            raise ValueError(f"stages: {self.stages} (0 = auto, else >= 2)")
        if self.epi_stages not in (1, 2, 3, 4):
            raise ValueError(f"epi_stages: {self.epi_stages} not in 1..4")
        if self.raster_group < 1:
            raise ValueError(f"raster_group: {self.raster_group} < 1")
        if self.bias not in ("none", "m", "n"):
            raise ValueError(f"bias: {self.bias!r} not in none, m, n")
        if self.act not in ACTS:
            raise ValueError(f"act: {self.act!r} not in {ACTS}")
        if self.scale not in SCALES:
            raise ValueError(f"scale: {self.scale!r} not in {SCALES}")
        if self.weights not in ("a", "b"):
            raise ValueError(f"weights: {self.weights!r} not in a, b")
        if self.grouped not in ("none", "contiguous", "masked"):
            raise ValueError(f"grouped: {self.grouped!r} not in none, contiguous, masked")
        if self.grouped != "none":
            if self.cluster_m != 1:
                raise ValueError(f"cluster_m: {self.cluster_m} (grouped: clusters along N only)")
            if self.has_c or self.weights != "b" or self.bias == "m" or self.scale not in ("none", "tensorwise", "rowwise"):
                raise ValueError("grouped: no C, no swap-AB, bias along N, scales none / tensorwise / rowwise")
        # Block scales: a tile is cut into bands of gcd(extent, 128) along the 128x128 blocks, one
        # B scale each per k block (scale_bands); more than 3 (tile N 160, 224) are refused.
        if self.scale == "block_m" and self.tile_n // math.gcd(self.tile_n, SCALE_BLOCK) > 3:
            raise ValueError(f"tile_n: {self.tile_n} spans more than 3 bands of a {SCALE_BLOCK}-wide "
                             "scale block (block scales)")


def block_scale_counts(cfg: KernelConfig) -> tuple[int, int]:
    """Block scales of a tile per k block (fp32): (vary, bands), the tile's extent along the
    1x128 scales (tile M for "block_m", tile N for "block_n": one scale per row) and its bands
    along the 128x128 blocks (scale_bands: extent / gcd(extent, 128)); (0, 0) without block
    scales."""
    if cfg.scale not in ("block_m", "block_n"):
        return 0, 0
    vary, fixed = (cfg.tile_m, cfg.tile_n) if cfg.scale == "block_m" else (cfg.tile_n, cfg.tile_m)
    return vary, fixed // math.gcd(fixed, SCALE_BLOCK)


def scale_blocks(cfg: KernelConfig) -> int:
    """The 128x128 blocks a tile's extent T along them can touch, wherever it starts (a multiple of
    gcd(T, 128)): 1 where T divides 128, 2 for 192. B's box in the scale ring is that wide."""
    if cfg.scale not in ("block_m", "block_n"):
        return 0
    fixed = cfg.tile_n if cfg.scale == "block_m" else cfg.tile_m
    return -(-(fixed + SCALE_BLOCK - math.gcd(fixed, SCALE_BLOCK)) // SCALE_BLOCK)


def scale_ring_bytes(cfg: KernelConfig, chunk: int) -> int:
    """Shared memory of the block-scale ring: SCALE_STAGES stages, each the tile's 1x128 scales
    of `chunk` k blocks (vary x chunk, vary-major: one TMA box) and its 128x128 block scales
    (chunk x scale_blocks, padded to 128 bytes so that every TMA destination is 128-byte
    aligned); 0 without block scales."""
    vary, _ = block_scale_counts(cfg)
    if not vary:
        return 0
    assert chunk * scale_blocks(cfg) <= 32
    return SCALE_STAGES * 4 * (vary * chunk + 32)


def plan_smem(cfg: KernelConfig, ab_bytes: int, d_bytes: int) -> tuple[int, int, int]:
    """(tile_k, stages, scale_chunk) for a config: tile K spans 128 bytes of A (64 16-bit or 128
    fp8 elements, one 128-byte swizzle row); a stage holds A's and B's k-tiles; stages =
    cfg.stages, or as many as fit next to the epilogue buffers and, with block scales, the scale
    ring at its smallest chunk (4 k blocks); scale_chunk, the ring's k blocks per stage: 8 where
    that still fits beside the stages, else 4 (0 without block scales). Raises ValueError when
    fewer than 2 stages fit. Pure arithmetic, mirrored by the C++ config space
    (src/backends/cutedsl/configs.cpp)."""
    tile_k = 128 // ab_bytes
    epi = cfg.epi_stages * min(cfg.tile_m, 128) * min(32, cfg.tile_n) * d_bytes
    per_stage = (cfg.tile_m + cfg.tile_n) * tile_k * ab_bytes
    avail = SMEM_BYTES - SMEM_RESERVED - epi
    fit = (avail - scale_ring_bytes(cfg, 4)) // per_stage
    stages = cfg.stages or fit
    if stages < 2 or stages > fit:
        raise ValueError(f"stages: {stages} do not fit in shared memory (2..{fit} for this tile)")
    chunk = 0
    if block_scale_counts(cfg)[0]:
        chunk = 8 if stages * per_stage + scale_ring_bytes(cfg, 8) <= avail else 4
    return tile_k, stages, chunk


def make_tiled_mma(cfg: KernelConfig, a_dtype, b_dtype, a_major, b_major, acc_dtype=cutlass.Float32):
    """The consumers' wgmma: tile M / 64 warpgroups stacked along M, each 64 x tile N."""
    return sm90_utils.make_trivial_tiled_mma(
        a_dtype, b_dtype, a_major.sm90_mma_major_mode(), b_major.sm90_mma_major_mode(),
        acc_dtype, (cfg.tile_m // 64, 1, 1), tiler_mn=(64, cfg.tile_n))


def acc_coords(tiled_mma, ctid, tile_coords):
    """The (m, n) coordinates of consumer thread `ctid`'s accumulators (ctid in 0..consumer
    threads - 1), in the accumulator fragment's order: tile_coords (tile M, tile N) of an
    identity tensor partitioned by the thread's OWN slice. (The warpgroup's slice, thread
    (wg - 1) * 128, is right for the wgmma operand descriptors but gives every thread of the
    warpgroup thread 0's coordinates: the epilogue then read the wrong bias / C / rowwise scale
    for 3 of 4 columns. tests/python/test_cutedsl_compile.py checks this at trace time.)"""
    return tiled_mma.get_slice(ctid).partition_C(tile_coords)


def scale_groups(tiled_mma, tile_mn, mode):
    """Block scales vary along one mode of the tile (0: kernel rows, "block_m"; 1: kernel columns,
    "block_n"). Groups a consumer thread's accumulator registers by their coordinate along that
    mode: (reps, group_of), reps[g] the first register of group g, group_of[i] the group of
    register i. Worked out at trace time on thread 0's slice of a static identity tile: every
    consumer thread's registers group the same way (tests/python/test_cutedsl_compile.py checks
    all threads), so at run time each thread loads one scale per group (2 per k block for
    "block_m": a thread's registers lie in 2 rows), at its representative register's coordinate."""
    c = acc_coords(tiled_mma, 0, cute.make_identity_tensor(tile_mn))
    reps, group_of, where = [], [], {}
    for i in range(cute.size(c)):
        key = int(c[i][mode])
        if key not in where:
            where[key] = len(reps)
            reps.append(i)
        group_of.append(where[key])
    return reps, group_of


def scale_bands(tiled_mma, tile_mn, mode):
    """The 128x128 block scales are fixed along the other mode (1 - mode of scale_groups): a tile
    whose extent T there does not divide 128 (192) starts at an offset that changes from tile to
    tile (0 or 64), so its columns straddle two blocks. Cut into bands of w = gcd(T, 128), every
    band lies in one block whatever the tile: (band_of, w), band_of[i] the band of register i
    (coordinate // w, on thread 0's slice as in scale_groups; the same for every consumer thread,
    checked by tests/python/test_cutedsl_compile.py). T / w scales a k block: 1 for T dividing
    128, 3 for 192."""
    w = math.gcd(tile_mn[1 - mode], SCALE_BLOCK)
    c = acc_coords(tiled_mma, 0, cute.make_identity_tensor(tile_mn))
    return [int(c[i][1 - mode]) // w for i in range(cute.size(c))], w


def read_block_scales(sp, sSa, sSb, stage, j, vary_local, rel):
    """A k block's scales, read from the scale ring's stage `stage` (sSa, sSb; loaded there by
    warp 1, _stage_scales), j its place in the stage's chunk, as the products its promotion
    applies: sp[g * bands + b] = (register group g's 1x128 scale, at its coordinate vary_local[g]
    within the tile) x (band b's 128x128 block scale, rel[b] the band's block counted from the
    tile's first). Called before the batch's wgmma.fence, which waits for the loads: ptxas places
    the products among the batch's wgmma instructions, and with the loads already landed they no
    longer hold the batch's issue back (read after the batch was issued, the products waited on
    the loads between its wgmmas: Nsight Compute, 128x192 on 70b gate_up m = 8192, 10.6 M cycles
    read here against 11.2 M, the tensorwise kernel 8.4 M; H100, 2026-12-06)."""
    sa = [sSa[vary_local[g], j, stage] for g in range(len(vary_local))]
    sb = [sSb[j, rel[b], stage] for b in range(len(rel))]
    for g in range(len(sa)):
        for b in range(len(sb)):
            sp[g * len(sb) + b] = sa[g] * sb[b]


def promote(acc, part, sp, group_of, band_of, block):
    """acc += part in fp32 (one k block's partial sums); with block scales acc += part *
    sp[group of the register * bands + band of the register] (sp from read_block_scales): one
    FFMA a register, as many instructions as the plain add."""
    if not block:
        acc.store(acc.load() + part.load())
        return
    bands = max(band_of) + 1
    for i in range(cute.size(acc)):
        acc[i] = acc[i] + part[i] * sp[group_of[i] * bands + band_of[i]]


def ring_state(count, kind):
    """The block-scale ring's pipeline state for the CTA's count-th chunk (counted from 0 by the
    producer and the consumers alike): stage count % SCALE_STAGES, the phase flipping each round;
    the producer's phase starts at 1 (its first round of empty waits passes at once), as
    pipeline.make_pipeline_state's."""
    phase = (count // SCALE_STAGES) % 2
    if cutlass.const_expr(kind == pipeline.PipelineUserType.Producer):
        phase = 1 - phase
    return pipeline.PipelineState(SCALE_STAGES, count, count % SCALE_STAGES, phase)


def tma_load(mainloop, op, tm, tn, kt, state):
    """The producer's TMA load of one operand's k-tile kt into pipeline `state`'s slot, counted by
    that slot's full barrier. op = (copy atom, partitioned global tiles, partitioned smem slots,
    multicast mask, whether its tiles run along N, batch): A's tile row is tm, B's tile column tn."""
    atom, g, smem, mask, along_n, batch = op
    cute.copy(atom, g[(None, tn if along_n else tm, kt, batch)], smem[(None, state.index)],
              tma_bar_ptr=mainloop.producer_get_barrier(state), mcast_mask=mask)


class HopperGemm:
    """One instance per KernelConfig; dtypes and layouts come from the tensors at compile time.

    Call signature (cute.compile / export_to_c):
        (a (M,K,1), b (N,K,1), d (M,N,1), c (M,N,1), bias (M|N,), row_scale, col_scale,
         alpha: Float32, beta: Float32, max_clusters: Int32, pdl: Int32, stream)
    max_clusters caps the persistent grid: clusters that fit on the GPU at once (SMs / cluster
    size: one CTA per SM, its shared memory is nearly all taken). pdl: 1 launches with
    programmatic stream serialization (a programmatic dependent launch), 0 as usual.
    Tensors the config does not use are still passed (any 16-byte aligned pointer; static
    shape (1,)) and never touched. row_scale/col_scale: (1,) tensorwise (sa, sb), (M,)/(N,)
    rowwise, flat block scales (KernelConfig.scale says their layout).
    """

    def __init__(self, cfg: KernelConfig):
        cfg.check()
        self.cfg = cfg
        self.acc_dtype = cutlass.Float32
        self.consumer_wgs = cfg.tile_m // 64
        self.threads = 128 * (1 + self.consumer_wgs)
        self.consumer_threads = 128 * self.consumer_wgs
        self.cluster_mn = (cfg.cluster_m, cfg.cluster_n)
        # Register split (65536 per SM): ptxas sets the launch count to 65536 / threads (168 at
        # 384 threads, 240 at 256). With two consumer warpgroups the producer drops to 40 and
        # the consumers rise to 232 (128 x 40 + 256 x 232 = 64512); with one, 240 is already
        # all a thread can use, so the consumers keep their launch count.
        self.producer_regs = 40
        self.consumer_regs = 232 if self.consumer_wgs == 2 else 0

    # ---- trace-time set-up ---------------------------------------------------------------
    def _plan(self):
        cfg = self.cfg
        self.fp8 = self.a_dtype.width == 8
        self.tiled_mma = make_tiled_mma(cfg, self.a_dtype, self.b_dtype, self.a_major, self.b_major,
                                        self.acc_dtype)
        tile_k, self.stages, self.scale_chunk = plan_smem(cfg, self.a_dtype.width // 8, self.d_dtype.width // 8)
        inst_k = cute.size(self.tiled_mma.shape_mnk, mode=[2])
        if tile_k % inst_k:
            raise ValueError(f"tile K {tile_k} is not a multiple of the wgmma K {inst_k}")
        self.tile = (cfg.tile_m, cfg.tile_n, tile_k)
        self.block = cfg.scale in ("block_m", "block_n")
        # fp8 promotion: overlapped (two register tiles of partial sums besides the accumulators)
        # up to tile N 128; wider tiles keep one and promote each batch once it retired.
        self.overlap_promotion = self.fp8 and cfg.tile_n <= 128
        if self.block and (not self.fp8 or tile_k != SCALE_BLOCK):
            raise ValueError(f"block scales need fp8 inputs, whose k tile ({tile_k}) is the scales' k block")
        # Block scales per k block: `scale_vary` 1x128 scales and `scale_bands` block scales, the
        # latter from `scale_blocks` 128x128 blocks; the ring holds scale_chunk k blocks a stage.
        self.scale_vary, self.scale_bands = block_scale_counts(cfg)
        self.scale_blocks = scale_blocks(cfg)
        self.epi_tile = (min(cfg.tile_m, 128), min(32, cfg.tile_n))
        self.sA_layout = sm90_utils.make_smem_layout_a(self.a_major, self.tile, self.a_dtype, self.stages)
        self.sB_layout = sm90_utils.make_smem_layout_b(self.b_major, self.tile, self.b_dtype, self.stages)
        self.sD_layout = sm90_utils.make_smem_layout_epi(self.d_dtype, self.d_major, self.epi_tile,
                                                         cfg.epi_stages)

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, d: cute.Tensor, c: cute.Tensor,
                 bias: cute.Tensor, row_scale: cute.Tensor, col_scale: cute.Tensor,
                 alpha: cutlass.Float32, beta: cutlass.Float32, max_clusters: cutlass.Int32,
                 pdl: cutlass.Int32, stream: cuda.CUstream):
        if cutlass.const_expr(self.cfg.grouped != "none"):
            raise TypeError("a grouped config: compile grouped_call")
        self._launch(a, b, d, c, c, bias, row_scale, col_scale, alpha, beta, max_clusters, pdl, stream)

    @cute.jit
    def grouped_call(self, a: cute.Tensor, b: cute.Tensor, d: cute.Tensor, rows: cute.Tensor,
                     bias: cute.Tensor, row_scale: cute.Tensor, col_scale: cute.Tensor,
                     alpha: cutlass.Float32, max_clusters: cutlass.Int32, stream: cuda.CUstream):
        """Grouped mode's entry (module doc): a (capacity, K, 1) contiguous or (capacity, K, G)
        masked, b (N, K, G), d like a with N, rows (G,) int32; bias (G * N,); row_scale (1,)
        tensorwise or one per row of A (rowwise, flat), col_scale (G,) tensorwise or (G * N,)
        rowwise. max_clusters: the persistent grid (the work is counted on the GPU)."""
        if cutlass.const_expr(self.cfg.grouped == "none"):
            raise TypeError("not a grouped config: compile __call__")
        self._launch(a, b, d, d, rows, bias, row_scale, col_scale, alpha, cutlass.Float32(0.0),
                     max_clusters, cutlass.Int32(0), stream)

    @cute.jit
    def _launch(self, a, b, d, c, rows, bias, row_scale, col_scale, alpha, beta, max_clusters, pdl,
                stream):
        """Traced inside __call__ / grouped_call: plans the kernel and launches it. c: C (GEMM)
        or D itself (grouped: the tile that holds a group's end is stored element by element)."""
        self.a_dtype, self.b_dtype, self.d_dtype = a.element_type, b.element_type, d.element_type
        if cutlass.const_expr(self.a_dtype.width != self.b_dtype.width):
            raise TypeError(f"A {self.a_dtype} and B {self.b_dtype} differ in width")
        if cutlass.const_expr(self.a_dtype.width == 16 and self.a_dtype != self.b_dtype):
            raise TypeError(f"A {self.a_dtype} and B {self.b_dtype} differ")
        if cutlass.const_expr(self.d_dtype.width != 16):
            raise TypeError(f"D {self.d_dtype}: only 16-bit outputs (bf16, fp16)")
        self.a_major = tensor_utils.LayoutEnum.from_tensor(a)
        self.b_major = tensor_utils.LayoutEnum.from_tensor(b)
        self.d_major = tensor_utils.LayoutEnum.from_tensor(d)
        self._plan()
        cm, cn = self.cluster_mn

        # TMA descriptors. A is multicast along the cluster's N extent, B along its M extent.
        g2s = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        g2s_mc = cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp()
        tma_a, tA = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s_mc if cn > 1 else g2s, a, cute.slice_(self.sA_layout, (None, None, 0)),
            (self.tile[0], self.tile[2]), num_multicast=cn)
        tma_b, tB = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s_mc if cm > 1 else g2s, b, cute.slice_(self.sB_layout, (None, None, 0)),
            (self.tile[1], self.tile[2]), num_multicast=cm)
        tma_d, tD = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), d,
            cute.slice_(self.sD_layout, (None, None, 0)), self.epi_tile)

        # Block scales (fp8), loaded by TMA a chunk of C = scale_chunk k blocks at a time into the
        # scale ring: A's 1x128 scales as (vary, kbs) (row_scale [kbs, M], block_m; col_scale
        # [kbs, N], block_n), a box of the tile's rows x C; B's 128x128 block scales as (kbs,
        # blocks) with leading dimension round_up(kbs, 4), a box of C x scale_blocks. TMA needs
        # 16-byte aligned scales and vary a multiple of 4 (the C++ side checks both).
        scale_tma = (None, None, None, None)
        if cutlass.const_expr(self.block):
            kbs = (a.shape[1] + SCALE_BLOCK - 1) // SCALE_BLOCK
            vary_len, fixed_len, vary_src, fixed_src = d.shape[0], d.shape[1], row_scale, col_scale
            if cutlass.const_expr(self.cfg.scale == "block_n"):
                vary_len, fixed_len, vary_src, fixed_src = d.shape[1], d.shape[0], col_scale, row_scale
            C, T, R = self.scale_chunk, self.scale_vary, self.scale_blocks
            sa_view = cute.make_tensor(vary_src.iterator, cute.make_layout((vary_len, kbs), stride=(1, vary_len)))
            sb_view = cute.make_tensor(fixed_src.iterator, cute.make_layout(
                (kbs, (fixed_len + SCALE_BLOCK - 1) // SCALE_BLOCK), stride=(1, (kbs + 3) // 4 * 4)))
            tma_sa, tSa = cute.nvgpu.cpasync.make_tiled_tma_atom(g2s, sa_view, cute.make_layout((T, C)), (T, C))
            tma_sb, tSb = cute.nvgpu.cpasync.make_tiled_tma_atom(g2s, sb_view, cute.make_layout((C, R)), (C, R))
            scale_tma = (tma_sa, tSa, tma_sb, tSb)

        # Persistent grid: clusters of tiles, at most what fits on the GPU at once (grouped: the
        # tiles are counted on the GPU, so what fits).
        tiles_m = (d.shape[0] + self.tile[0] - 1) // self.tile[0]
        tiles_n = (d.shape[1] + self.tile[1] - 1) // self.tile[1]
        clusters_m = (tiles_m + cm - 1) // cm
        clusters_n = (tiles_n + cn - 1) // cn
        total = clusters_m * clusters_n
        if cutlass.const_expr(self.cfg.grouped != "none"):
            total = max_clusters
        launched = cutlass.max(cutlass.min(total, max_clusters), 1)

        @cute.struct
        class Smem:  # bars: the mainloop's, then the scale ring's; sS: the scale ring (one float without)
            bars: cute.struct.MemRange[cutlass.Int64, (self.stages + SCALE_STAGES) * 2]
            sA: cute.struct.Align[cute.struct.MemRange[self.a_dtype, cute.cosize(self.sA_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[self.b_dtype, cute.cosize(self.sB_layout)], 1024]
            sD: cute.struct.Align[cute.struct.MemRange[self.d_dtype, cute.cosize(self.sD_layout)], 1024]
            sS: cute.struct.Align[cute.struct.MemRange[
                cutlass.Float32, max(scale_ring_bytes(self.cfg, self.scale_chunk) // 4, 1)], 128]

        self.smem_struct = Smem
        self.kernel(tma_a, tA, tma_b, tB, tma_d, tD, c, rows, bias, row_scale, col_scale, *scale_tma, alpha, beta,
                    self.tiled_mma, self.sA_layout, self.sB_layout, self.sD_layout,
                    clusters_m, clusters_n).launch(
            grid=(launched * cm, cn, 1), block=[self.threads, 1, 1], cluster=(cm, cn, 1),
            min_blocks_per_mp=1, use_pdl=pdl, stream=stream)

    # ---- device ----------------------------------------------------------------------------
    def _stage_scales(self, ring, count, tile_scales, j):
        """Warp 1's loads of chunk j of the tile's block scales (k blocks j * C .. j * C + C - 1,
        C = scale_chunk) into the scale ring's stage for the ring's count-th chunk, once the
        consumers released it: two TMA loads, A's 1x128 scales (vary x C) and B's block scales
        (C x scale_blocks, from the tile's first block), counted by the stage's full barrier in
        bytes. Out of range rows, blocks and k blocks are zero-filled (their outputs are never
        stored). Why a ring filled by a warp of its own (Nsight Compute, 70b gate_up m = 8192,
        H100, 2026-12-06; tensorwise 5.97 / 5.58 ms): the scales copied by warp 0 into each
        mainloop slot beside its tiles, 6.39 ms at 128x128 cluster 2x1 / 6.70 ms at 128x192
        cluster 2x1; this ring filled by warp 0, 6.54 / 6.33; by warp 1, 6.26 / 6.08; no scale
        loads at all (wrong results), 6.05 / 5.79."""
        state = ring_state(count, pipeline.PipelineUserType.Producer)
        ring.producer_acquire(state)
        bar = ring.producer_get_barrier(state)
        (tma_sa, sa_s, sa_g, vary_tile), (tma_sb, sb_s, sb_g) = tile_scales
        cute.copy(tma_sa, sa_g[(None, vary_tile, j)], sa_s[(None, state.index)], tma_bar_ptr=bar)
        cute.copy(tma_sb, sb_g[(None, j, 0)], sb_s[(None, state.index)], tma_bar_ptr=bar)

    def _scale_place(self, tm, tn):
        """Block scales, tile (tm, tn)'s place along them: (its tile index along the 1x128 scales,
        its first row / column along the 128x128 blocks). block_m: rows, then columns; block_n
        (swap-AB): the other way round."""
        if cutlass.const_expr(self.cfg.scale == "block_n"):
            return tn, tm * self.tile[0]
        return tm, tn * self.tile[1]

    def _tile_scales(self, tma_sa, mSa, sSa, tma_sb, mSb, sSb, tm, tn):
        """Warp 1's TMA views of tile (tm, tn)'s block scales, by chunk (_stage_scales):
        ((A's atom, ring slots, chunks by vary tile, the tile's vary tile), (B's atom, ring slots,
        chunks from the tile's first 128x128 block))."""
        T, C, R = self.scale_vary, self.scale_chunk, self.scale_blocks
        vary_tile, fixed_start = self._scale_place(tm, tn)
        one = cute.make_layout(1)
        sa_s, sa_g = cute.nvgpu.cpasync.tma_partition(
            tma_sa, 0, one, cute.group_modes(sSa, 0, 2),
            cute.group_modes(cute.local_tile(mSa, (T, C), (None, None)), 0, 2))
        sb_s, sb_g = cute.nvgpu.cpasync.tma_partition(
            tma_sb, 0, one, cute.group_modes(sSb, 0, 2),
            cute.group_modes(cute.local_tile(cute.domain_offset((0, fixed_start // SCALE_BLOCK), mSb),
                                             (C, R), (None, None)), 0, 2))
        return (tma_sa, sa_s, sa_g, vary_tile), (tma_sb, sb_s, sb_g)

    def _scales_in(self, ring, sSa, sSb, sp, chunk0, kt, vary_local, rel):
        """Consumers: k-tile kt's scale products into sp (read_block_scales), from the ring's
        stage of the tile's chunk kt // C (chunk0: the ring's count at the tile's first chunk),
        waited for at the chunk's first k-tile."""
        C = self.scale_chunk
        count = chunk0 + kt // C
        if_generate(kt % C == 0, lambda: ring.consumer_wait(
            ring_state(count, pipeline.PipelineUserType.Consumer)))
        read_block_scales(sp, sSa, sSb, count % SCALE_STAGES, kt % C, vary_local, rel)

    def _scales_done(self, ring, chunk0, kt, k_tiles):
        """Consumers, once k-tile kt's batch retired (its scales long read): the chunk's stage is
        released after its last k-tile (the tile's last k-tile ends its last chunk)."""
        C = self.scale_chunk
        count = chunk0 + kt // C
        if_generate(kt + 1 == cutlass.min(kt - kt % C + C, k_tiles), lambda: ring.consumer_release(
            ring_state(count, pipeline.PipelineUserType.Consumer)))

    @cute.jit
    def _work_tile(self, work: cutlass.Int32, clusters_m: cutlass.Int32, clusters_n: cutlass.Int32,
                   my_m: cutlass.Int32, my_n: cutlass.Int32):
        """(tile_m index, tile_n index) of this CTA for cluster work item `work`: groups of
        raster_group cluster rows, each swept column by column."""
        g = self.cfg.raster_group
        per_group = g * clusters_n
        first = (work // per_group) * g
        rows = cutlass.min(clusters_m - first, g)
        r = work % per_group
        return (first + r % rows) * self.cluster_mn[0] + my_m, (r // rows) * self.cluster_mn[1] + my_n

    @cute.jit
    def _group_rows(self, mRows: cute.Tensor, g: cutlass.Int32, capacity: cutlass.Int32):
        """(first, end) of group g's rows in A's row space (contiguous: rows of A; masked: rows
        of batch g), clamped as the module doc says."""
        end = cutlass.min(cutlass.max(mRows[g], 0), capacity)
        first = cutlass.Int32(0)
        if cutlass.const_expr(self.cfg.grouped == "contiguous"):
            if g > 0:
                first = cutlass.min(cutlass.max(mRows[g - 1], 0), capacity)
            first = cutlass.min(first, end)
        return first, end

    @cute.jit
    def _seek(self, mRows: cute.Tensor, capacity: cutlass.Int32, clusters_n: cutlass.Int32,
              work: cutlass.Int32, g: cutlass.Int32, before: cutlass.Int32, first: cutlass.Int32,
              end: cutlass.Int32):
        """Moves the group cursor (g; before: the work items of groups < g; first, end: g's rows)
        forward to the group that holds work item `work` (before <= work < the items of all
        groups; a cursor only moves forward, as a CTA's work items grow)."""
        tiles = (end - first + self.tile[0] - 1) // self.tile[0] * clusters_n
        while work >= before + tiles:
            before += tiles
            g += 1
            first, end = self._group_rows(mRows, g, capacity)
            tiles = (end - first + self.tile[0] - 1) // self.tile[0] * clusters_n
        return g, before, first, end

    @cute.jit
    def _grouped_total(self, mRows: cute.Tensor, capacity: cutlass.Int32, clusters_n: cutlass.Int32):
        """Work items (cluster tiles) of all groups, in every thread of the calling warp (all 32
        lanes active): lane l counts groups l, l + 32, ..., then a butterfly sum, so that one
        round of loads covers 32 groups."""
        lane = cute.arch.lane_idx()
        total = cutlass.Int32(0)
        for g0 in cutlass.range(0, mRows.shape[0], 32, unroll=1):
            g = g0 + lane
            if g < mRows.shape[0]:
                first, end = self._group_rows(mRows, g, capacity)
                total += (end - first + self.tile[0] - 1) // self.tile[0] * clusters_n
        return cute.arch.warp_reduction_sum(total)

    @cute.jit
    def _store_tile(self, epi, gD_tile: cute.Tensor, epi_count: cutlass.Int32) -> cutlass.Int32:
        """The consumers store a tile of D (gD_tile: its TMA coordinates) from their accumulators
        (the fused epilogue applied), epi_tile sub-tiles N fastest: registers -> smem buffer
        (stmatrix) -> global (one thread's TMA store), through the ring of cfg.epi_stages
        buffers. Returns epi_count (sub-tiles stored so far) advanced."""
        tma_d, sD, r2s, tRS_sD, tRS_acc, frag, frag_out, epi_bar, store_pipe, warp = epi
        gD_epi = cute.zipped_divide(gD_tile, self.epi_tile)
        bsD, bgD = cute.nvgpu.cpasync.tma_partition(
            tma_d, 0, cute.make_layout(1), cute.group_modes(sD, 0, 2), gD_epi)
        epi_grid = gD_epi.shape[1]
        epi_num = cute.size(gD_epi, mode=[1])
        epi_order = cute.make_layout(epi_grid, stride=(epi_grid[1], 1))
        frag_n = cute.size(frag)
        for e in cutlass.range_constexpr(epi_num):
            for v in cutlass.range_constexpr(frag_n):
                frag[v] = tRS_acc[e * frag_n + v]
            frag_out.store(frag.load().to(self.d_dtype))
            buf = (epi_count + e) % self.cfg.epi_stages
            cute.copy(r2s, frag_out, tRS_sD[(None, None, None, buf)])
            # Make the smem writes visible to TMA, then one thread stores the sub-tile.
            cute.arch.fence_proxy("async.shared", space="cta")
            epi_bar.arrive_and_wait()
            if warp == 4:
                cute.copy(tma_d, bsD[(None, buf)], bgD[(None, epi_order.get_hier_coord(e))])
                store_pipe.producer_commit()
                # Wait until the buffer the next sub-tile writes is no longer being read.
                store_pipe.producer_acquire()
            epi_bar.arrive_and_wait()
        return epi_count + epi_num

    @cute.jit
    def _activate(self, v: cutlass.Float32) -> cutlass.Float32:
        out = v
        if cutlass.const_expr(self.cfg.act == "relu"):
            out = cutlass.max(v, cutlass.Float32(0.0))
        elif cutlass.const_expr(self.cfg.act == "gelu_tanh"):
            inner = cutlass.Float32(0.7978845608028654) * (v + cutlass.Float32(0.044715) * v * v * v)
            out = cutlass.Float32(0.5) * v * (cutlass.Float32(1.0) + cute.math.tanh(inner))
        elif cutlass.const_expr(self.cfg.act == "silu"):
            out = v / (cutlass.Float32(1.0) + cute.math.exp(-v))
        return out

    @cute.kernel
    def kernel(self, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor,
               tma_d: cute.CopyAtom, mD: cute.Tensor, mC: cute.Tensor, mRows: cute.Tensor,
               mBias: cute.Tensor,
               mRowScale: cute.Tensor, mColScale: cute.Tensor, tma_sa, mSa, tma_sb, mSb,
               alpha: cutlass.Float32,
               beta: cutlass.Float32, tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout,
               sB_layout: cute.ComposedLayout, sD_layout: cute.ComposedLayout,
               clusters_m: cutlass.Int32, clusters_n: cutlass.Int32):
        cfg = self.cfg
        cm, cn = self.cluster_mn
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = cute.arch.make_warp_uniform(tidx // 128)
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_d)
            if cutlass.const_expr(self.block):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_sa)
                cute.nvgpu.cpasync.prefetch_descriptor(tma_sb)

        # This CTA's place in its cluster, and whom its multicast loads feed.
        cluster_layout = cute.make_layout((cm, cn, 1))
        rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        my = cluster_layout.get_flat_coord(rank)  # (m, n, 0)
        a_mask = cute.make_layout_image_mask(cluster_layout, my, mode=1) if cn > 1 else 0
        b_mask = cute.make_layout_image_mask(cluster_layout, my, mode=0) if cm > 1 else 0

        smem = cutlass.memory.SmemAllocator()
        st = smem.allocate(self.smem_struct)
        sA = st.sA.get_tensor(sA_layout.outer, swizzle=sA_layout.inner)
        sB = st.sB.get_tensor(sB_layout.outer, swizzle=sB_layout.inner)
        sD = st.sD.get_tensor(sD_layout.outer, swizzle=sD_layout.inner)

        slot_bytes = (cute.size_in_bytes(self.a_dtype, cute.slice_(sA_layout, (None, None, 0)))
                      + cute.size_in_bytes(self.b_dtype, cute.slice_(sB_layout, (None, None, 0))))
        # A slot is full once TMA delivered its bytes (one arrival, with the expected count).
        mainloop = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.bars.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, (cm + cn - 1) * self.consumer_wgs * 4),
            tx_count=slot_bytes, cta_layout_vmnk=cute.make_layout((1, cm, cn, 1)),
            defer_sync=True)
        # Block scales: the scale ring (SCALE_STAGES stages of scale_chunk k blocks). Each CTA
        # loads its own (no multicast), so its consumers release only their own CTA's stages.
        # sSa (vary, C, stage): the tile's 1x128 scales; sSb (C, blocks, stage): its block scales
        # from the tile's first 128x128 block on, a stage every 128 bytes.
        ring, sSa, sSb = None, None, None
        if cutlass.const_expr(self.block):
            C, T, R = self.scale_chunk, self.scale_vary, self.scale_blocks
            ring = pipeline.PipelineTmaAsync.create(
                barrier_storage=st.bars.data_ptr() + 2 * self.stages, num_stages=SCALE_STAGES,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
                consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.consumer_wgs * 4),
                tx_count=4 * (T * C + C * R), defer_sync=True)
            sSa = st.sS.get_tensor(cute.make_layout((T, C, SCALE_STAGES)))
            sSb = cute.make_tensor(sSa.iterator + T * C * SCALE_STAGES,
                                   cute.make_layout((C, R, SCALE_STAGES), stride=(1, C, 32)))
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_mn, is_relaxed=True)

        # Global tensors tiled: (tile, tile, rest_mn, rest_k, batch).
        gA = cute.local_tile(mA, cute.slice_(self.tile, (None, 0, None)), (None, None, None))
        gB = cute.local_tile(mB, cute.slice_(self.tile, (0, None, None)), (None, None, None))
        gD = cute.local_tile(mD, cute.slice_(self.tile, (None, None, 0)), (None, None, None))
        k_tiles = cute.size(gA, mode=[3])
        tAs, tAg = cute.nvgpu.cpasync.tma_partition(
            tma_a, my[1], cute.make_layout(cn), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2))
        tBs, tBg = cute.nvgpu.cpasync.tma_partition(
            tma_b, my[0], cute.make_layout(cm), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_mn)

        cid = cute.arch.cluster_idx()[0]
        launched = cute.arch.cluster_dim()[0]
        total = clusters_m * clusters_n
        # Grouped: the work items of all groups, and each role's group cursor (_seek).
        grouped = cfg.grouped != "none"
        capacity = mD.shape[0]
        if cutlass.const_expr(grouped):
            total = self._grouped_total(mRows, capacity, clusters_n)

        m_size = mD.shape[0]
        n_size = mD.shape[1]
        # Block scales (fp8): k-tile kt is the scales' k block kt, chunk kt // C of the tile. The
        # tile's place along the 1x128 scales (vary) and the 128x128 blocks (fixed): block_m, rows
        # and columns; block_n (swap-AB), the other way round (tile M divides 128).
        vary_mode = 1 if cfg.scale == "block_n" else 0
        chunks = cutlass.Int32(0)
        if cutlass.const_expr(self.block):
            chunks = (k_tiles + self.scale_chunk - 1) // self.scale_chunk

        if wg == 0:
            # ------------------------------ producer ------------------------------
            cute.arch.setmaxregister_decrease(self.producer_regs)
            if warp == 0:
                wstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                work = cid
                a_op = (tma_a, tAg, tAs, a_mask, False, 0)
                b_op = (tma_b, tBg, tBs, b_mask, True, 0)
                # The first tile's first `ahead` k-tiles: the weights' halves before the wait
                # for the previous kernel (programmatic dependent launch), the other operand's
                # after it, into the same slots; every later load after the wait. (Grouped: no
                # programmatic launch, the split is read first.)
                ahead = cutlass.min(k_tiles, self.stages)
                if cutlass.const_expr(grouped):
                    ahead = cutlass.Int32(0)
                g, before = cutlass.Int32(0), cutlass.Int32(0)
                first, end = self._group_rows(mRows, g, capacity)
                while work < total:
                    if cutlass.const_expr(grouped):
                        g, before, first, end = self._seek(mRows, capacity, clusters_n, work, g, before, first, end)
                        tm, tn = self._work_tile(work - before, (end - first + self.tile[0] - 1) // self.tile[0],
                                                 clusters_n, 0, my[1])
                        # A's tiles from the group's first row; masked groups are A's batches.
                        gA_g = cute.local_tile(cute.domain_offset((first, 0, 0), mA),
                                               cute.slice_(self.tile, (None, 0, None)), (None, None, None))
                        _, tAg_g = cute.nvgpu.cpasync.tma_partition(
                            tma_a, my[1], cute.make_layout(cn), cute.group_modes(sA, 0, 2), cute.group_modes(gA_g, 0, 2))
                        a_cur = (tma_a, tAg_g, tAs, a_mask, False, g if cfg.grouped == "masked" else 0)
                        b_cur = (tma_b, tBg, tBs, b_mask, True, g)
                    else:
                        tm, tn = self._work_tile(work, clusters_m, clusters_n, my[0], my[1])
                        a_cur, b_cur = a_op, b_op
                    # The weights' operand and the other one (the activations).
                    w_op, x_op = (a_cur, b_cur) if cfg.weights == "a" else (b_cur, a_cur)
                    astate = wstate.clone()
                    for kt in cutlass.range(ahead, unroll=1):
                        mainloop.producer_acquire(wstate)
                        tma_load(mainloop, w_op, tm, tn, kt, wstate)
                        mainloop.producer_commit(wstate)
                        wstate.advance()
                    cute.arch.griddepcontrol_wait()
                    for kt in cutlass.range(ahead, unroll=1):
                        tma_load(mainloop, x_op, tm, tn, kt, astate)
                        astate.advance()
                    for kt in cutlass.range(ahead, k_tiles, unroll=1):
                        mainloop.producer_acquire(wstate)
                        tma_load(mainloop, a_cur, tm, tn, kt, wstate)
                        tma_load(mainloop, b_cur, tm, tn, kt, wstate)
                        mainloop.producer_commit(wstate)
                        wstate.advance()
                    work += launched
                    ahead = cutlass.Int32(0)
                cute.arch.griddepcontrol_launch_dependents()
                # Returns once every slot was released, also by the peer CTAs that read this
                # CTA's multicasts: no CTA exits while data may still land in its smem.
                mainloop.producer_tail(wstate)
            if cutlass.const_expr(self.block):
                if warp == 1:
                    # The scale ring's producer: the same tiles, a chunk at a time. A warp of its
                    # own, so that warp 0's stream of mainloop loads never waits on the ring or
                    # behind the scale loads (in warp 0 the ring cost 128x128 cluster 2x1 +4% and
                    # 128x192 cluster 2x1 +4% of time over warp 1; H100, 2026-12-06).
                    cute.arch.griddepcontrol_wait()  # the scales may come from the previous kernel
                    work = cid
                    count = cutlass.Int32(0)  # the ring's chunks loaded so far
                    while work < total:
                        tm, tn = self._work_tile(work, clusters_m, clusters_n, my[0], my[1])
                        tile_scales = self._tile_scales(tma_sa, mSa, sSa, tma_sb, mSb, sSb, tm, tn)
                        for j in cutlass.range(chunks, unroll=1):
                            self._stage_scales(ring, count + j, tile_scales, j)
                        count += chunks
                        work += launched
        else:
            # ------------------------------ consumers ------------------------------
            if cutlass.const_expr(self.consumer_regs > 0):
                cute.arch.setmaxregister_increase(self.consumer_regs)
            # Scales, C and bias may come from the previous kernel, and D may be its input.
            cute.arch.griddepcontrol_wait()
            ctid = tidx - 128
            # wgmma operands are warpgroup-wide: A/B partitioned by the warpgroup's first thread.
            thr_mma = tiled_mma.get_slice((wg - 1) * 128)
            tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
            tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
            acc = cute.make_rmem_tensor(thr_mma.partition_C(gD[(None, None, 0, 0, 0)]).shape,
                                        self.acc_dtype)
            # fp8: two tiles of partial sums (overlapped promotion, below); one above tile N 128.
            part = cute.make_rmem_tensor(acc.shape, self.acc_dtype) if self.fp8 else acc
            part1 = cute.make_rmem_tensor(acc.shape, self.acc_dtype) if self.overlap_promotion else acc
            k_blocks = cute.size(tCrA, mode=[2])

            # Epilogue copies: accumulators -> smem (stmatrix), smem -> global (TMA).
            r2s_atom = sm90_utils.sm90_get_smem_store_op(
                self.d_major, elem_ty_d=self.d_dtype, elem_ty_acc=self.acc_dtype)
            stm_atom = cute.make_copy_atom(
                cute.nvgpu.warp.StMatrix8x8x16bOp(self.d_major.is_m_major_c(), 4), self.d_dtype)
            r2s = cute.make_tiled_copy_S(r2s_atom, cute.make_tiled_copy_C_atom(stm_atom, tiled_mma))
            thr_r2s = r2s.get_slice(ctid)
            tRS_sD = thr_r2s.partition_D(sD)  # (R2S, R2S_M, R2S_N, buffer)
            tRS_acc = r2s.retile(acc)
            frag_shape = cute.shape(thr_r2s.partition_S(sD))[:3]
            frag = cute.make_rmem_tensor(frag_shape, self.acc_dtype)
            frag_out = cute.make_rmem_tensor(frag_shape, self.d_dtype)
            epi_bar = pipeline.NamedBarrier(barrier_id=1, num_threads=self.consumer_threads)
            store_pipe = pipeline.PipelineTmaStore.create(
                num_stages=cfg.epi_stages,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.consumer_threads))

            # Epilogue operands that do not change per tile.
            # Grouped: the coordinates also say which rows of the tile are the group's.
            need_coords = cfg.has_c or cfg.bias != "none" or cfg.scale == "rowwise" or grouped
            alpha_eff = alpha
            if cutlass.const_expr(cfg.scale == "tensorwise" and not grouped):
                alpha_eff = alpha * mRowScale[0] * mColScale[0]
            cD = cute.make_identity_tensor((m_size, n_size))
            # Block scales: each thread's registers fall in groups of one 1x128 scale (reps /
            # group_of: 2 rows a thread for block_m) and bands of one 128x128 block (band_of); a
            # k block's scale products come from the scale ring into sc (read_block_scales, at
            # the thread's coordinates within the tile, vary_local) before its MMAs are issued.
            reps, group_of, band_of, band_w, vary_local = [0], [0], [0], SCALE_BLOCK, [0]
            if cutlass.const_expr(self.block):
                reps, group_of = scale_groups(tiled_mma, (self.tile[0], self.tile[1]), vary_mode)
                band_of, band_w = scale_bands(tiled_mma, (self.tile[0], self.tile[1]), vary_mode)
                tCcL = acc_coords(tiled_mma, ctid, cute.make_identity_tensor((self.tile[0], self.tile[1])))
                vary_local = [tCcL[r][vary_mode] for r in reps]
            bands = max(band_of) + 1
            # The products of the batch in `part` (sc) and of the one in part1 (sc1): the next
            # batch's are read before the previous batch is promoted.
            sc = cute.make_rmem_tensor((len(reps) * bands,), self.acc_dtype)
            sc1 = cute.make_rmem_tensor((len(reps) * bands,), self.acc_dtype) if self.overlap_promotion else sc

            rstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            fstate = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            cchunk = cutlass.Int32(0)  # the scale ring's chunks consumed so far
            epi_count = cutlass.Int32(0)
            work = cid
            g, before = cutlass.Int32(0), cutlass.Int32(0)
            first, end = self._group_rows(mRows, g, capacity)
            while work < total:
                # (tm, tn): the tile; grouped, of group g, whose rows start at `first` (D's tiles
                # and coordinates offset by it) in batch `batch` (masked) and end before `end`.
                batch = 0
                if cutlass.const_expr(grouped):
                    g, before, first, end = self._seek(mRows, capacity, clusters_n, work, g, before, first, end)
                    tm, tn = self._work_tile(work - before, (end - first + self.tile[0] - 1) // self.tile[0],
                                             clusters_n, 0, my[1])
                    if cutlass.const_expr(cfg.grouped == "masked"):
                        batch = g
                    if cutlass.const_expr(cfg.scale == "tensorwise"):
                        alpha_eff = alpha * mRowScale[0] * mColScale[g]
                else:
                    tm, tn = self._work_tile(work, clusters_m, clusters_n, my[0], my[1])

                # Block scales: band b's 128x128 block, counted from the tile's first (a tile of
                # 192 starts at column 0 or 64 of a block: its bands lie in blocks 0, 0, 1 or
                # 0, 1, 1); always 0 where the tile's extent divides 128.
                rel = [0] * bands
                if cutlass.const_expr(self.scale_blocks > 1):
                    _, fixed_start = self._scale_place(tm, tn)
                    rel = [(fixed_start % SCALE_BLOCK + b * band_w) // SCALE_BLOCK for b in range(bands)]

                # ---- mainloop ----
                acc.fill(0.0)
                tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                if cutlass.const_expr(self.fp8 and not self.overlap_promotion):
                    # Promotion after each batch: k-tile kt's batch accumulates into part (zeroed
                    # by its first wgmma); once it retired the slot is released and part added to
                    # `acc`. The other consumer warpgroup's MMAs run meanwhile.
                    for kt in cutlass.range(k_tiles, unroll=1):
                        mainloop.consumer_wait(rstate)
                        if cutlass.const_expr(self.block):
                            self._scales_in(ring, sSa, sSb, sc, cchunk, kt, vary_local, rel)
                        cute.nvgpu.warpgroup.fence()
                        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                        for kb in cutlass.range_constexpr(k_blocks):
                            cute.gemm(tiled_mma, part, tCrA[(None, None, kb, rstate.index)],
                                      tCrB[(None, None, kb, rstate.index)], part)
                            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                        cute.nvgpu.warpgroup.commit_group()
                        rstate.advance()
                        cute.nvgpu.warpgroup.wait_group(0)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, kt, k_tiles)
                        promote(acc, part, sc, group_of, band_of, self.block)
                elif cutlass.const_expr(self.fp8):
                    # Promotion, overlapped: k-tile t's batch accumulates into part (t even) or
                    # part1 (t odd), each zeroed by its first wgmma; once the previous batch
                    # retired (wait_group(1): the newest stays in flight) its partial sums are
                    # added to `acc` in fp32 and its slot released. Unrolled by two so that
                    # each tile's register tile is static. k_tiles >= 1 (k >= 1).
                    mainloop.consumer_wait(rstate)
                    if cutlass.const_expr(self.block):
                        self._scales_in(ring, sSa, sSb, sc, cchunk, 0, vary_local, rel)
                    cute.nvgpu.warpgroup.fence()
                    tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                    for kb in cutlass.range_constexpr(k_blocks):
                        cute.gemm(tiled_mma, part, tCrA[(None, None, kb, rstate.index)],
                                  tCrB[(None, None, kb, rstate.index)], part)
                        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                    cute.nvgpu.warpgroup.commit_group()
                    rstate.advance()
                    for kp in cutlass.range((k_tiles - 1) // 2, unroll=1):
                        # odd k-tile -> part1; promote part
                        mainloop.consumer_wait(rstate)
                        if cutlass.const_expr(self.block):
                            self._scales_in(ring, sSa, sSb, sc1, cchunk, 2 * kp + 1, vary_local, rel)
                        cute.nvgpu.warpgroup.fence()
                        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                        for kb in cutlass.range_constexpr(k_blocks):
                            cute.gemm(tiled_mma, part1, tCrA[(None, None, kb, rstate.index)],
                                      tCrB[(None, None, kb, rstate.index)], part1)
                            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                        cute.nvgpu.warpgroup.commit_group()
                        rstate.advance()
                        cute.nvgpu.warpgroup.wait_group(1)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, 2 * kp, k_tiles)
                        promote(acc, part, sc, group_of, band_of, self.block)
                        # even k-tile -> part; promote part1
                        mainloop.consumer_wait(rstate)
                        if cutlass.const_expr(self.block):
                            self._scales_in(ring, sSa, sSb, sc, cchunk, 2 * kp + 2, vary_local, rel)
                        cute.nvgpu.warpgroup.fence()
                        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                        for kb in cutlass.range_constexpr(k_blocks):
                            cute.gemm(tiled_mma, part, tCrA[(None, None, kb, rstate.index)],
                                      tCrB[(None, None, kb, rstate.index)], part)
                            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                        cute.nvgpu.warpgroup.commit_group()
                        rstate.advance()
                        cute.nvgpu.warpgroup.wait_group(1)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, 2 * kp + 1, k_tiles)
                        promote(acc, part1, sc1, group_of, band_of, self.block)
                    if (k_tiles - 1) % 2 == 1:
                        # the last k-tile is odd: -> part1, promote part, then part1
                        mainloop.consumer_wait(rstate)
                        if cutlass.const_expr(self.block):
                            self._scales_in(ring, sSa, sSb, sc1, cchunk, k_tiles - 1, vary_local, rel)
                        cute.nvgpu.warpgroup.fence()
                        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
                        for kb in cutlass.range_constexpr(k_blocks):
                            cute.gemm(tiled_mma, part1, tCrA[(None, None, kb, rstate.index)],
                                      tCrB[(None, None, kb, rstate.index)], part1)
                            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
                        cute.nvgpu.warpgroup.commit_group()
                        rstate.advance()
                        cute.nvgpu.warpgroup.wait_group(1)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, k_tiles - 2, k_tiles)
                        promote(acc, part, sc, group_of, band_of, self.block)
                        cute.nvgpu.warpgroup.wait_group(0)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, k_tiles - 1, k_tiles)
                        promote(acc, part1, sc1, group_of, band_of, self.block)
                    else:
                        cute.nvgpu.warpgroup.wait_group(0)
                        mainloop.consumer_release(fstate)
                        fstate.advance()
                        if cutlass.const_expr(self.block):
                            self._scales_done(ring, cchunk, k_tiles - 1, k_tiles)
                        promote(acc, part, sc, group_of, band_of, self.block)
                else:
                    for kt in cutlass.range(k_tiles, unroll=1):
                        mainloop.consumer_wait(rstate)
                        cute.nvgpu.warpgroup.fence()
                        for kb in cutlass.range_constexpr(k_blocks):
                            cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, rstate.index)],
                                      tCrB[(None, None, kb, rstate.index)], acc)
                        cute.nvgpu.warpgroup.commit_group()
                        # The previous batch retired: its slot can be refilled.
                        cute.nvgpu.warpgroup.wait_group(1)
                        if kt > 0:
                            mainloop.consumer_release(fstate)
                            fstate.advance()
                        rstate.advance()
                    cute.nvgpu.warpgroup.wait_group(0)
                    if k_tiles > 0:
                        mainloop.consumer_release(fstate)
                        fstate.advance()

                cchunk += chunks

                # ---- fused epilogue math, fp32, on the accumulators ----
                # Grouped: row scales are one per row of A (masked: batch-major), column scales
                # and bias one per group and column.
                row_base = batch * m_size
                col_base = g * n_size if grouped else 0
                tCcD = None
                if cutlass.const_expr(need_coords):
                    tCcD = acc_coords(tiled_mma, ctid, cute.local_tile(
                        cute.domain_offset((first, 0), cD) if grouped else cD, (self.tile[0], self.tile[1]), (tm, tn)))
                    # unroll_full: unrolled by the compiler, not traced element by element.
                    for i in cutlass.range(cute.size(acc), unroll_full=True):
                        mi = cutlass.min(tCcD[i][0], m_size - 1)
                        ni = cutlass.min(tCcD[i][1], n_size - 1)
                        v = acc[i] * alpha_eff
                        if cutlass.const_expr(cfg.scale == "rowwise"):
                            v = v * mRowScale[row_base + mi] * mColScale[col_base + ni]
                        if cutlass.const_expr(cfg.has_c):
                            v = v + beta * mC[mi, ni, 0].to(cutlass.Float32)
                        if cutlass.const_expr(cfg.bias == "n"):
                            v = v + mBias[col_base + ni].to(cutlass.Float32)
                        if cutlass.const_expr(cfg.bias == "m"):
                            v = v + mBias[mi].to(cutlass.Float32)
                        acc[i] = self._activate(v)
                else:
                    for i in cutlass.range(cute.size(acc), unroll_full=True):
                        acc[i] = self._activate(acc[i] * alpha_eff)

                # ---- store: epi_tile sub-tiles (N fastest) through the buffer ring ----
                # Grouped: the tile that holds its group's end row (or ends past D) is stored
                # element by element, only the group's rows (TMA would write the next group's).
                epi = (tma_d, sD, r2s, tRS_sD, tRS_acc, frag, frag_out, epi_bar, store_pipe, warp)
                if cutlass.const_expr(grouped):
                    if (tm + 1) * self.tile[0] <= end - first:
                        gD_g = cute.local_tile(cute.domain_offset((first, 0, 0), mD),
                                               cute.slice_(self.tile, (None, None, 0)), (None, None, None))
                        epi_count = self._store_tile(epi, gD_g[(None, None, tm, tn, batch)], epi_count)
                    else:
                        for i in cutlass.range(cute.size(acc), unroll_full=True):
                            if tCcD[i][0] < end and tCcD[i][1] < n_size:
                                mC[tCcD[i][0], tCcD[i][1], batch] = acc[i].to(self.d_dtype)
                else:
                    epi_count = self._store_tile(epi, gD[(None, None, tm, tn, 0)], epi_count)
                work += launched
            if warp == 4:
                store_pipe.producer_tail()
