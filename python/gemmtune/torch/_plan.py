"""Tensors -> gemmtune problems (no GPU, no library: works on meta and fake tensors).

Each plan_* function checks its arguments, maps shapes, strides and dtypes onto the C API's
problem fields and returns a Plan: the problem (a dict for the C API), the output's shape,
strides and dtype, and a hashable key of everything the kernel depends on. Real runs and the
fake (meta) implementations share these functions, so torch.compile sees the same output
layout and the same errors as eager mode.

Layouts (include/gemmtune/problem.hpp): a [rows, cols] tensor with strides (s0, s1) is
row-major when s1 == 1 (ld = s0) and column-major when s0 == 1 (ld = s1); any other strides
(a non-unit inner stride, an expanded view) are refused, naming the argument.
"""

from typing import NamedTuple, Optional, Sequence

import torch

from .._capi import GT_ERR_INVALID, GemmtuneError

_DTYPES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float8_e4m3fn: "e4m3",
    torch.float8_e5m2: "e5m2",
}
_HALF_OR_FP32 = (torch.bfloat16, torch.float16, torch.float32)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
# Activations by their names in torch.nn.functional and gemmtune's own spellings.
ACTIVATIONS = {None: "none", "none": "none", "relu": "relu", "gelu_tanh": "gelu", "gelu": "gelu", "silu": "silu"}


class Plan(NamedTuple):
    key: tuple              # everything the kernel depends on (hashable)
    problem: dict           # the C API's problem (GemmProblem / SoftmaxProblem fields)
    out_shape: tuple
    out_stride: tuple
    out_dtype: torch.dtype


def invalid(op: str, message: str) -> GemmtuneError:
    """The error of a refused argument: 'gemmtune.torch.<op>: <argument>: <reason>'."""
    return GemmtuneError(GT_ERR_INVALID, f"gemmtune.torch.{op}: {message}")


def _check_cuda(op: str, name: str, t: torch.Tensor, device: Optional[torch.device]) -> None:
    if t.device.type not in ("cuda", "meta"):
        raise invalid(op, f"{name}: is on {t.device}; gemmtune runs on CUDA tensors")
    if device is not None and t.device != device:
        raise invalid(op, f"{name}: is on {t.device}, but the first operand is on {device} (mixed devices)")


def _dtype(op: str, name: str, t: torch.Tensor, allowed: Sequence[torch.dtype]) -> str:
    if t.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise invalid(op, f"{name}: dtype {str(t.dtype).replace('torch.', '')} is not supported (accepted: {names})")
    return _DTYPES[t.dtype]


def matrix_layout(op: str, name: str, t: torch.Tensor) -> tuple:
    """('r' | 'c', ld) of a 2-D tensor; refuses strides that are neither."""
    if t.dim() != 2:
        raise invalid(op, f"{name}: must be 2-D, got {t.dim()}-D shape {tuple(t.shape)}")
    rows, cols = (int(v) for v in t.shape)
    s0, s1 = (int(v) for v in t.stride())
    # A size-1 dimension's stride is meaningless: the packed value stands in for it.
    if s1 == 1 or cols == 1:
        ld = s0 if rows > 1 else cols
        if ld >= cols:
            return "r", ld
    if s0 == 1 or rows == 1:
        ld = s1 if cols > 1 else rows
        if ld >= rows:
            return "c", ld
    raise invalid(op, f"{name}: strides {tuple(t.stride())} of shape {tuple(t.shape)} are neither row-major "
                      f"(inner stride 1, row stride >= {cols}) nor column-major (inner stride 1, column stride "
                      f">= {rows}); pass .contiguous()")


def _check_offset(op: str, name: str, t: torch.Tensor) -> None:
    # The 16-byte alignment of the data pointer is checked at run time (data_ptr() is not
    # known while tracing); here only what a fake tensor also knows.
    if t.storage_offset() * t.element_size() % 16 and t.device.type != "meta":
        raise invalid(op, f"{name}: storage offset {t.storage_offset()} is not 16-byte aligned")


def _gemm_operands(op: str, a: torch.Tensor, b: torch.Tensor) -> tuple:
    """(la, lda, lb, ldb, m, n, k) of D[m, n] = a[m, k] @ b[k, n], the shapes checked."""
    la, lda = matrix_layout(op, "a", a)
    lb, ldb = matrix_layout(op, "b", b)
    m, k = a.shape
    if b.shape[0] != k:
        raise invalid(op, f"b: shape {tuple(b.shape)} does not match a {tuple(a.shape)} (b.shape[0] must be {k})")
    n = b.shape[1]
    _check_sizes(op, m, n, k)
    return la, lda, lb, ldb, m, n, k


def plan_mm(a: torch.Tensor, b: torch.Tensor) -> Plan:
    """D[m, n] = a[m, k] @ b[k, n]; D row-major, a's dtype."""
    op = "mm"
    _check_cuda(op, "a", a, None)
    _check_cuda(op, "b", b, a.device)
    dt = _dtype(op, "a", a, _HALF_OR_FP32)
    if b.dtype != a.dtype:
        raise invalid(op, f"b: dtype {b.dtype} differs from a's {a.dtype}")
    la, lda, lb, ldb, m, n, k = _gemm_operands(op, a, b)
    problem = {"m": int(m), "n": int(n), "k": int(k), "dtype": dt, "out_dtype": dt, "layout": la + lb,
               "lda": lda, "ldb": ldb}
    key = ("mm", a.device, int(m), int(n), int(k), a.dtype, la, lda, lb, ldb)
    return Plan(key, problem, (int(m), int(n)), (int(n), 1), a.dtype)


def _check_sizes(op: str, m: int, n: int, k: int) -> None:
    for name, v in (("m", m), ("n", n), ("k", k)):
        if v < 1:
            raise invalid(op, f"{name}: empty dimension ({name} = {v}); gemmtune needs m, n, k >= 1")


def flatten_rows(op: str, x: torch.Tensor, k: int) -> torch.Tensor:
    """x[..., k] as [rows, k] (nn.Linear's flattening of the leading dimensions), a view
    where the strides allow one, else a contiguous copy."""
    if x.dim() == 2:
        return x
    if x.dim() < 1:
        raise invalid(op, "x: must have at least 1 dimension")
    if x.dim() == 1:
        return x.view(1, k) if x.stride(0) == 1 else x.reshape(1, k)
    return x.reshape(-1, k)


def plan_linear(x2: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                activation: Optional[str]) -> Plan:
    """out[m, n] = act(x2[m, k] @ weight[n, k]^T + bias[n]); out row-major, x's dtype."""
    op = "linear"
    _check_cuda(op, "x", x2, None)
    _check_cuda(op, "weight", weight, x2.device)
    dt = _dtype(op, "x", x2, _HALF_OR_FP32)
    if weight.dtype != x2.dtype:
        raise invalid(op, f"weight: dtype {weight.dtype} differs from x's {x2.dtype}")
    if weight.dim() != 2:
        raise invalid(op, f"weight: must be 2-D [out_features, in_features], got shape {tuple(weight.shape)}")
    m, k = x2.shape
    n, kw = weight.shape
    if kw != k:
        raise invalid(op, f"weight: shape {tuple(weight.shape)} does not match x's last dimension {k}")
    _check_sizes(op, m, n, k)
    la, lda = matrix_layout(op, "x", x2)
    # B[k, n] = weight^T: weight row-major [n, k] is B column-major with ld = weight.stride(0).
    lw, ldw = matrix_layout(op, "weight", weight)
    lb = "c" if lw == "r" else "r"
    act = ACTIVATIONS.get(activation) if isinstance(activation, (str, type(None))) else None
    if act is None:
        raise invalid(op, f"activation: {activation!r} is not one of None, 'relu', 'gelu_tanh', 'silu'")
    bias_key = None
    if bias is not None:
        _check_cuda(op, "bias", bias, x2.device)
        if bias.dtype != x2.dtype:
            raise invalid(op, f"bias: dtype {bias.dtype} differs from x's {x2.dtype}")
        if bias.dim() != 1 or bias.shape[0] != n:
            raise invalid(op, f"bias: shape {tuple(bias.shape)} is not [{n}]")
        if n > 1 and bias.stride(0) != 1:
            raise invalid(op, f"bias: stride {bias.stride(0)} is not 1")
        bias_key = bias.dtype
    problem = {"m": int(m), "n": int(n), "k": int(k), "dtype": dt, "out_dtype": dt, "layout": la + lb,
               "lda": lda, "ldb": ldw, "bias": bias is not None, "act": act}
    key = ("linear", x2.device, int(m), int(n), int(k), x2.dtype, la, lda, lw, ldw, weight.device, bias_key,
           bias.device if bias is not None else None, act)
    return Plan(key, problem, (int(m), int(n)), (int(n), 1), x2.dtype)


def _round_up4(v: int) -> int:
    return (v + 3) // 4 * 4


def scale_mode(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor) -> str:
    """The problem's scale mode from the scales' shapes (include/gemmtune/problem.hpp), as
    torch._scaled_mm takes them:
      tensorwise: one value each ([] or [1]);
      rowwise:    scale_a [m, 1], scale_b [1, n];
      block:      scale_a [m, kb] stored M-major (strides (1, m): torch's BlockWise1x128),
                  scale_b one per 128x128 block of W = b^T, [nb, kb] row-major with a row stride
                  of round_up(kb, 4) (BlockWise128x128), or its transpose [kb, nb]
                  (kb = ceil(k / 128), nb = ceil(n / 128)).
    This is the one place that reads the scales' layout; the run passes both pointers as they are."""
    m, k = a.shape
    n = b.shape[1]
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        return "tensorwise"
    if tuple(scale_a.shape) == (m, 1) and tuple(scale_b.shape) == (1, n):
        return "rowwise"
    kb, nb = (k + 127) // 128, (n + 127) // 128
    if tuple(scale_a.shape) == (m, kb) and tuple(scale_b.shape) in ((nb, kb), (kb, nb)):
        op = "scaled_mm"
        if m > 1 and scale_a.stride(0) != 1 or kb > 1 and scale_a.stride(1) != m:
            raise invalid(op, f"scale_a: block scales [{m}, {kb}] must be stored M-major (strides (1, {m})), "
                              f"got strides {tuple(scale_a.stride())}")
        ld = _round_up4(kb)
        # [nb, kb] with strides (ld, 1), or its transpose [kb, nb] with strides (1, ld): the same memory.
        sb, st = tuple(scale_b.shape), tuple(scale_b.stride())
        w_major = sb == (nb, kb) and (kb == 1 or st[1] == 1) and (nb == 1 or st[0] == ld)
        transposed = sb == (kb, nb) and (kb == 1 or st[0] == 1) and (nb == 1 or st[1] == ld)
        if not (w_major or transposed):
            raise invalid(op, f"scale_b: block scales [{nb}, {kb}] (one per 128x128 block of b^T) must be row-major "
                              f"with a row stride of round_up({kb}, 4) = {ld} (or that tensor transposed), got shape "
                              f"{sb} strides {st}")
        return "block"
    raise invalid("scaled_mm", f"scale_a, scale_b: shapes {tuple(scale_a.shape)}, {tuple(scale_b.shape)} are neither "
                               f"tensorwise ([] or [1] each), rowwise ([{m}, 1] and [1, {n}]) nor block "
                               f"([{m}, {kb}] and [{nb}, {kb}])")


def plan_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                   out_dtype: Optional[torch.dtype], bias: Optional[torch.Tensor]) -> Plan:
    """D[m, n] = sa * sb * (a[m, k] @ b[k, n]) + bias[n] with fp8 a and b, as torch._scaled_mm."""
    op = "scaled_mm"
    _check_cuda(op, "a", a, None)
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        _check_cuda(op, name, t, a.device)
    dta = _dtype(op, "a", a, _FP8)
    dtb = _dtype(op, "b", b, _FP8)
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if out_dtype not in _HALF_OR_FP32:
        raise invalid(op, f"out_dtype: {out_dtype} is not one of bfloat16, float16, float32")
    la, lda, lb, ldb, m, n, k = _gemm_operands(op, a, b)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise invalid(op, f"{name}: dtype {s.dtype} is not float32")
    mode = scale_mode(a, b, scale_a, scale_b)
    if mode == "rowwise":
        if scale_a.stride(0) != 1 and m > 1:
            raise invalid(op, f"scale_a: [m, 1] scales must be contiguous (stride {tuple(scale_a.stride())})")
        if scale_b.stride(1) != 1 and n > 1:
            raise invalid(op, f"scale_b: [1, n] scales must be contiguous (stride {tuple(scale_b.stride())})")
    if bias is not None:
        _check_cuda(op, "bias", bias, a.device)
        if bias.dtype != out_dtype:
            raise invalid(op, f"bias: dtype {bias.dtype} differs from out_dtype {out_dtype}")
        if bias.dim() != 1 or bias.shape[0] != n or (n > 1 and bias.stride(0) != 1):
            raise invalid(op, f"bias: must be a contiguous [{n}] tensor, got shape {tuple(bias.shape)}")
    problem = {"m": int(m), "n": int(n), "k": int(k), "dtype": dta, "b_dtype": dtb, "out_dtype": _DTYPES[out_dtype],
               "layout": la + lb, "lda": lda, "ldb": ldb, "scale": mode, "bias": bias is not None}
    key = ("scaled_mm", a.device, int(m), int(n), int(k), a.dtype, b.dtype, out_dtype, la, lda, lb, ldb, mode,
           bias is not None)
    return Plan(key, problem, (int(m), int(n)), (int(n), 1), out_dtype)


def plan_softmax(x: torch.Tensor, dim: int, scale: float) -> Plan:
    """y = softmax(scale * x) over the last dimension; y has x's shape and, for a 2-D x with
    padded rows, x's row stride (the padding is neither read nor written)."""
    op = "softmax"
    _check_cuda(op, "x", x, None)
    dt = _dtype(op, "x", x, _HALF_OR_FP32)
    if x.dim() < 1:
        raise invalid(op, "x: must have at least 1 dimension")
    if dim not in (-1, x.dim() - 1):
        raise invalid(op, f"dim: {dim} is not the last dimension (-1 or {x.dim() - 1}); gemmtune's softmax "
                          f"runs over the last dimension")
    if not isinstance(scale, (int, float)) or scale != scale or scale in (float("inf"), float("-inf")):
        raise invalid(op, f"scale: {scale!r} is not a finite number")
    cols = int(x.shape[-1])
    rows = 1
    for s in x.shape[:-1]:
        rows *= int(s)
    if rows < 1 or cols < 1:
        raise invalid(op, f"x: empty tensor of shape {tuple(x.shape)}")
    if x.stride(-1) != 1 and cols > 1:
        raise invalid(op, f"x: inner stride {x.stride(-1)} is not 1")
    if x.dim() == 2 and rows > 1:
        ld = int(x.stride(0))
        if ld < cols:
            raise invalid(op, f"x: row stride {ld} is shorter than a row ({cols})")
    else:
        # Leading dimensions must flatten to evenly spaced rows: packed.
        if not x.is_contiguous() and rows > 1:
            raise invalid(op, f"x: strides {tuple(x.stride())} do not flatten to evenly spaced rows; pass .contiguous()")
        ld = cols
    problem = {"rows": rows, "cols": cols, "ld": ld, "dtype": dt, "out_dtype": dt, "scale": float(scale)}
    key = ("softmax", x.device, rows, cols, ld, x.dtype, float(scale))
    if x.dim() == 2:
        out_stride = (ld, 1)
    else:
        out_stride, acc = [], 1
        for size in reversed(x.shape):
            out_stride.insert(0, acc)
            acc *= max(int(size), 1)
        out_stride = tuple(out_stride)
    return Plan(key, problem, tuple(int(s) for s in x.shape), out_stride, x.dtype)
