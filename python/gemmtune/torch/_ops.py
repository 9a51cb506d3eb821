"""The torch ops: torch.library custom ops with fake implementations, and the eager hot path.

Hot path (eager, plain CUDA tensors, no dispatch or function mode, nothing needing grad): a key
of the arguments' shapes, strides, dtypes and devices -> a dict lookup -> torch.empty for the
output -> one C call (gt_kernel_run_ex, through ctypes.PyDLL: the GIL stays held, so one kernel
never runs on two threads at once, as the C API asks) on torch's current stream. Everything
else (torch.compile, fake and meta tensors, modes, autograd) goes through torch.ops.gemmtune.*,
whose implementation is the same function.

A key seen for the first time is planned (_plan.py: every check, errors naming the argument)
and its kernel selected: from the process's kernels, from optimize()'s buckets (loaded, never
tuned), or from the engine (the tuning cache, else tuned now). Never while the stream is being
captured into a CUDA graph: a first call under capture is an error (tune or warm up first).
"""

import ctypes
import threading
from typing import Optional

import torch
from torch import Tensor

from .. import Engine, _capi
from .._capi import GT_ERR_INVALID, GT_ERR_RUNTIME, GemmtuneError
from . import _plan as P

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter  # a plain tensor to the dispatcher (no __torch_function__ of its own)


class _Entry:
    """A selected kernel for one argument key: the C handle and what the hot path needs."""

    __slots__ = ("kernel", "handle", "plan", "device", "backend", "name", "copy_rows", "out_shape")

    def __init__(self, kernel, plan: P.Plan, device: int, copy_rows: bool = False, out_shape=None):
        self.kernel = kernel          # gemmtune.Kernel / SoftmaxKernel (owns the handle)
        self.handle = kernel._h       # ctypes.c_void_p
        self.plan = plan
        self.device = device
        info = kernel.describe()
        self.backend, self.name = info["backend"], info["name"]
        self.copy_rows = copy_rows    # linear: x's rows must be gathered by a copy (not a view)
        self.out_shape = plan.out_shape if out_shape is None else out_shape


class _State:
    lock = threading.RLock()
    options: dict = {}                 # gemmtune.Engine keyword arguments (configure())
    engines: dict = {}                 # device index -> Engine
    entries: dict = {}                 # argument key -> _Entry
    # optimize()'s m buckets: family (a GEMM plan key without m) -> [(m, backend, id)], sorted by m.
    buckets: dict = {}
    run = None                         # gt_kernel_run_ex, GIL held
    softmax_run = None                 # gt_softmax_run, GIL held


def configure(**engine_options) -> None:
    """Engine options for the ops (gemmtune.Engine's keyword arguments: backends, tune, compile,
    max_configs, cache_path, log_level, ...). Drops the engines and kernels made so far."""
    with _State.lock:
        _State.options = dict(engine_options)
        _State.engines.clear()
        _State.entries.clear()
        _State.buckets.clear()
    from . import _grouped
    _grouped.clear()


def engine(device: int = 0) -> Engine:
    """The engine the ops use on a device (created on first use with configure()'s options)."""
    with _State.lock:
        e = _State.engines.get(device)
        if e is None:
            e = Engine(device=device, **_State.options)
            _State.engines[device] = e
        return e


def clear_kernels() -> None:
    """Forgets the kernels selected so far (the tuning cache keeps its entries)."""
    with _State.lock:
        _State.entries.clear()
    from . import _grouped
    _grouped.clear()


def _bind() -> None:
    lib = ctypes.PyDLL(_capi.lib()._name)  # the same loaded library; calls keep the GIL
    vp = ctypes.c_void_p
    f = lib.gt_kernel_run_ex
    f.argtypes, f.restype = [vp] * 9 + [ctypes.c_int], ctypes.c_int
    s = lib.gt_softmax_run
    s.argtypes, s.restype = [vp] * 4, ctypes.c_int
    _State.run, _State.softmax_run = f, s


def _stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)


def _raise_status(op: str, status: int) -> None:
    raise GemmtuneError(status, f"gemmtune.torch.{op}: " + _capi.last_error())


def _misaligned(op: str, **ptrs) -> None:
    for name, p in ptrs.items():
        if p and p & 15:
            raise P.invalid(op, f"{name}: data pointer {p:#x} is not 16-byte aligned")


# ---- selection ---------------------------------------------------------------------------------

def _family(key: tuple) -> tuple:
    return key[:2] + key[3:]  # a GEMM plan key without m (key[2])


def _bucket_order(m: int, ms: list) -> list:
    """Buckets to try for m: the smallest >= m first (a kernel tuned for at least as many
    rows), then the larger ones ascending, then the smaller ones descending."""
    above = [b for b in ms if b >= m]
    below = [b for b in ms if b < m]
    return above + below[::-1]


def _select(op: str, plan: P.Plan, device: int):
    if torch.cuda.is_current_stream_capturing():
        raise GemmtuneError(GT_ERR_INVALID, f"gemmtune.torch.{op}: {plan.problem} has no kernel in this process yet and the "
                                            "stream is being captured into a CUDA graph (tuning or loading is not "
                                            "capturable): run the op once before capture, or optimize() the model")
    e = engine(device)
    if op == "softmax":
        kernel, _ = e.select_softmax(plan.problem)
        return kernel
    buckets = _State.buckets.get(_family(plan.key))
    if not buckets:
        kernel, _ = e.select(plan.problem)
        return kernel
    # optimize() tuned this layer for m buckets: load a bucket's winner for this m, never tune.
    by_m = {m: (backend, cid) for m, backend, cid in buckets}
    errors = []
    for m in _bucket_order(plan.problem["m"], sorted(by_m)):
        backend, cid = by_m[m]
        try:
            return e.load(plan.problem, backend, cid)
        except GemmtuneError as err:
            errors.append(f"m={m} {backend}/{cid}: {err.message}")
    raise GemmtuneError(GT_ERR_RUNTIME, f"gemmtune.torch.{op}: no tuned bucket's kernel runs m={plan.problem['m']} "
                                        f"({'; '.join(errors)})")


def _entry(op: str, key: tuple, plan: P.Plan, t: Tensor, copy_rows: bool = False, out_shape=None) -> _Entry:
    with _State.lock:
        ent = _State.entries.get(key)
        if ent is None:
            if _State.run is None:
                _bind()
            device = t.device.index if t.device.index is not None else torch.cuda.current_device()
            with torch.cuda.device(device):
                ent = _Entry(_select(op, plan, device), plan, device, copy_rows, out_shape)
            _State.entries[key] = ent
        return ent


def _guard(ent: _Entry):
    return torch.cuda.device(ent.device) if torch.cuda.current_device() != ent.device else None


# ---- implementations (real tensors) -----------------------------------------------------------

def _mm_impl(a: Tensor, b: Tensor) -> Tensor:
    key = ("mm", a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device())
    ent = _State.entries.get(key)
    pa, pb = a.data_ptr(), b.data_ptr()
    if (pa | pb) & 15:
        _misaligned("mm", a=pa, b=pb)
    if ent is None:
        ent = _entry("mm", key, P.plan_mm(a, b), a)
    plan = ent.plan
    d = torch.empty(plan.out_shape, dtype=plan.out_dtype, device=a.device)
    st = _State.run(ent.handle, pa, pb, None, d.data_ptr(), None, None, None, _stream(ent.device), 0)
    if st:
        _raise_status("mm", st)
    return d


def _linear_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> Tensor:
    bkey = None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device())
    key = ("linear", x.shape, x.stride(), x.dtype, x.get_device(), weight.shape, weight.stride(), weight.dtype,
           weight.get_device(), bkey, activation)
    ent = _State.entries.get(key)
    if ent is None:
        x2, copy_rows = _rows(x)
        if (x2.data_ptr() | weight.data_ptr() | (bias.data_ptr() if bias is not None else 0)) & 15:
            _misaligned("linear", x=x2.data_ptr(), weight=weight.data_ptr(), bias=bias.data_ptr() if bias is not None else 0)
        plan = P.plan_linear(x2, weight, bias, activation)
        ent = _entry("linear", key, plan, x, copy_rows, (*x.shape[:-1], plan.out_shape[1]))
    if ent.copy_rows:
        x = x.reshape(-1, x.shape[-1])  # leading dimensions that do not flatten to a view
    pa, pb = x.data_ptr(), weight.data_ptr()
    pbias = bias.data_ptr() if bias is not None else None
    if (pa | pb | (pbias or 0)) & 15:
        _misaligned("linear", x=pa, weight=pb, bias=pbias)
    d = torch.empty(ent.out_shape, dtype=ent.plan.out_dtype, device=x.device)
    st = _State.run(ent.handle, pa, pb, None, d.data_ptr(), pbias, None, None, _stream(ent.device), 0)
    if st:
        _raise_status("linear", st)
    return d


def _rows(x: Tensor) -> tuple:
    """(x as [rows, k], whether that takes a copy): nn.Linear's flattening of the leading
    dimensions. A view keeps x's data pointer, so the hot path then needs no reshape at all."""
    if x.dim() == 2:
        return x, False
    if x.dim() < 1:
        raise P.invalid("linear", "x: must have at least 1 dimension")
    try:
        return x.view(-1, x.shape[-1]), False
    except RuntimeError:
        return x.reshape(-1, x.shape[-1]), True


def _scaled_mm_impl(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: Optional[torch.dtype],
                    bias: Optional[Tensor]) -> Tensor:
    bkey = None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device())
    key = ("scaled_mm", a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(),
           scale_a.shape, scale_a.stride(), scale_a.dtype, scale_a.get_device(), scale_b.shape, scale_b.stride(),
           scale_b.dtype, scale_b.get_device(), out_dtype, bkey)
    ent = _State.entries.get(key)
    pa, pb = a.data_ptr(), b.data_ptr()
    psa, psb = scale_a.data_ptr(), scale_b.data_ptr()
    pbias = bias.data_ptr() if bias is not None else None
    if (pa | pb | (pbias or 0)) & 15:
        _misaligned("scaled_mm", a=pa, b=pb, bias=pbias)
    if (psa | psb) & 3:
        raise P.invalid("scaled_mm", "scale_a, scale_b: data pointers must be 4-byte aligned")
    if ent is None:
        ent = _entry("scaled_mm", key, P.plan_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias), a)
    plan = ent.plan
    d = torch.empty(plan.out_shape, dtype=plan.out_dtype, device=a.device)
    pd = d.data_ptr()
    # Whatever the scale mode (tensorwise, rowwise, block), both scale pointers go to the
    # kernel as they are (_plan.scale_mode checked their layout).
    st = _State.run(ent.handle, pa, pb, None, pd, pbias, psa, psb, _stream(ent.device), 0)
    if st:
        _raise_status("scaled_mm", st)
    return d


def _softmax_impl(x: Tensor, dim: int, scale: float) -> Tensor:
    key = ("softmax", x.shape, x.stride(), x.dtype, x.get_device(), dim, scale)
    ent = _State.entries.get(key)
    px = x.data_ptr()
    if px & 15:
        _misaligned("softmax", x=px)
    if ent is None:
        ent = _entry("softmax", key, P.plan_softmax(x, dim, scale), x)
    plan = ent.plan
    y = torch.empty_strided(plan.out_shape, plan.out_stride, dtype=plan.out_dtype, device=x.device)
    st = _State.softmax_run(ent.handle, px, y.data_ptr(), _stream(ent.device))
    if st:
        _raise_status("softmax", st)
    return y


# ---- custom ops and their fake implementations --------------------------------------------------

@torch.library.custom_op("gemmtune::mm", mutates_args=())
def _mm_op(a: Tensor, b: Tensor) -> Tensor:
    return _mm_impl(a, b)


@_mm_op.register_fake
def _mm_fake(a, b):
    p = P.plan_mm(a, b)
    return a.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


@torch.library.custom_op("gemmtune::linear", mutates_args=())
def _linear_op(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> Tensor:
    return _linear_impl(x, weight, bias, activation)


@_linear_op.register_fake
def _linear_fake(x, weight, bias, activation):
    k = x.shape[-1] if x.dim() else 0
    p = P.plan_linear(P.flatten_rows("linear", x, k), weight, bias, activation)
    return x.new_empty((*x.shape[:-1], p.out_shape[1]), dtype=p.out_dtype)


@torch.library.custom_op("gemmtune::scaled_mm", mutates_args=())
def _scaled_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: Optional[torch.dtype],
                  bias: Optional[Tensor]) -> Tensor:
    return _scaled_mm_impl(a, b, scale_a, scale_b, out_dtype, bias)


@_scaled_mm_op.register_fake
def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias):
    p = P.plan_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)
    return a.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


@torch.library.custom_op("gemmtune::softmax", mutates_args=())
def _softmax_op(x: Tensor, dim: int, scale: float) -> Tensor:
    return _softmax_impl(x, dim, scale)


@_softmax_op.register_fake
def _softmax_fake(x, dim, scale):
    p = P.plan_softmax(x, dim, scale)
    return x.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


# Backward of mm, linear without an activation and softmax, in plain torch ops (gemmtune's
# kernels are for the forward pass; training through them is allowed, not tuned).
def _mm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.t().to(grad.dtype), a.t().to(grad.dtype) @ grad


_mm_op.register_autograd(_mm_backward, setup_context=_mm_setup)


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation = inputs
    ctx.activation = activation
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, weight)


def _linear_backward(ctx, grad):
    if P.ACTIVATIONS.get(ctx.activation, "none") != "none":
        raise P.invalid("linear", f"activation: {ctx.activation!r} has no backward in gemmtune; use it under "
                                  "torch.no_grad() / torch.inference_mode()")
    x, weight = ctx.saved_tensors
    g2 = grad.reshape(-1, grad.shape[-1])
    gx = (g2 @ weight).view(x.shape)
    gw = g2.t() @ x.reshape(-1, x.shape[-1])
    gb = g2.sum(0) if ctx.has_bias else None
    return gx, gw, gb, None


_linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


def _softmax_setup(ctx, inputs, output):
    ctx.scale = inputs[2]
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):
    # d/dx softmax(s * x) = s * y * (g - sum(g * y)), in fp32.
    (y,) = ctx.saved_tensors
    yf, g = y.float(), grad.float()
    gx = ctx.scale * yf * (g - (g * yf).sum(-1, keepdim=True))
    return gx.to(y.dtype), None, None


_softmax_op.register_autograd(_softmax_backward, setup_context=_softmax_setup)


# ---- public functions: the eager fast path, else the op -------------------------------------------

_is_compiling = torch.compiler.is_compiling
_dispatch_stack = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
_function_mode = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: False)
_grad_enabled = torch.is_grad_enabled


def _plain(*ts) -> bool:
    """True when the call can skip the dispatcher: eager, plain CUDA tensors, no mode active,
    and no autograd to record."""
    if _is_compiling() or _dispatch_stack() or _function_mode():
        return False
    grad = _grad_enabled()
    for t in ts:
        if t is None:
            continue
        if (type(t) is not _Tensor and type(t) is not _Parameter) or not t.is_cuda or (grad and t.requires_grad):
            return False
    return True


def mm(a: Tensor, b: Tensor) -> Tensor:
    """a[m, k] @ b[k, n] (bf16, fp16 or fp32; each row- or column-major, any leading dimension),
    row-major output of a's dtype."""
    if _plain(a, b):
        return _mm_impl(a, b)
    return _mm_op(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None) -> Tensor:
    """activation(x @ weight.T + bias) as torch.nn.functional.linear, x [..., k] (leading dims
    flattened), weight [n, k]; activation None, 'relu', 'gelu_tanh' (also 'gelu': the tanh
    approximation) or 'silu', fused into the GEMM's epilogue."""
    if _plain(x, weight, bias):
        return _linear_impl(x, weight, bias, activation)
    return _linear_op(x, weight, bias, activation)


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: Optional[torch.dtype] = torch.bfloat16,
              bias: Optional[Tensor] = None) -> Tensor:
    """scale_a * scale_b * (a @ b) + bias as torch._scaled_mm: a [m, k] and b [k, n] fp8 (e4m3 /
    e5m2, not both e5m2), float32 scales tensorwise ([] or [1] each), rowwise (scale_a [m, 1],
    scale_b [1, n]) or block (scale_a [m, k/128] M-major, scale_b one per 128x128 block of b^T:
    _plan.scale_mode); output out_dtype (bfloat16, float16 or float32)."""
    if _plain(a, b, scale_a, scale_b, bias):
        return _scaled_mm_impl(a, b, scale_a, scale_b, out_dtype, bias)
    return _scaled_mm_op(a, b, scale_a, scale_b, out_dtype, bias)


def softmax(x: Tensor, dim: int = -1, scale: float = 1.0) -> Tensor:
    """softmax(scale * x) over the last dimension (bf16, fp16, fp32), as torch.softmax."""
    if _plain(x):
        return _softmax_impl(x, dim, float(scale))
    return _softmax_op(x, dim, float(scale))
