"""gemmtune's softmax for Hopper (sm_90a), written in NVIDIA's CuTe DSL.

    y[r, c] = exp(s x[r, c] - M_r) / sum_c' exp(s x[r, c'] - M_r),   M_r = max_c s x[r, c]

over the last dimension of a row-major [rows, cols] x whose rows are `ld` elements apart (y has
the same ld); s x is formed in fp32 and everything is computed in fp32. rows, cols and ld are
run-time values (one compiled kernel serves every shape its config holds); x and y are 16-byte
aligned. Special values as torch.softmax: a row with a NaN, a +Inf, or only -Inf is NaN
throughout (docs/softmax.md). Written for ahead-of-time export (softmax_compile.py): nothing here
needs a GPU.

One pass, x read once, the row kept in registers:
- A CTA of `threads` threads handles threads / tpr rows at once, `tpr` threads per row; with a
  cluster (`cluster` CTAs, 2..16) one row is split across the cluster's CTAs (the long-row kernel).
  Clusters of 16 are non-portable: the exported module's load_to_device sets
  cudaFuncAttributeNonPortableClusterSizeAllowed = 1 on every kernel (the DSL's cu_attrs).
- Thread t of a row holds `chunks` accesses of `vec` consecutive elements: access j covers the
  columns base + (j * tpr + t) * vec + [0, vec), base = rank in cluster * tpr * chunks * vec, so
  that a warp's accesses are consecutive (coalesced 16-byte loads and stores when
  vec * element size = 16). vec > 1 needs ld % vec == 0 (the C++ side and the shim check it;
  the `virt` kinds below do not);
  then an access that starts before cols lies inside the row's ld elements, and its elements at or
  past cols are masked (never stored). cols need not be a multiple of vec.
- Each group of threads reduces its values to (m, s): m = max, s = sum of exp(v - m) (m = -Inf:
  exp(v) instead, which is 0 for -Inf and the masked values and NaN for NaN), first within the
  warp (shuffles), then, when a row spans several warps or CTAs, through shared memory or, in a
  cluster, by st.async of every warp's pair into every CTA's shared memory (distributed shared
  memory, completion counted by one mbarrier's transaction bytes). The merge: M = max m_k,
  S = sum t_k with t_k = s_k exp(m_k - M), or s_k itself when m_k = -Inf (0 or NaN).
- y = e * (exp(m - M) / S) with e = exp(v - m) kept in registers (one exp per element). The
  special rows: a NaN or +Inf makes S NaN; an all -Inf row has M = -Inf, S = 0 and the factor
  exp(-Inf - -Inf) = NaN; a -Inf element in a finite row has e = 0 (or its group's factor is 0).
- exp is ex2.approx.f32 (about 2 ulp, subnormal results kept, no flush to zero) of
  (v - m) log2 e computed as one FMA.

Packed (`packed`, 16-bit inputs, one row per CTA): the same one-pass structure with x kept as
loaded (two values a 32-bit register) instead of in fp32, so that a thread holds up to 128 values
(a CTA of 256 threads 64 KiB of bf16, as the fp32 kind's best long-row CTAs); exp is computed twice
(sum pass, output pass) with fewer instructions an element: packed max.{bf16,f16}x2, one FFMA +
ex2.approx.ftz per exp, y = 2^(x s log2 e - M log2 e + 24) * (2^-24 / S) rounded pairwise by
cvt.rn.{bf16,f16}x2.f32; see HopperSoftmax._one_pass_packed.

Virtual columns (`virt`, the one-pass kinds): rows that do not start on a 16-byte pack (ld % vec
!= 0: odd packed widths such as 50257 or 4097 bf16, or an odd ld). Row r starts at element r ld
of x; with a = (r ld) % vec the row is read in virtual columns u = c + a, so that the access at
virtual column u (a multiple of vec) is an aligned vec-element pack of x (and of y: x and y are
16-byte aligned and share ld). The accesses that start before cols + a are loaded whole: the
partial head and tail packs' foreign elements (the neighbouring rows', or padding) are masked to
-Inf and never stored; a pack that would run past the end of x ((rows - 1) ld + cols elements)
is loaded element by element (only the row's own elements). y goes out as whole packs where the
pack lies inside the row, element by element at the row's head and tail. So a config holds rows
of up to its cluster x cols_per_cta - (vec - 1) columns. Everything else (CTA shapes, merges,
special values) is the aligned kinds'.

Two passes (`online`), any row length: pass 1 keeps a running (m, s) per thread over tiles of
tpr * chunks * vec columns, pass 2 reads the tiles again and writes y = exp(v - M) / S. With a
cluster (the "re-read" kind) the row's tiles are dealt to the cluster's CTAs (tile k to rank
k % cluster), the CTAs exchange their pairs as the one-pass cluster kernel does, and pass 2 walks
the CTA's tiles backwards (the latest read first): with few rows in flight (SMs x CTAs per SM /
cluster) the re-read hits L2, so DRAM sees one read of x and one write of y. Pass 2 reads x with
ld.global.cs (evict-first: x is not needed again) and writes y with st.global.cs, so that y and
the spent x leave L2 before the x still to be re-read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.memory
from cutlass import Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

LOG2E = math.log2(math.e)
WARP = 32
MAX_CLUSTER = 16  # > 8: non-portable (the module loader allows it on every kernel)
MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class SoftmaxConfig:
    """Everything a compiled softmax kernel bakes in besides the dtypes."""

    vec: int = 8        # elements per access: 1, 2, 4 or 8 (at most 16 bytes of the input)
    chunks: int = 4     # accesses per thread
    tpr: int = 32       # threads per row (power of two; >= 32: whole warps)
    threads: int = 128  # threads per CTA (a multiple of 32 and of tpr)
    cluster: int = 1    # CTAs per row (1..16; > 1 needs tpr == threads)
    online: bool = False  # two passes over tiles of tpr * chunks * vec columns: any row length
                          # (with a cluster: the row's tiles dealt to the cluster's CTAs)
    packed: bool = False  # one pass, 16-bit x kept packed in registers (2 a register), exp twice
    virt: bool = False    # one pass in virtual columns: rows need not start on a vec pack (any ld)

    @property
    def rows_per_cta(self) -> int:
        return self.threads // self.tpr

    @property
    def cols_per_cta(self) -> int:
        return self.tpr * self.chunks * self.vec

    @property
    def max_cols(self) -> int:
        if self.online:
            return MAX_INT32
        return self.cols_per_cta * self.cluster - (self.vec - 1 if self.virt else 0)

    @property
    def warps_per_row(self) -> int:
        return max(self.tpr // WARP, 1)

    def check(self, in_bytes: int) -> None:
        if self.vec not in (1, 2, 4, 8) or self.vec * in_bytes > 16:
            raise ValueError(f"vec: {self.vec} elements of {in_bytes} bytes (1, 2, 4 or 8; at most 16 bytes)")
        if not 1 <= self.chunks <= 128:
            raise ValueError(f"chunks: {self.chunks} not in 1..128")
        if self.threads % WARP or not WARP <= self.threads <= 1024:
            raise ValueError(f"threads: {self.threads} not a multiple of 32 in 32..1024")
        if self.tpr < 1 or self.tpr & (self.tpr - 1) or self.tpr > self.threads or self.threads % self.tpr:
            raise ValueError(f"tpr: {self.tpr} not a power of two dividing threads {self.threads}")
        if not 1 <= self.cluster <= MAX_CLUSTER:
            raise ValueError(f"cluster: {self.cluster} not in 1..{MAX_CLUSTER}")
        if self.cluster > 1 and self.tpr != self.threads:
            raise ValueError("cluster > 1 needs one row per CTA (tpr == threads)")
        if self.chunks * self.vec > 128:
            raise ValueError(f"chunks * vec = {self.chunks * self.vec} values a thread (at most 128)")
        if self.packed and (self.online or in_bytes != 2 or self.vec < 2):
            raise ValueError("packed: one pass, a 16-bit input and vec >= 2 only")
        if self.virt and (self.online or self.vec < 2):
            raise ValueError("virt: one pass and vec >= 2 only")


def _asm(ret, operands, asm: str, constraints: str, loc, ip):
    """One side-effect-free PTX statement: `ret` (T.f32() / T.i32()) from the operands (DSL
    values), as an MLIR inline_asm; the helpers below give its typed uses."""
    return llvm.inline_asm(ret, [v.ir_value(loc=loc, ip=ip) for v in operands], asm, constraints,
                           has_side_effects=False, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
                           loc=loc, ip=ip)


@dsl_user_op
def ex2(x, *, loc=None, ip=None) -> Float32:
    """2^x by ex2.approx.f32 (no .ftz: subnormal results are kept; -Inf -> 0, NaN -> NaN)."""
    return Float32(_asm(T.f32(), [Float32(x)], "ex2.approx.f32 $0, $1;", "=f,f", loc, ip))


@dsl_user_op
def f32_bits(x, *, loc=None, ip=None) -> Int32:
    """The bits of an fp32 value as an i32 (for st.async, which stores b32 words)."""
    return Int32(llvm.bitcast(T.i32(), Float32(x).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def ex2_ftz(x, *, loc=None, ip=None) -> Float32:
    """2^x by ex2.approx.ftz.f32 (one MUFU.EX2; results below 2^-126 flush to 0)."""
    return Float32(_asm(T.f32(), [Float32(x)], "ex2.approx.ftz.f32 $0, $1;", "=f,f", loc, ip))


@dsl_user_op
def pair_op(a, b, op: str, *, loc=None, ip=None) -> Int32:
    """`op` (e.g. "max.bf16x2") of two packed pairs of 16-bit values."""
    return Int32(_asm(T.i32(), [Int32(a), Int32(b)], f"{op} $0, $1, $2;", "=r,r,r", loc, ip))


@dsl_user_op
def half_f32(w, hi: bool, bf16: bool, *, loc=None, ip=None) -> Float32:
    """The low (hi=False) or high 16-bit value of the pair w as fp32 (exact)."""
    if bf16:
        asm = ("{ .reg .b32 t; and.b32 t, $1, 0xffff0000; mov.b32 $0, t; }" if hi
               else "{ .reg .b32 t; shl.b32 t, $1, 16; mov.b32 $0, t; }")
    else:
        asm = "{ .reg .b16 l, h; mov.b32 {l, h}, $1; cvt.f32.f16 $0, %s; }" % ("h" if hi else "l")
    return Float32(_asm(T.f32(), [Int32(w)], asm, "=f,r", loc, ip))


@dsl_user_op
def pack_pair(lo, hi, bf16: bool, *, loc=None, ip=None) -> Int32:
    """(lo, hi) rounded to nearest into one packed bf16x2 / f16x2 word (lo at the lower address)."""
    op = "cvt.rn.bf16x2.f32" if bf16 else "cvt.rn.f16x2.f32"
    return Int32(_asm(T.i32(), [Float32(hi), Float32(lo)], f"{op} $0, $1, $2;", "=r,f,f", loc, ip))


def _i32(bits: int) -> Int32:
    return Int32(bits - (1 << 32) if bits >= 1 << 31 else bits)


def _fmax(a, b):
    return cute.arch.fmax(a, b)  # maximumNumber: a NaN operand is ignored (it reaches S instead)


def _add(a, b):
    return a + b


class HopperSoftmax:
    """One instance per SoftmaxConfig; dtypes come from the tensors at compile time.

    Call signature (cute.compile / export_to_c):
        (x (rows, cols):(ld, 1), y (rows, cols):(ld, 1), scale: Float32, stream)
    """

    def __init__(self, cfg: SoftmaxConfig):
        self.cfg = cfg

    @cute.jit
    def __call__(self, x: cute.Tensor, y: cute.Tensor, scale: cutlass.Float32, stream: cuda.CUstream):
        cfg = self.cfg
        cfg.check(x.element_type.width // 8)
        if cutlass.const_expr(x.element_type.width * cfg.vec > 128):
            raise TypeError(f"vec {cfg.vec} of {x.element_type} exceeds 16 bytes")
        rows = x.shape[0]
        R = cfg.rows_per_cta
        grid_x = (rows + R - 1) // R
        if cutlass.const_expr(cfg.cluster > 1):
            self.kernel(x, y, scale).launch(grid=[grid_x, cfg.cluster, 1], block=[cfg.threads, 1, 1],
                                            cluster=[1, cfg.cluster, 1], stream=stream)
        else:
            self.kernel(x, y, scale).launch(grid=[grid_x, 1, 1], block=[cfg.threads, 1, 1], stream=stream)

    @cute.jit
    def _merge(self, buf: cute.Tensor, first: Int32, count: int, lane: Int32):
        """(M, S) of the `count` (m, s) pairs buf[:, first + k], k < count, merged by one warp
        (every lane gets the result)."""
        per_lane = (count + WARP - 1) // WARP
        ms = cute.make_rmem_tensor((per_lane,), Float32)
        ss = cute.make_rmem_tensor((per_lane,), Float32)
        mx = -Float32.inf
        for k in cutlass.range_constexpr(per_lane):
            idx = lane + k * WARP
            ms[k] = -Float32.inf
            ss[k] = Float32(0.0)
            if idx < count:
                ms[k] = buf[0, first + idx]
                ss[k] = buf[1, first + idx]
            mx = _fmax(mx, ms[k])
        big_m = cute.arch.warp_reduction(mx, _fmax)
        acc = Float32(0.0)
        for k in cutlass.range_constexpr(per_lane):
            t = ss[k]
            if ms[k] != -Float32.inf:
                t = ss[k] * ex2((ms[k] - big_m) * LOG2E)
            acc = acc + t
        big_s = cute.arch.warp_reduction(acc, _add)
        return big_m, big_s

    @cute.jit
    def _load(self, tx: cute.Tensor, rx: cute.Tensor, first: Int32, cols: Int32, valid_row, atom=None, lim=None):
        """rx = this thread's accesses of tx (access j at column first + j * tpr * vec), those
        that start inside the row (vec > 1: the whole access, inside the row's ld elements).
        atom: a G2R copy atom of one access (cache hints), else a plain load.
        virt: the accesses that overlap the row (a column may be negative: the head pack), whole
        unless they would run past lim (the elements of x from the row's column 0 on): then the
        row's own elements one by one (the other elements of rx are left as they are)."""
        cfg = self.cfg
        for j in cutlass.range_constexpr(cfg.chunks):
            c0 = first + j * cfg.tpr * cfg.vec
            if cutlass.const_expr(cfg.virt):
                if valid_row and c0 < cols:
                    if c0 + cfg.vec <= lim:
                        rx[None, j].store(tx[None, j].load())
                    else:
                        for i in cutlass.range_constexpr(cfg.vec):
                            if c0 + i >= 0 and c0 + i < cols:
                                rx[i, j] = tx[i, j]
            elif valid_row and c0 < cols:
                if cutlass.const_expr(atom is None):
                    rx[None, j].store(tx[None, j].load())
                else:
                    cute.copy(atom, tx[None, j], rx[None, j])

    @staticmethod
    def _f32(rx: cute.Tensor, i: int, j: int) -> Float32:
        """rx[i, j] as fp32 (exact). A 16-bit x is read as its 32-bit word (pair i // 2, vec >= 2)
        and converted by half_f32: LLVM then keeps each pair one 32-bit value from the load on.
        With rx[i, j].to(Float32) it split the pairs into 16-bit registers where a guarded
        load's branches join, and for bf16 ptxas extracted the high halves there by PRMT, right
        after each load: the thread waited for every load before issuing the next (SASS of
        p128_t128_v8x5_u; the H200 ran bf16 at 60-70% of copy where fp16, whose conversion
        reads a register's high half directly, reached 88-93%)."""
        if cutlass.const_expr(rx.element_type.width == 16 and rx.shape[0] >= 2):
            return half_f32(cute.recast_tensor(rx, Int32)[i // 2, j], i % 2 == 1,
                            rx.element_type == cutlass.BFloat16)
        return rx[i, j].to(Float32)

    @cute.jit
    def _values(self, rx: cute.Tensor, v: cute.Tensor, first: Int32, cols: Int32, valid_row, scale: Float32):
        """v = scale * rx in fp32, -Inf outside the row's columns [0, cols) (and for a row past
        rows); returns the max."""
        cfg = self.cfg
        m = -Float32.inf
        for j in cutlass.range_constexpr(cfg.chunks):
            c0 = first + j * cfg.tpr * cfg.vec
            left = cols - c0  # elements of this access before cols
            if not valid_row:
                left = Int32(0)
            for i in cutlass.range_constexpr(cfg.vec):
                val = self._f32(rx, i, j) * scale
                v[i, j] = val if i < left else -Float32.inf
                if cutlass.const_expr(cfg.virt):
                    v[i, j] = v[i, j] if c0 + i >= 0 else -Float32.inf  # the head pack's foreign elements
                m = _fmax(m, v[i, j])
        return m

    @cute.jit
    def _store(self, ry: cute.Tensor, ty: cute.Tensor, first: Int32, cols: Int32, valid_row, atom=None):
        """ty = ry for the elements before cols: whole accesses as one vector store, the last
        partial one element by element (the padding past cols is never written). atom: an R2G
        copy atom of one whole access or of 16 bytes (cache hints), else a plain store."""
        cfg = self.cfg
        V = cfg.vec
        per_copy = V
        if cutlass.const_expr(atom is not None):
            per_copy = min(V, 128 // ty.element_type.width)  # an fp32 y of 8-element accesses: 2 copies
        for j in cutlass.range_constexpr(cfg.chunks):
            c0 = first + j * cfg.tpr * V
            if cutlass.const_expr(V == 1):
                if valid_row and c0 < cols:
                    if cutlass.const_expr(atom is None):
                        ty[0, j] = ry[0, j]
                    else:
                        cute.copy(atom, ry[None, j], ty[None, j])
            elif cutlass.const_expr(atom is None):
                self._put(ry, ty, j, c0, cols, valid_row)
            else:
                if valid_row and c0 + V <= cols:
                    cute.copy(atom, cute.logical_divide(ry[None, j], cute.make_layout(per_copy)),
                              cute.logical_divide(ty[None, j], cute.make_layout(per_copy)))
                elif valid_row and c0 < cols:
                    for i in cutlass.range_constexpr(V):
                        if c0 + i < cols:
                            ty[i, j] = ry[i, j]

    @cute.jit
    def _put(self, ry: cute.Tensor, ty: cute.Tensor, j: int, c0: Int32, cols: Int32, valid_row):
        """ty[:, j] = ry[:, j] (vec > 1; access j starts at column c0): one vector store when the
        access lies inside the row, else its elements inside the row one by one (virt: c0 < 0 at
        the row's head pack; never a neighbour row's y or the padding)."""
        V = self.cfg.vec
        if cutlass.const_expr(self.cfg.virt):
            if valid_row and c0 >= 0 and c0 + V <= cols:
                ty[None, j].store(ry[None, j].load())
            elif valid_row and c0 < cols:
                for i in cutlass.range_constexpr(V):
                    if c0 + i >= 0 and c0 + i < cols:
                        ty[i, j] = ry[i, j]
        else:
            if valid_row and c0 + V <= cols:
                ty[None, j].store(ry[None, j].load())
            elif valid_row and c0 < cols:
                for i in cutlass.range_constexpr(V):
                    if c0 + i < cols:
                        ty[i, j] = ry[i, j]

    @cute.jit
    def _row_merge(self, m: Float32, s: Float32, buf: cute.Tensor, r_in: Int32, warp: Int32, lane: Int32):
        """(M, S) of the row from every group's (m, s) (the group = the row's threads in this
        warp), through shared memory when the row spans several warps (no cluster)."""
        W = self.cfg.warps_per_row
        big_m = m
        big_s = s
        if cutlass.const_expr(W > 1):
            if lane == 0:
                buf[0, warp] = m  # the row's warps are r_in * W .. r_in * W + W - 1
                buf[1, warp] = s
            cute.arch.barrier()
            big_m, big_s = self._merge(buf, r_in * W, W, lane)
        return big_m, big_s

    @cute.jit
    def _cluster_merge(self, m: Float32, s: Float32, pairs: cute.Tensor, buf: cute.Tensor, mbar, rank: Int32,
                       warp: Int32, lane: Int32):
        """(M, S) of the row from every warp's (m, s) in the cluster: after the cluster wait,
        lane k < cluster stores the warp's pair into slot rank * W + warp of CTA k (st.async,
        completion on CTA k's mbarrier), then every warp merges the C * W pairs."""
        C, W = self.cfg.cluster, self.cfg.warps_per_row
        cute.arch.cluster_wait()
        if lane < C:
            cute.arch.store_async_dsmem(pairs.iterator + (rank * W + warp), (f32_bits(m), f32_bits(s)), mbar, lane)
        cute.arch.mbarrier_wait(mbar, 0)
        return self._merge(buf, Int32(0), C * W, lane)

    @cute.jit
    def _row_stats(self, m: Float32, s: Float32, pairs: cute.Tensor, buf: cute.Tensor, mbar, rank: Int32,
                   r_in: Int32, warp: Int32, lane: Int32):
        """(M, S) of the row from this group's (m, s): across the cluster's CTAs (cluster > 1,
        _cluster_merge) or the row's warps (_row_merge)."""
        big_m = m
        big_s = s
        if cutlass.const_expr(self.cfg.cluster > 1):
            big_m, big_s = self._cluster_merge(m, s, pairs, buf, mbar, rank, warp, lane)
        else:
            big_m, big_s = self._row_merge(m, s, buf, r_in, warp, lane)
        return big_m, big_s

    @cute.jit
    def _one_pass_packed(self, tx: cute.Tensor, ty: cute.Tensor, rx: cute.Tensor, ry: cute.Tensor, first: Int32,
                         cols: Int32, valid_row, scale: Float32, pairs: cute.Tensor, buf: cute.Tensor, mbar,
                         rank: Int32, warp: Int32, lane: Int32, r_in: Int32, lim):
        """The one-pass kernel with the 16-bit x kept packed in registers (the `packed` kind): twice
        the values a thread holds for the registers of the fp32 kind, fewer instructions per
        element, exp computed twice. A thread whose accesses all lie inside the row (all but the
        row's last threads) takes the unmasked path:
        - m: the packed max.{bf16,f16}x2 of x (scale >= 0) or min (scale < 0) over the thread's
          pairs, then m = scale x_max (s x is monotone in x; the packed max/min ignore a NaN as
          maximumNumber does: the NaN reaches the sum instead);
        - s = sum 2^(x sl - m log2 e), sl = scale log2 e (one FFMA + ex2.approx.ftz per element:
          a term below 2^-126 flushes to 0, negligible beside the group's max term 1);
        - after the group / row / cluster merge (M, S): y = 2^(x sl - M log2 e + 24) * (2^-24 / S),
          rounded pairwise by cvt.rn.{bf16,f16}x2.f32: the exponent is at most 24 (no overflow) and
          the 2^-24 multiply keeps results below 2^-126 (subnormal outputs) as the fp32 kind does.
        Special values as the fp32 kind: a NaN or +Inf makes S (hence 2^-24 / S) NaN; an all -Inf
        row has M = -Inf, S = 0 and x sl - M log2 e = -Inf + Inf = NaN; -Inf elements give 0.
        The masked path (the row's last accesses, rows past rows; virt: its first access too)
        computes the same with each element outside [0, cols) left out (per element, in fp32), and
        stores only inside the row."""
        cfg = self.cfg
        V, J, TPR = cfg.vec, cfg.chunks, cfg.tpr
        H = V // 2
        G = min(TPR, WARP)
        bf16 = cutlass.const_expr(rx.element_type == cutlass.BFloat16)
        kind = "bf16x2" if cutlass.const_expr(bf16) else "f16x2"
        neg_inf = 0xFF80FF80 if cutlass.const_expr(bf16) else 0xFC00FC00
        pos_inf = 0x7F807F80 if cutlass.const_expr(bf16) else 0x7C007C00
        out16 = cutlass.const_expr(ry.element_type.width == 16)
        out_bf16 = cutlass.const_expr(ry.element_type == cutlass.BFloat16)

        self._load(tx, rx, first, cols, valid_row, lim=lim)
        rxw = cute.recast_tensor(rx, Int32)  # (H, J): pair k of access j
        full = valid_row and first + (J - 1) * TPR * V + V <= cols
        if cutlass.const_expr(cfg.virt):
            full = full and first >= 0
        sl = scale * LOG2E
        NACC = 4

        # The thread's max of s x.
        m = -Float32.inf
        if full:
            acc = cute.make_rmem_tensor((NACC,), Int32)
            if scale >= Float32(0.0):
                for a in cutlass.range_constexpr(NACC):
                    acc[a] = _i32(neg_inf)
                for j in cutlass.range_constexpr(J):
                    for k in cutlass.range_constexpr(H):
                        a = (j * H + k) % NACC
                        acc[a] = pair_op(acc[a], rxw[k, j], "max." + kind)
                for a in cutlass.range_constexpr(1, NACC):
                    acc[0] = pair_op(acc[0], acc[a], "max." + kind)
            else:
                for a in cutlass.range_constexpr(NACC):
                    acc[a] = _i32(pos_inf)
                for j in cutlass.range_constexpr(J):
                    for k in cutlass.range_constexpr(H):
                        a = (j * H + k) % NACC
                        acc[a] = pair_op(acc[a], rxw[k, j], "min." + kind)
                for a in cutlass.range_constexpr(1, NACC):
                    acc[0] = pair_op(acc[0], acc[a], "min." + kind)
            # (fmax with -Inf first: 0 x Inf = NaN pairs at scale 0 leave m = -Inf, as the fp32 kind)
            m = _fmax(m, _fmax(half_f32(acc[0], False, bf16) * scale, half_f32(acc[0], True, bf16) * scale))
        else:
            for j in cutlass.range_constexpr(J):
                left = cols - (first + j * TPR * V)  # elements of this access inside the row
                if not valid_row:
                    left = Int32(0)
                lo = Int32(0)
                if cutlass.const_expr(cfg.virt):
                    lo = -(first + j * TPR * V)  # virt: the head pack's foreign elements
                for i in cutlass.range_constexpr(V):
                    if i < left and i >= lo:
                        m = _fmax(m, self._f32(rx, i, j) * scale)
        m = cute.arch.warp_reduction(m, _fmax, threads_in_group=G)

        # s = sum exp(s x - m); m = -Inf (only -Inf, masked or NaN values): exp(s x) instead.
        mz = m
        if m == -Float32.inf:
            mz = Float32(0.0)
        mzl = -(mz * LOG2E)
        sums = cute.make_rmem_tensor((NACC,), Float32)
        for a in cutlass.range_constexpr(NACC):
            sums[a] = Float32(0.0)
        if full:
            for j in cutlass.range_constexpr(J):
                for k in cutlass.range_constexpr(H):
                    w = rxw[k, j]
                    a = (2 * (j * H + k)) % NACC
                    sums[a] = sums[a] + ex2_ftz(half_f32(w, False, bf16) * sl + mzl)
                    sums[a + 1] = sums[a + 1] + ex2_ftz(half_f32(w, True, bf16) * sl + mzl)
        else:
            for j in cutlass.range_constexpr(J):
                left = cols - (first + j * TPR * V)
                if not valid_row:
                    left = Int32(0)
                lo = Int32(0)
                if cutlass.const_expr(cfg.virt):
                    lo = -(first + j * TPR * V)
                for i in cutlass.range_constexpr(V):
                    if i < left and i >= lo:
                        sums[i % NACC] = sums[i % NACC] + ex2_ftz(self._f32(rx, i, j) * sl + mzl)
        s = (sums[0] + sums[1]) + (sums[2] + sums[3])
        s = cute.arch.warp_reduction(s, _add, threads_in_group=G)

        big_m, big_s = self._row_stats(m, s, pairs, buf, mbar, rank, r_in, warp, lane)

        # y = 2^(x sl - M log2 e + 24) * (2^-24 / S), access by access.
        c1 = Float32(24.0) - big_m * LOG2E
        f2 = Float32(2.0 ** -24) / big_s
        ryw = ry
        if cutlass.const_expr(out16):
            ryw = cute.recast_tensor(ry, Int32)
        for j in cutlass.range_constexpr(J):
            for k in cutlass.range_constexpr(H):
                w = rxw[k, j]
                lo = ex2_ftz(half_f32(w, False, bf16) * sl + c1) * f2
                hi = ex2_ftz(half_f32(w, True, bf16) * sl + c1) * f2
                if cutlass.const_expr(out16):
                    ryw[k, j] = pack_pair(lo, hi, out_bf16)
                else:
                    ry[2 * k, j] = lo
                    ry[2 * k + 1, j] = hi
            self._put(ry, ty, j, first + j * TPR * V, cols, valid_row)

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mY: cute.Tensor, scale: cutlass.Float32):
        cfg = self.cfg
        V, J, TPR, C = cfg.vec, cfg.chunks, cfg.tpr, cfg.cluster
        R = cfg.rows_per_cta
        W = cfg.warps_per_row
        G = min(TPR, WARP)  # threads of a row within one warp
        CTA_COLS = cfg.cols_per_cta

        tidx, _, _ = cute.arch.thread_idx()
        bidx, rank, _ = cute.arch.block_idx()  # cluster (1, C, 1): the rank is block y
        if cutlass.const_expr(C == 1):
            rank = Int32(0)
        warp = tidx // WARP
        lane = tidx % WARP
        r_in = tidx // TPR
        t = tidx % TPR
        row = bidx * R + r_in
        rows = mX.shape[0]
        cols = mX.shape[1]
        valid_row = row < rows
        rowc = cutlass.min(row, rows - 1)

        # Shared memory: the (m, s) pairs of the cross-warp / cluster merge, and the mbarrier.
        smem = cutlass.memory.SmemAllocator()
        slots = C * W if cutlass.const_expr(C > 1) else R * W
        pairs = smem.allocate_tensor(cutlass.Int64, cute.make_layout(slots), byte_alignment=16)
        buf = cute.make_tensor(cute.recast_ptr(pairs.iterator, dtype=Float32),
                               cute.make_layout((2, slots), stride=(1, 2)))  # (m, s) of slot k
        mbar = smem.allocate_array(cutlass.Int64, 1, byte_alignment=8)
        if cutlass.const_expr(C > 1):
            if tidx == 0:
                cute.arch.mbarrier_init(mbar, 1)
            cute.arch.mbarrier_init_fence()
            if tidx == 0:
                cute.arch.mbarrier_arrive_and_expect_tx(mbar, C * W * 8)
            # Peers may store into this CTA's shared memory once every CTA has passed
            # cluster_wait below (after the loads are issued).
            cute.arch.cluster_arrive_relaxed()

        # This thread's accesses: (vec, chunk) of its row's slice (or tile).
        split = cute.make_layout((V, TPR, J), stride=(1, V, V * TPR))
        rx = cute.make_rmem_tensor((V, J), mX.element_type)
        v = cute.make_rmem_tensor((V, J), Float32)
        ry = cute.make_rmem_tensor((V, J), mY.element_type)

        if cutlass.const_expr(cfg.online):
            # Pass 1: a running (m, s) per thread over this CTA's tiles k = rank + i C.
            n_tiles = (cols + CTA_COLS - 1) // CTA_COLS
            n_mine = n_tiles
            if cutlass.const_expr(C > 1):
                n_mine = (n_tiles - rank + C - 1) // C  # 0 when the row has fewer tiles than C
            m = -Float32.inf
            s = Float32(0.0)
            for i in cutlass.range(n_mine, unroll=1):
                k = rank + i * C
                tx = cute.make_tensor(cute.local_tile(mX[rowc, None], (CTA_COLS,), (k,)).iterator, split)[None, t, None]
                first = k * CTA_COLS + t * V
                self._load(tx, rx, first, cols, valid_row)
                mt = self._values(rx, v, first, cols, valid_row, scale)
                mtz = mt
                if mt == -Float32.inf:
                    mtz = Float32(0.0)
                mtl = mtz * LOG2E
                st = Float32(0.0)
                for j in cutlass.range_constexpr(J):
                    for i2 in cutlass.range_constexpr(V):
                        st = st + ex2(v[i2, j] * LOG2E - mtl)
                mn = _fmax(m, mt)
                a = s
                if m != -Float32.inf:
                    a = s * ex2((m - mn) * LOG2E)
                b = st
                if mt != -Float32.inf:
                    b = st * ex2((mt - mn) * LOG2E)
                m = mn
                s = a + b
            # The group's pair, then the row's.
            gm = cute.arch.warp_reduction(m, _fmax, threads_in_group=G)
            term = s
            if m != -Float32.inf:
                term = s * ex2((m - gm) * LOG2E)
            gs = cute.arch.warp_reduction(term, _add, threads_in_group=G)
            big_m, big_s = self._row_stats(gm, gs, pairs, buf, mbar, rank, r_in, warp, lane)
            # Pass 2: y = exp(v - M) / S, this CTA's tiles again, the latest read first (in L2).
            inv = Float32(1.0) / big_s
            ml = big_m * LOG2E
            bits = V * mX.element_type.width
            ld_atom = None
            st_atom = None
            if cutlass.const_expr(C > 1):
                ld_atom = cute.make_copy_atom(cute.nvgpu.CopyG2ROp(), mX.element_type, num_bits_per_copy=bits,
                                              load_cache_mode=cute.nvgpu.LoadCacheMode.STREAMING)
                st_atom = cute.make_copy_atom(cute.nvgpu.CopyR2GOp(), mY.element_type,
                                              num_bits_per_copy=min(V * mY.element_type.width, 128),
                                              store_cache_mode=cute.nvgpu.StoreCacheMode.STREAMING)
            for i in cutlass.range(n_mine, unroll=1):
                k = rank + (n_mine - 1 - i) * C
                tx = cute.make_tensor(cute.local_tile(mX[rowc, None], (CTA_COLS,), (k,)).iterator, split)[None, t, None]
                ty = cute.make_tensor(cute.local_tile(mY[rowc, None], (CTA_COLS,), (k,)).iterator, split)[None, t, None]
                first = k * CTA_COLS + t * V
                self._load(tx, rx, first, cols, valid_row, ld_atom)
                self._values(rx, v, first, cols, valid_row, scale)
                for j in cutlass.range_constexpr(J):
                    for i2 in cutlass.range_constexpr(V):
                        ry[i2, j] = (ex2(v[i2, j] * LOG2E - ml) * inv).to(mY.element_type)
                self._store(ry, ty, first, cols, valid_row, st_atom)
        else:
            # One pass: this CTA's slice of the row, [rank CTA_COLS, (rank + 1) CTA_COLS) in
            # (virtual) columns; `first` = the column of this thread's access 0.
            lim = None
            if cutlass.const_expr(cfg.virt):
                # Virtual columns: the row's aligned span starts a = (row ld) % vec elements
                # before the row, at a multiple of vec (16-byte packs of x and of y).
                ld = mX.stride[0]
                start = cutlass.Int64(rowc) * ld
                a = Int32(start % V)
                span = cute.assume(start - cutlass.Int64(a), divby=V)
                xs = cute.make_tensor(mX.iterator + span, cute.make_layout((C * CTA_COLS,)))  # the row's span
                ys = cute.make_tensor(mY.iterator + span, cute.make_layout((C * CTA_COLS,)))
                tx = cute.make_tensor(cute.local_tile(xs, (CTA_COLS,), (rank,)).iterator, split)[None, t, None]
                ty = cute.make_tensor(cute.local_tile(ys, (CTA_COLS,), (rank,)).iterator, split)[None, t, None]
                first = rank * CTA_COLS + t * V - a
                # Elements of x from the row's column 0 to the end of x, at most 2^31 - 1.
                lim = Int32(cutlass.min(cutlass.Int64(rows - 1 - rowc) * ld + cutlass.Int64(cols),
                                        cutlass.Int64(MAX_INT32)))
            else:
                tx = cute.make_tensor(cute.local_tile(mX[rowc, None], (CTA_COLS,), (rank,)).iterator, split)[None, t, None]
                ty = cute.make_tensor(cute.local_tile(mY[rowc, None], (CTA_COLS,), (rank,)).iterator, split)[None, t, None]
                first = rank * CTA_COLS + t * V
            if cutlass.const_expr(cfg.packed):
                self._one_pass_packed(tx, ty, rx, ry, first, cols, valid_row, scale, pairs, buf, mbar, rank, warp,
                                      lane, r_in, lim)
            else:
                self._one_pass(tx, ty, rx, ry, v, first, cols, valid_row, scale, pairs, buf, mbar, rank, warp,
                               lane, r_in, lim)

    @cute.jit
    def _one_pass(self, tx: cute.Tensor, ty: cute.Tensor, rx: cute.Tensor, ry: cute.Tensor, v: cute.Tensor,
                  first: Int32, cols: Int32, valid_row, scale: Float32, pairs: cute.Tensor, buf: cute.Tensor, mbar,
                  rank: Int32, warp: Int32, lane: Int32, r_in: Int32, lim):
        """The one-pass kernel with the row's values in fp32 registers: e = exp(v - m) kept, one
        exp per element."""
        cfg = self.cfg
        V, J = cfg.vec, cfg.chunks
        G = min(cfg.tpr, WARP)
        self._load(tx, rx, first, cols, valid_row, lim=lim)
        m = self._values(rx, v, first, cols, valid_row, scale)
        m = cute.arch.warp_reduction(m, _fmax, threads_in_group=G)

        # e = exp(v - m) in place; m = -Inf (only -Inf, masked or NaN values): exp(v) instead.
        mz = m
        if m == -Float32.inf:
            mz = Float32(0.0)
        mzl = mz * LOG2E
        s = Float32(0.0)
        for j in cutlass.range_constexpr(J):
            for i in cutlass.range_constexpr(V):
                e = ex2(v[i, j] * LOG2E - mzl)
                v[i, j] = e
                s = s + e
        s = cute.arch.warp_reduction(s, _add, threads_in_group=G)

        big_m, big_s = self._row_stats(m, s, pairs, buf, mbar, rank, r_in, warp, lane)

        f = ex2((m - big_m) * LOG2E) / big_s
        for j in cutlass.range_constexpr(J):
            for i in cutlass.range_constexpr(V):
                ry[i, j] = (v[i, j] * f).to(ry.element_type)
        self._store(ry, ty, first, cols, valid_row)
