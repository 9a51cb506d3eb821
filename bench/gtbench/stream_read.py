"""The streaming-read kernel of the stream ceiling (issue 14, deliver 3): how long this GPU needs to
read B bytes once from a cold L2. One Triton kernel, a handful of configs (block, warps, grid);
parts/stream.py times every config at every size and keeps the best. Imported on the GPU machine
only (triton); the mock never loads it."""

from __future__ import annotations

import triton
import triton.language as tl

# (name, BLOCK int32 elements per program and step, num_warps, programs per SM or 0 = one program
# per block). BLOCK / (32 * warps) >= 4: every thread issues 16-byte loads, 4-16 of them per step.
STREAM_CONFIGS = (("b4096w4", 4096, 4, 0), ("b8192w8", 8192, 8, 0), ("b16384w8", 16384, 8, 0),
                  ("b4096w4p8", 4096, 4, 8), ("b8192w8p4", 8192, 8, 4), ("b16384w16p2", 16384, 16, 2))


@triton.jit
def _stream_read(x_ptr, out_ptr, n_blocks, n_tail, BLOCK: tl.constexpr):
    """out[pid] = the int32 sum (wrapping) of the full BLOCKs pid, pid + grid, ... of x; program 0
    also adds the n_tail elements after the last full block. Unmasked loads of the full blocks, so
    they stay 16 bytes wide; evict-first, as a decode GEMM streams its weights."""
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for b in range(pid, n_blocks, step):
        acc += tl.load(x_ptr + b * BLOCK + offs, eviction_policy="evict_first")
    if pid == 0:
        tail = n_blocks * BLOCK + offs
        acc += tl.load(x_ptr + tail, mask=offs < n_tail, other=0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def stream_launchers(x, out, sms):
    """{config name: fn(n)}: fn(n) enqueues one read of the int32 tensor x's first n elements (n % BLOCK
    of them in program 0's tail) whose partial sums land in out's first programs; out holds at least
    max_programs(n) elements."""
    fns = {}
    for name, block, warps, per_sm in STREAM_CONFIGS:
        def fn(n, block=block, warps=warps, per_sm=per_sm):
            n_blocks = n // block
            grid = max(1, min(n_blocks, per_sm * sms) if per_sm else n_blocks)
            _stream_read[(grid,)](x, out, n_blocks, n - n_blocks * block, BLOCK=block, num_warps=warps)
        fns[name] = fn
    return fns


def max_programs(max_n, sms):
    """The most programs any config launches for at most max_n elements (out's size)."""
    return max(max(1, min(max_n // b, p * sms) if p else max_n // b) for _, b, _, p in STREAM_CONFIGS)
