"""gemmtune.torch.grouped_mm: torch._grouped_mm's signature, run by gemmtune's tuned grouped GEMM.

    out = gt.grouped_mm(x, w.transpose(-2, -1), offs=offs)   # x [sum m_g, k], w [G, n, k], offs int32 [G]

Two of torch._grouped_mm's cases (docs/grouped.md):
  mat_a 2D [total, k], mat_b 3D [G, k, n], offs int32 [G] on the GPU (the cumulative end of each
      group's rows): the contiguous layout; out [total, n], rows past offs[-1] left unwritten.
  mat_a 3D [G, m, k], mat_b 3D [G, k, n], no offs: every group has m rows (the masked layout with
      all rows valid); out [G, m, n].
bfloat16 or float16 inputs; bias [G, n] (the input dtype) optional; out_dtype: the input dtype
(default), bfloat16, float16 or float32. mat_b is read as [G, n, k] with k contiguous (an
nn.Linear weight per group, transposed as a view); another layout is copied first. The split is
read on the GPU: nothing here waits for the device. The kernel is chosen per (G, n, k, dtypes,
layout, bias) and power-of-two bucket of the mean rows per group (total // G): tuned once, never
for a new split. Eager only (not a torch.library op: torch.compile breaks the graph here).
"""

from typing import Optional

import torch
from torch import Tensor

from .._capi import GT_ERR_INVALID, GemmtuneError
from . import _plan as P

_OP = "grouped_mm"
_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_kernels: dict = {}  # (device, problem text) -> gemmtune.GroupedKernel
_ones: dict = {}     # (device, G, m) -> int32 [G] of m (the 3D case's counts)


def _bucket(rows: int) -> int:
    b = 1
    while b < rows:
        b *= 2
    return b


def _kernel(problem: dict, device: int):
    from ._ops import engine  # the engine the other ops use (configure()'s options)
    key = (device, tuple(sorted(problem.items())))
    k = _kernels.get(key)
    if k is None:
        if torch.cuda.is_current_stream_capturing():
            raise GemmtuneError(GT_ERR_INVALID, f"gemmtune.torch.{_OP}: no kernel for {problem} in this process yet and "
                                                "the stream is being captured into a CUDA graph: run it once before capture")
        k, _ = engine(device).select_grouped(problem)
        _kernels[key] = k
    return k


def grouped_mm(mat_a: Tensor, mat_b: Tensor, offs: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """torch._grouped_mm(mat_a, mat_b, offs, bias, out_dtype) by gemmtune (see the module's text)."""
    for name, t in (("mat_a", mat_a), ("mat_b", mat_b)):
        if not isinstance(t, Tensor):
            raise P.invalid(_OP, f"{name}: expected a tensor")
        if t.dtype not in (torch.bfloat16, torch.float16):
            raise P.invalid(_OP, f"{name}: dtype {t.dtype} is not supported (bfloat16, float16)")
    if mat_b.dtype != mat_a.dtype:
        raise P.invalid(_OP, f"mat_b: dtype {mat_b.dtype} differs from mat_a's {mat_a.dtype}")
    if mat_b.dim() != 3:
        raise P.invalid(_OP, f"mat_b: expected 3 dimensions [G, k, n], got {tuple(mat_b.shape)}")
    G, k, n = mat_b.shape
    if mat_a.dim() == 2:
        if offs is None:
            raise P.invalid(_OP, "offs: required with a 2D mat_a (the end of each group's rows)")
        if mat_a.shape[1] != k:
            raise P.invalid(_OP, f"mat_a: k = {mat_a.shape[1]} differs from mat_b's {k}")
        if offs.dtype != torch.int32 or offs.dim() != 1 or offs.shape[0] != G:
            raise P.invalid(_OP, f"offs: expected int32 [{G}], got {offs.dtype} {tuple(offs.shape)}")
        layout, capacity, per_group = "contiguous", mat_a.shape[0], max(1, mat_a.shape[0] // G)
        out_shape = (mat_a.shape[0], n)
    elif mat_a.dim() == 3:
        if offs is not None:
            raise P.invalid(_OP, "offs: not taken with a 3D mat_a (every group has mat_a.shape[1] rows)")
        if mat_a.shape[0] != G or mat_a.shape[2] != k:
            raise P.invalid(_OP, f"mat_a: expected [{G}, m, {k}], got {tuple(mat_a.shape)}")
        layout, capacity, per_group = "masked", mat_a.shape[1], max(1, mat_a.shape[1])
        out_shape = (G, mat_a.shape[1], n)
    else:
        raise P.invalid(_OP, f"mat_a: expected 2 or 3 dimensions, got {tuple(mat_a.shape)}")
    out_dtype = mat_a.dtype if out_dtype is None else out_dtype
    if out_dtype not in _DTYPES:
        raise P.invalid(_OP, f"out_dtype: {out_dtype} is not supported (bfloat16, float16, float32)")
    if bias is not None and (bias.dtype != out_dtype or tuple(bias.shape) != (G, n)):
        raise P.invalid(_OP, f"bias: expected {out_dtype} [{G}, {n}], got {bias.dtype} {tuple(bias.shape)}")

    for name, t in (("mat_a", mat_a), ("mat_b", mat_b), ("offs", offs), ("bias", bias)):
        if t is not None and (t.device.type != "cuda" or t.device != mat_a.device):
            raise P.invalid(_OP, f"{name}: expected a CUDA tensor on mat_a's device, got {t.device}")
    out = torch.empty(out_shape, dtype=out_dtype, device=mat_a.device)
    if out.numel() == 0:
        return out
    a = mat_a.contiguous()
    w = mat_b.transpose(-2, -1)  # [G, n, k]; a view when mat_b is a transposed weight
    if not w.is_contiguous():
        w = w.contiguous()
    device = mat_a.get_device()
    if layout == "masked":
        rows = _ones.get((device, G, capacity))
        if rows is None:
            rows = _ones[(device, G, capacity)] = torch.full((G,), capacity, dtype=torch.int32, device=mat_a.device)
    else:
        rows = offs
    problem = {"groups": G, "n": n, "k": k, "rows_per_group": _bucket(per_group), "layout": layout,
               "dtype": _DTYPES[a.dtype], "out_dtype": _DTYPES[out_dtype], "bias": bias is not None}
    kernel = _kernel(problem, device)
    for name, t in (("mat_a", a), ("mat_b", w), ("out", out), ("bias", bias)):
        if t is not None and t.data_ptr() & 15:
            raise P.invalid(_OP, f"{name}: data pointer {t.data_ptr():#x} is not 16-byte aligned")
    kernel.run(a.data_ptr(), w.data_ptr(), out.data_ptr(), rows.data_ptr(), capacity,
               bias.data_ptr() if bias is not None else 0, 0, 0, torch.cuda.current_stream(device).cuda_stream)
    return out


def clear() -> None:
    """Forgets the grouped kernels selected so far (clear_kernels() calls it)."""
    _kernels.clear()
