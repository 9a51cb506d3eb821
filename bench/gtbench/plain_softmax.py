"""The plain Triton softmax of bench/softmax.py (its baseline): one program per row; the row whole
in registers (BLOCK = next power of two >= cols, num_warps by BLOCK as in Triton's fused-softmax
tutorial) up to 32K columns, beyond that the same program loops over 4K chunks (max, sum, write:
three reads)."""

from __future__ import annotations

ROW_MAX_BLOCK = 32768


def plain_variant(cols):
    """How launch() runs rows of `cols` columns, in words."""
    import triton
    block = triton.next_power_of_2(cols)
    return f"row in registers, BLOCK {block}" if block <= ROW_MAX_BLOCK else "3-pass loop, BLOCK 4096, 8 warps"


def make_plain_softmax():
    """launch(x, y, scale): y[rows, cols] = softmax(scale * x) over the last dimension."""
    import triton
    import triton.language as tl

    @triton.jit
    def plain_softmax_row(x, y, cols, ld, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        v = tl.load(x + row * ld + offs, mask=mask, other=0.0).to(tl.float32)
        v = tl.where(mask, v * scale, float("-inf"))
        v = v - tl.max(v, axis=0)
        e = tl.exp(v)
        out = e / tl.sum(e, axis=0)
        tl.store(y + row * ld + offs, out.to(y.dtype.element_ty), mask=mask)

    @triton.jit
    def plain_softmax_loop(x, y, cols, ld, scale, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        xr = x + row * ld
        yr = y + row * ld
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            m = tl.maximum(m, tl.where(mask, v * scale, float("-inf")))
        big = tl.max(m, axis=0)
        s = tl.zeros([BLOCK], tl.float32)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            s += tl.where(mask, tl.exp(v * scale - big), 0.0)
        inv = 1.0 / tl.sum(s, axis=0)
        for c0 in range(0, cols, BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            mask = offs < cols
            v = tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(yr + offs, (tl.exp(v * scale - big) * inv).to(yr.dtype.element_ty), mask=mask)

    def launch(x, y, scale):
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        if block <= ROW_MAX_BLOCK:
            warps = 4 if block < 2048 else 8 if block < 4096 else 16 if block < 16384 else 32
            plain_softmax_row[(rows,)](x, y, cols, x.stride(0), scale, BLOCK=block, num_warps=warps)
        else:
            plain_softmax_loop[(rows,)](x, y, cols, x.stride(0), scale, BLOCK=4096, num_warps=8)

    return launch
