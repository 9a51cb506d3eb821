"""The torch ops: torch.library ops with fake implementations, and the eager hot path.

Registration (the cheapest torch offers for a Python kernel, measured in
tests/python/bench_torch_host.py): `torch.library.Library("gemmtune", "DEF")` defines
gemmtune::mm / linear / scaled_mm / softmax, each with one implementation registered for the CUDA
(and CPU, to refuse CPU tensors by name) dispatch key and a fake one (register_fake) for meta /
fake tensors, so torch.compile(fullgraph=True) traces them and Inductor's compiled code calls the
CUDA implementation straight from the dispatcher. No autograd kernel: the public functions wrap
the op in a torch.autograd.Function when an input needs grad, so a call that does not pays
nothing for autograd (a torch.library.custom_op, or register_autograd, runs Python autograd and
dispatch layers on every call).

Hot path (eager, plain CUDA tensors, no dispatch or function mode, nothing needing grad): the
public function calls the implementation itself: a key of the arguments' shapes, strides, dtypes
and devices -> a dict lookup (one dict per op) -> for mm / linear where the C++ op is loaded, its
call with the entry's kernel index (below); else torch.empty for the output -> one C call
(gt_kernel_run_abd / gt_softmax_run, six or four arguments, through ctypes.PyDLL: the GIL stays
held, so one kernel never runs on two threads at once, as the C API asks) on torch's current
stream. Everything else (torch.compile, fake and meta tensors, modes, autograd) goes through
torch.ops.gemmtune.*, whose CUDA implementation is the same function.

A key seen for the first time is planned (_plan.py: every check, errors naming the argument)
and its kernel selected: from the process's kernels, from optimize()'s buckets (loaded, never
tuned), or from the engine (the tuning cache, else tuned now). Never while the stream is being
captured into a CUDA graph: a first call under capture is an error (tune or warm up first).

Deferring to torch (_defers): mm and linear (no activation) call torch's op (torch.mm /
F.linear) instead of the kernel selected for a key when that kernel is the cuBLASLt baseline that
reproduces torch's own call (gt_kernel_describe's "torch_baseline", docs/cublaslt.md), or a
cuBLASLt algo that beat that baseline in the tune by less than the defer margin (configure();
DEFER_MARGIN): the same or an equally fast kernel, without our launch path. The decision is a flag
of the key's entry; the public functions test it first, so a deferred call costs a key and a dict
lookup over torch's op. Under torch.compile with static shapes, linear() and mm() make it while
dynamo traces (_traced_route, a constant to dynamo, on the same key): a deferred call is traced as
torch's op, which Inductor sees and fuses around; with symbolic shapes the op stays ours (its
implementation defers at run time).

The C++ op (_Cpp, src/torch/ops.cpp): under torch.compile with static shapes, a call that does
not defer (and records no autograd) is traced as gemmtune::run_abd(a, b, bias, kernel), `kernel`
a constant index of a kernel handle bound to the C++ op at trace time; compiled code then
launches the kernel through the dispatcher alone, without this module's Python. Where the C++
op is not built for this torch, the Python op as before.
"""

import ctypes
import os
import threading
from typing import Optional

import torch
from torch import Tensor
from torch.fx.experimental import symbolic_shapes as _symbolic_shapes

from .. import Engine, _capi
from .._capi import GT_ERR_INVALID, GT_ERR_RUNTIME, GemmtuneError
from . import _plan as P

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter  # a plain tensor to the dispatcher (no __torch_function__ of its own)
_torch_mm = torch.mm
_torch_linear = torch.nn.functional.linear
_statically_known_true = _symbolic_shapes.statically_known_true
_raw_stream = torch._C._cuda_getCurrentRawStream if hasattr(torch._C, "_cuda_getCurrentRawStream") else None


class _Entry:
    """A selected kernel for one argument key: the C handle and what the hot path needs."""

    __slots__ = ("kernel", "handle", "plan", "device", "backend", "name", "copy_rows", "out_shape", "out_dtype",
                 "defer", "cpp")

    def __init__(self, op: str, kernel, plan: P.Plan, device: int, copy_rows: bool = False, out_shape=None):
        self.kernel = kernel          # gemmtune.Kernel / SoftmaxKernel (owns the handle)
        self.handle = kernel._h       # ctypes.c_void_p
        self.plan = plan
        self.device = device          # the operands' device index: its current stream
        info = kernel.describe()
        self.backend, self.name = info["backend"], info["name"]
        self.copy_rows = copy_rows    # linear: x's rows must be gathered by a copy (not a view)
        self.out_shape = plan.out_shape if out_shape is None else out_shape
        self.out_dtype = plan.out_dtype
        self.defer = _defers(op, plan.problem.get("act", "none"), info, _State.defer_margin)  # run torch's op
        self.cpp = _ROUTE_OP          # mm / linear: the C++ op's kernel index once bound (_entry), run in eager


# mm / linear defer to torch's op where a cuBLASLt pick beat torch's own kernel by less than this
# in the tune. 5%: the same problem's pick-to-baseline ratio moved by that much between tunes on
# the H200 (llama3-8b gate / up at 2048 tokens: 1.021 and 1.049 in the two s12 runs; the fused
# gate+up 1.040 with 5.8% p20-p80 noise in 2026-11-30-h200-cublaslt-tournament.md, median noise
# 3.8% over its 190 problems), and in the block the 2% did not show (s12-defer: x0.987 eager,
# x0.992 graph-replayed at 2048 tokens with gate / up on it). docs/python.md.
DEFER_MARGIN = 0.05


def _defers(op: str, act: str, info: dict, margin: float) -> bool:
    """Whether calls of op with the epilogue act ("none", "relu", ...) run torch's op instead of
    the selected kernel (info: its describe()). mm and linear without an activation only. Yes
    when the kernel is torch's own call (the cuBLASLt torch baseline), or a cuBLASLt algo whose
    median in the tune was within `margin` of that baseline's (pick * (1 + margin) >= baseline):
    within the race's noise, while torch's op costs less host time and Inductor understands it.
    A kernel of another backend keeps any win: gemmtune launches it with one driver call, less
    host time than torch's cuBLAS call (decode kernels at 1 token: ~14 us a layer on the H200)."""
    if op not in ("mm", "linear") or act != "none":
        return False
    if info.get("torch_baseline"):
        return True
    pick, base = info.get("median_us"), info.get("torch_baseline_us")
    return info.get("backend") == "cublaslt" and bool(pick and base) and pick * (1 + margin) >= base


# Decode-sized problems (at most LAUNCH_BOUND_M rows, torch's kernel at most LAUNCH_BOUND_US):
# a model's step is host-bound there, so a candidate of gemmtune's own backends (native, Triton,
# CUTLASS, CuTe DSL) within the defer margin of torch's kernel runs instead of torch's op
# (_cheaper_launch). Measured on the H200 (s16): one nn.Linear call 16.7-32.4 us of host time
# against 11.0-18.4 for gemmtune's launch of the same layer at 1 and 16 tokens, while a 5% margin
# on a 50 us kernel is 2.5 us of GPU time. Not at 2048 tokens: there the block is GPU-bound
# (in the s16 run where a Triton pick within 5% of torch's kernel took k / v, the compiled
# block measured x0.969 against x0.987-1.006 in the other runs).
LAUNCH_BOUND_M = 64
LAUNCH_BOUND_US = 50.0


def _cheaper_launch(m: int, results: list, margin: float) -> Optional[dict]:
    """A tune's candidate results for a problem of m rows (the report's "results": backend, id,
    name, status, median_us, winner) -> the result of the candidate to run instead of the winner,
    or None. Only where the winner would run torch's op (torch's own kernel, or a cuBLASLt algo
    within `margin` of it: _defers) on a decode-sized problem (LAUNCH_BOUND_M, LAUNCH_BOUND_US):
    then the fastest correct candidate of another backend whose median is within `margin` of
    torch's kernel (one driver call instead of torch's cuBLAS call: less host time a call, for at
    most `margin` more GPU time)."""
    if m > LAUNCH_BOUND_M:
        return None
    ok = [r for r in results if r.get("status") == "ok" and r.get("median_us")]
    win = next((r for r in ok if r.get("winner")), None)
    base = next((r for r in ok if r.get("backend") == "cublaslt" and str(r.get("id", "")).startswith("torch-")), None)
    if win is None or base is None or base["median_us"] > LAUNCH_BOUND_US:
        return None
    picked = {"backend": win.get("backend"), "torch_baseline": win is base, "median_us": win["median_us"],
              "torch_baseline_us": base["median_us"]}
    if not _defers("linear", "none", picked, margin):
        return None  # the winner is gemmtune's launch already
    ours = [r for r in ok if r.get("backend") != "cublaslt" and r["median_us"] <= base["median_us"] * (1 + margin)]
    return min(ours, key=lambda r: r["median_us"]) if ours else None


class _State:
    lock = threading.RLock()
    options: dict = {}                 # gemmtune.Engine keyword arguments (configure())
    engines: dict = {}                 # device index -> Engine
    # One dict per op: argument key (shapes, strides, dtypes, devices, ...) -> _Entry.
    entries: dict = {"mm": {}, "linear": {}, "scaled_mm": {}, "softmax": {}}
    # optimize()'s m buckets: family (a GEMM plan key without m) -> [(m, backend, id)], sorted by m.
    buckets: dict = {}
    defer_margin: float = DEFER_MARGIN  # configure()'s
    run_abd = None                     # gt_kernel_run_abd (mm, linear), GIL held
    run = None                         # gt_kernel_run_ex (scaled_mm), GIL held
    softmax_run = None                 # gt_softmax_run, GIL held


_MM, _LINEAR, _SCALED, _SOFTMAX = (_State.entries[k] for k in ("mm", "linear", "scaled_mm", "softmax"))


def _clear_entries() -> None:
    for d in _State.entries.values():
        d.clear()


def configure(defer_margin: float = DEFER_MARGIN, **engine_options) -> None:
    """Engine options for the ops (gemmtune.Engine's keyword arguments: backends, tune, compile,
    max_configs, cache_path, log_level, ...) and defer_margin: mm and linear run torch's own op
    where the tuned pick is a cuBLASLt algo that beat torch's kernel by less than this fraction in
    the tune (default DEFER_MARGIN, 0.05; 0: only where the pick is torch's kernel). Drops the
    engines and kernels made so far."""
    if isinstance(defer_margin, bool) or not isinstance(defer_margin, (int, float)) or not 0 <= defer_margin < 1:
        raise P.invalid("configure", f"defer_margin: {defer_margin!r} is not a fraction in [0, 1)")
    with _State.lock:
        _State.defer_margin = float(defer_margin)
        _State.options = dict(engine_options)
        _State.engines.clear()
        _clear_entries()
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
        _clear_entries()
    from . import _grouped
    _grouped.clear()


def _bind() -> None:
    lib = ctypes.PyDLL(_capi.lib()._name)  # the same loaded library; calls keep the GIL
    vp = ctypes.c_void_p
    abd = lib.gt_kernel_run_abd
    abd.argtypes, abd.restype = [vp] * 6, ctypes.c_int
    f = lib.gt_kernel_run_ex
    f.argtypes, f.restype = [vp] * 9 + [ctypes.c_int], ctypes.c_int
    s = lib.gt_softmax_run
    s.argtypes, s.restype = [vp] * 4, ctypes.c_int
    _State.run_abd, _State.run, _State.softmax_run = abd, f, s


def _stream(device: int) -> int:
    return _raw_stream(device)


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
        kernel, report = e.select(plan.problem)
        if op in ("mm", "linear") and plan.problem.get("act", "none") == "none":
            alt = _cheaper_launch(plan.problem["m"], (report or {}).get("results") or [], _State.defer_margin)
            if alt is not None:
                try:
                    return e.load(plan.problem, alt["backend"], alt["id"])
                except GemmtuneError:
                    pass  # the winner, as selected
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


def _entry(op: str, key: tuple, plan: P.Plan, device: Optional[int], copy_rows: bool = False,
           out_shape=None) -> _Entry:
    """The key's entry, its kernel selected now if it has none (device: the operands' CUDA
    device index, None for the current device)."""
    with _State.lock:
        entries = _State.entries[op]
        ent = entries.get(key)
        if ent is None:
            if _State.run is None:
                _bind()
            if device is None or device < 0:
                device = torch.cuda.current_device()
            with torch.cuda.device(device):
                ent = _Entry(op, _select(op, plan, device), plan, device, copy_rows, out_shape)
            if op in ("mm", "linear") and not ent.defer and not copy_rows:
                # Eager calls then go through the C++ op (not capturing: _select refused that).
                ent.cpp = _Cpp.route(op, key, ent)
            entries[key] = ent
        return ent


# ---- keys: one builder per op, for the eager hot path, the ops' kernels and dynamo's trace ----------
# A key holds, per tensor, (shape, stride, dtype, device) at _T[i] (what a plan depends on); a
# hit needs no check but the data pointers' alignment (they change per call); a miss plans, which
# checks everything and names the argument. Under dynamo with static shapes the same builder
# evaluates to constants, which _traced_route receives.

def _mm_key(a: Tensor, b: Tensor) -> tuple:
    return (a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device)


def _linear_key(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> tuple:
    if bias is None:
        return (x.shape, x.stride(), x.dtype, x.device, weight.shape, weight.stride(), weight.dtype, weight.device,
                activation)
    return (x.shape, x.stride(), x.dtype, x.device, weight.shape, weight.stride(), weight.dtype, weight.device,
            activation, bias.shape, bias.stride(), bias.dtype, bias.device)


_T = (0, 4, 9)       # where a key's tensors start: a / x, b / weight, bias (linear's activation at 8)
_ACTIVATION = 8


def _meta(key: tuple, i: int) -> Tensor:
    """A meta tensor with the key's i-th tensor's shape, strides and dtype."""
    at = _T[i]
    return torch.empty_strided(key[at], key[at + 1], dtype=key[at + 2], device="meta")


def _linear_entry(key: tuple, x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str],
                  device: int) -> "_Entry":
    x2, copy_rows = _rows(x)
    plan = P.plan_linear(x2, weight, bias, activation)
    return _entry("linear", key, plan, device, copy_rows, (*x.shape[:-1], plan.out_shape[1]))


# What dynamo traces for a call of mm() / linear() with static shapes (_traced_route):
_ROUTE_TORCH = -1  # torch's op (the key's entry defers): Inductor sees aten ops and fuses around them
_ROUTE_OP = -2     # the Python op gemmtune::mm / linear
# >= 0: gemmtune::run_abd(a, b, bias, route), the C++ op on the kernel bound at that index


@torch.compiler.assume_constant_result
def _traced_route(op: str, key: tuple, grad: bool) -> int:
    """While dynamo traces mm() / linear() on static shapes: what the call traces as (_ROUTE_*,
    or a kernel bound to the C++ op). key: _mm_key / _linear_key of the traced tensors,
    constants; grad: whether an input needs grad (then never the C++ op, which has no autograd).
    Selects the key's kernel now, as the first run would (never while a CUDA graph is being
    captured: then the Python op); not a CUDA device: the Python op. An argument the plan
    refuses, or a failed selection: the Python op (which then reports it, as before)."""
    dev = key[3]  # the first operand's device
    if dev.type != "cuda":
        return _ROUTE_OP
    dev = dev.index if dev.index is not None else torch.cuda.current_device()
    ent = _State.entries[op].get(key)
    try:
        if ent is None:
            if torch.cuda.is_current_stream_capturing():
                return _ROUTE_OP
            if op == "mm":
                ent = _entry("mm", key, P.plan_mm(_meta(key, 0), _meta(key, 1)), dev)
            else:
                bias = _meta(key, 2) if len(key) > _T[2] else None
                ent = _linear_entry(key, _meta(key, 0), _meta(key, 1), bias, key[_ACTIVATION], dev)
    except GemmtuneError:
        return _ROUTE_OP
    if ent.defer:
        return _ROUTE_TORCH
    return _ROUTE_OP if grad else ent.cpp  # bound when the entry was made (_entry)


# ---- the C++ op (src/torch/ops.cpp): compiled code launches a kernel without Python -------------

class _Cpp:
    """libgemmtune_torch_<torch major.minor>.so, beside libgemmtune_c.so where the build found a
    torch (CMakeLists.txt): gemmtune::_bind_kernel and gemmtune::run_abd. Loaded on first need;
    without it (not built, another torch), compiled code calls the Python op."""

    loaded: Optional[bool] = None  # None: not tried yet
    reason = ""                    # why not loaded
    bound: dict = {}               # (op, key, backend, candidate id) -> run_abd's kernel index
    out: list = []                 # kernel index -> (output shape, dtype): the fake implementation's
    run = None                     # torch.ops.gemmtune.run_abd.default, once loaded

    @classmethod
    def path(cls) -> str:
        v = torch.__version__.split(".")
        return os.path.join(os.path.dirname(_capi.lib()._name), f"libgemmtune_torch_{v[0]}.{v[1]}.so")

    @classmethod
    def load(cls) -> bool:
        if cls.loaded is None:
            with _State.lock:
                if cls.loaded is None:
                    path = cls.path()
                    try:
                        if not os.path.exists(path):
                            raise OSError(f"{path} does not exist (the build found no torch {torch.__version__})")
                        torch.ops.load_library(path)  # a second load of the same file changes nothing
                        if cls.run is None:
                            torch.library.register_fake("gemmtune::run_abd", _run_abd_fake, lib=_LIB)
                        cls.run = torch.ops.gemmtune.run_abd.default
                        cls.loaded = True
                    except (OSError, RuntimeError) as e:
                        cls.loaded, cls.reason = False, str(e)
        return cls.loaded

    @classmethod
    def route(cls, op: str, key: tuple, ent: "_Entry") -> int:
        """run_abd's kernel index for the key and the entry's kernel (bound now if new: a kernel
        handle of its own, loaded like the entry's, owned by the C++ op for the process's life;
        a later pick for the key, after configure(), binds its own), or _ROUTE_OP where the op
        is not loaded or the load failed. Called where the entry is made (never under CUDA-graph
        capture: _select refuses that)."""
        with _State.lock:
            info = ent.kernel.describe()
            bkey = (op, key, info["backend"], info["id"])
            kid = cls.bound.get(bkey)
            if kid is not None:
                return kid
            if not cls.load():
                return _ROUTE_OP
            try:
                with torch.cuda.device(ent.device):
                    kernel = engine(ent.device).load(ent.plan.problem, info["backend"], info["id"])
            except (GemmtuneError, RuntimeError):
                return _ROUTE_OP
            bias = _meta(key, 2) if op == "linear" and len(key) > _T[2] else None
            act = key[_ACTIVATION] if op == "linear" else None
            kid = torch.ops.gemmtune._bind_kernel(kernel._h.value, op, act, ent.device, _meta(key, 0), _meta(key, 1),
                                                  bias, list(ent.out_shape))
            kernel._h = None  # the C++ op's now
            cls.bound[bkey] = kid
            cls.out.append((tuple(ent.out_shape), ent.out_dtype))
            assert len(cls.out) == kid + 1
            return kid


def _run_abd_fake(a, b, bias, kernel):
    if not 0 <= kernel < len(_Cpp.out):
        raise P.invalid("run_abd", f"kernel: {kernel} is not a bound kernel ({len(_Cpp.out)} bound)")
    shape, dtype = _Cpp.out[kernel]
    return a.new_empty(shape, dtype=dtype)


def _known(v) -> bool:
    # Whether v is a known integer: a symbolic size's parity is not statically known (dynamo
    # reports SymInts as ints to type() and isinstance(), and calls no is_concrete_int).
    return _statically_known_true(v % 2 == 0) or _statically_known_true(v % 2 == 1)


def _static(*ts) -> bool:
    """While dynamo traces: every size and stride of the tensors (None skipped) is static."""
    return all(_known(v) for t in ts if t is not None for v in (*t.shape, *t.stride()))


# ---- implementations (real tensors): the ops' CUDA kernels and the eager hot path -------------------
# _mm_impl / _linear_impl are the ops' kernels (key, lookup, run); the public functions look the
# entry up themselves (a deferred call ends there) and pass it to _mm_run / _linear_run.

def _mm_impl(a: Tensor, b: Tensor) -> Tensor:
    key = _mm_key(a, b)
    return _mm_run(_MM.get(key), key, a, b)


def _mm_run(ent: Optional[_Entry], key: tuple, a: Tensor, b: Tensor) -> Tensor:
    pa, pb = a.data_ptr(), b.data_ptr()
    if (pa | pb) & 15:
        _misaligned("mm", a=pa, b=pb)
    if ent is None:
        ent = _entry("mm", key, P.plan_mm(a, b), a.get_device())
    if ent.defer:
        return _torch_mm(a, b)
    d = a.new_empty(ent.out_shape)  # a's dtype and device (cheaper than torch.empty(..., dtype=, device=))
    st = _State.run_abd(ent.handle, pa, pb, d.data_ptr(), None, _raw_stream(ent.device))
    if st:
        _raise_status("mm", st)
    return d


def _linear_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> Tensor:
    key = _linear_key(x, weight, bias, activation)
    return _linear_run(_LINEAR.get(key), key, x, weight, bias, activation)


def _linear_run(ent: Optional[_Entry], key: tuple, x: Tensor, weight: Tensor, bias: Optional[Tensor],
                activation: Optional[str]) -> Tensor:
    if ent is None:
        x2 = _rows(x)[0]
        if (x2.data_ptr() | weight.data_ptr() | (bias.data_ptr() if bias is not None else 0)) & 15:
            _misaligned("linear", x=x2.data_ptr(), weight=weight.data_ptr(), bias=bias.data_ptr() if bias is not None else 0)
        ent = _linear_entry(key, x, weight, bias, activation, x.get_device())
    if ent.defer:
        return _torch_linear(x, weight, bias)
    if ent.copy_rows:
        x = x.reshape(-1, x.shape[-1])  # leading dimensions that do not flatten to a view
    pa, pb = x.data_ptr(), weight.data_ptr()
    pbias = bias.data_ptr() if bias is not None else 0
    if (pa | pb | pbias) & 15:
        _misaligned("linear", x=pa, weight=pb, bias=pbias)
    d = x.new_empty(ent.out_shape)  # x's dtype and device
    st = _State.run_abd(ent.handle, pa, pb, d.data_ptr(), pbias or None, _raw_stream(ent.device))
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
    key = (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(),
           scale_a.shape, scale_a.stride(), scale_a.dtype, scale_a.get_device(), scale_b.shape, scale_b.stride(),
           scale_b.dtype, scale_b.get_device(), out_dtype, bkey)
    ent = _SCALED.get(key)
    pa, pb = a.data_ptr(), b.data_ptr()
    psa, psb = scale_a.data_ptr(), scale_b.data_ptr()
    pbias = bias.data_ptr() if bias is not None else None
    if (pa | pb | (pbias or 0)) & 15:
        _misaligned("scaled_mm", a=pa, b=pb, bias=pbias)
    if (psa | psb) & 3:
        raise P.invalid("scaled_mm", "scale_a, scale_b: data pointers must be 4-byte aligned")
    if ent is None:
        ent = _entry("scaled_mm", key, P.plan_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias), a.get_device())
    d = a.new_empty(ent.out_shape, dtype=ent.out_dtype)
    # Whatever the scale mode (tensorwise, rowwise, block), both scale pointers go to the
    # kernel as they are (_plan.scale_mode checked their layout).
    st = _State.run(ent.handle, pa, pb, None, d.data_ptr(), pbias, psa, psb, _raw_stream(ent.device), 0)
    if st:
        _raise_status("scaled_mm", st)
    return d


def _softmax_impl(x: Tensor, dim: int, scale: float) -> Tensor:
    key = (x.shape, x.stride(), x.dtype, x.get_device(), dim, scale)
    ent = _SOFTMAX.get(key)
    px = x.data_ptr()
    if px & 15:
        _misaligned("softmax", x=px)
    if ent is None:
        ent = _entry("softmax", key, P.plan_softmax(x, dim, scale), x.get_device())
    plan = ent.plan
    y = x.new_empty_strided(plan.out_shape, plan.out_stride)  # x's dtype and device
    st = _State.softmax_run(ent.handle, px, y.data_ptr(), _raw_stream(ent.device))
    if st:
        _raise_status("softmax", st)
    return y


# ---- the ops: definitions, kernels, fake implementations -------------------------------------------

_LIB = torch.library.Library("gemmtune", "DEF")
# The schemas torch.library.custom_op inferred from these signatures before (names, types).
_SCHEMAS = {
    "mm": "mm(Tensor a, Tensor b) -> Tensor",
    "linear": "linear(Tensor x, Tensor weight, Tensor? bias, str? activation) -> Tensor",
    "scaled_mm": "scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, ScalarType? out_dtype, Tensor? bias) "
                 "-> Tensor",
    "softmax": "softmax(Tensor x, int dim, float scale) -> Tensor",
}


def _mm_fake(a, b):
    p = P.plan_mm(a, b)
    return a.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


def _linear_fake(x, weight, bias, activation):
    k = x.shape[-1] if x.dim() else 0
    p = P.plan_linear(P.flatten_rows("linear", x, k), weight, bias, activation)
    return x.new_empty((*x.shape[:-1], p.out_shape[1]), dtype=p.out_dtype)


def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias):
    p = P.plan_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)
    return a.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


def _softmax_fake(x, dim, scale):
    p = P.plan_softmax(x, dim, scale)
    return x.new_empty_strided(p.out_shape, p.out_stride, dtype=p.out_dtype)


for _name, _impl, _fake in (("mm", _mm_impl, _mm_fake), ("linear", _linear_impl, _linear_fake),
                            ("scaled_mm", _scaled_mm_impl, _scaled_mm_fake), ("softmax", _softmax_impl, _softmax_fake)):
    _LIB.define(_SCHEMAS[_name])
    _LIB.impl(_name, _impl, "CUDA")
    _LIB.impl(_name, _impl, "CPU")  # plans, so a CPU tensor is refused naming the argument
    torch.library.register_fake(f"gemmtune::{_name}", _fake, lib=_LIB)

_mm_op = torch.ops.gemmtune.mm.default
_linear_op = torch.ops.gemmtune.linear.default
_scaled_mm_op = torch.ops.gemmtune.scaled_mm.default
_softmax_op = torch.ops.gemmtune.softmax.default


# ---- autograd: torch.autograd.Functions around the ops, used only when an input needs grad -----------
# Backward of mm, linear without an activation and softmax, in plain torch ops (gemmtune's kernels
# are for the forward pass; training through them is allowed, not tuned). scaled_mm has none.

class _MmFn(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return _mm_impl(a, b) if _plain(a, b) else _mm_op(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.t().to(grad.dtype), a.t().to(grad.dtype) @ grad


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(x, weight, bias, activation):
        return _linear_impl(x, weight, bias, activation) if _plain(x, weight, bias) else _linear_op(x, weight, bias, activation)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias, activation = inputs
        ctx.activation = activation
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, weight)

    @staticmethod
    def backward(ctx, grad):
        if P.ACTIVATIONS.get(ctx.activation, "none") != "none":
            raise P.invalid("linear", f"activation: {ctx.activation!r} has no backward in gemmtune; use it under "
                                      "torch.no_grad() / torch.inference_mode()")
        x, weight = ctx.saved_tensors
        g2 = grad.reshape(-1, grad.shape[-1])
        gx = (g2 @ weight).view(x.shape)
        gw = g2.t() @ x.reshape(-1, x.shape[-1])
        gb = g2.sum(0) if ctx.has_bias else None
        return gx, gw, gb, None


class _SoftmaxFn(torch.autograd.Function):
    @staticmethod
    def forward(x, dim, scale):
        return _softmax_impl(x, dim, scale) if _plain(x) else _softmax_op(x, dim, scale)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.scale = inputs[2]
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        # d/dx softmax(s * x) = s * y * (g - sum(g * y)), in fp32.
        (y,) = ctx.saved_tensors
        yf, g = y.float(), grad.float()
        gx = ctx.scale * yf * (g - (g * yf).sum(-1, keepdim=True))
        return gx.to(y.dtype), None, None


# ---- public functions: the eager fast path, else the op -------------------------------------------

_compiling = torch.compiler.is_dynamo_compiling  # True while dynamo traces (other tracers: modes, subclasses)
_dispatch_stack = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
_function_mode = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: False)
_grad_enabled = torch._C.is_grad_enabled


def _plain(a, b=None, c=None) -> bool:
    """True when the call can skip the dispatcher: eager, plain CUDA tensors (a, and b, c
    unless None), no mode active, and no autograd to record."""
    return not _compiling() and _plain_tensors(a, b, c)


def _plain_tensors(a, b=None, c=None) -> bool:
    """_plain, dynamo known not to be tracing."""
    if _dispatch_stack() or _function_mode():
        return False
    grad = _grad_enabled()
    for t in (a, b, c):
        if t is None:
            continue
        if (type(t) is not _Tensor and type(t) is not _Parameter) or not t.is_cuda or (grad and t.requires_grad):
            return False
    return True


def _needs_grad(*ts) -> bool:
    return _grad_enabled() and any(t is not None and t.requires_grad for t in ts)


# mm() and linear() look the key's entry up first: a deferred key calls torch's op at once, whatever
# the tensors (autograd, modes and subclasses are then torch's business, as without gemmtune).

def mm(a: Tensor, b: Tensor) -> Tensor:
    """a[m, k] @ b[k, n] (bf16, fp16 or fp32; each row- or column-major, any leading dimension),
    row-major output of a's dtype."""
    if not _compiling():
        key = _mm_key(a, b)
        ent = _MM.get(key)
        if ent is not None and ent.defer:
            return _torch_mm(a, b)
        if _plain_tensors(a, b):
            if ent is not None and ent.cpp >= 0:
                return _Cpp.run(a, b, None, ent.cpp)  # the C++ op (bound: loaded)
            return _mm_run(ent, key, a, b)
    elif _static(a, b):
        route = _traced_route("mm", _mm_key(a, b), _needs_grad(a, b))
        if route == _ROUTE_TORCH:
            return torch.mm(a, b)  # the pick is torch's own kernel: Inductor sees aten.mm
        if route >= 0:
            return _Cpp.run(a, b, None, route)  # a route >= 0: loaded
    if _needs_grad(a, b):
        return _MmFn.apply(a, b)
    return _mm_op(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None) -> Tensor:
    """activation(x @ weight.T + bias) as torch.nn.functional.linear, x [..., k] (leading dims
    flattened), weight [n, k]; activation None, 'relu', 'gelu_tanh' (also 'gelu': the tanh
    approximation) or 'silu', fused into the GEMM's epilogue."""
    if not _compiling():
        key = _linear_key(x, weight, bias, activation)
        ent = _LINEAR.get(key)
        if ent is not None and ent.defer:
            return _torch_linear(x, weight, bias)
        if _plain_tensors(x, weight, bias):
            if ent is not None and ent.cpp >= 0:
                return _Cpp.run(x, weight, bias, ent.cpp)
            return _linear_run(ent, key, x, weight, bias, activation)
    elif _static(x, weight, bias):
        route = _traced_route("linear", _linear_key(x, weight, bias, activation), _needs_grad(x, weight, bias))
        if route == _ROUTE_TORCH:
            return torch.nn.functional.linear(x, weight, bias)  # the pick is torch's own kernel: Inductor sees aten ops
        if route >= 0:
            return _Cpp.run(x, weight, bias, route)
    if _needs_grad(x, weight, bias):
        return _LinearFn.apply(x, weight, bias, activation)
    return _linear_op(x, weight, bias, activation)


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: Optional[torch.dtype] = torch.bfloat16,
              bias: Optional[Tensor] = None) -> Tensor:
    """scale_a * scale_b * (a @ b) + bias as torch._scaled_mm: a [m, k] and b [k, n] fp8 (e4m3 /
    e5m2, not both e5m2), float32 scales tensorwise ([] or [1] each), rowwise (scale_a [m, 1],
    scale_b [1, n]) or block (scale_a [m, k/128] M-major, scale_b one per 128x128 block of b^T:
    _plan.scale_mode); output out_dtype (bfloat16, float16 or float32). Inference only (no backward)."""
    if _plain(a, b) and _plain(scale_a, scale_b, bias):
        return _scaled_mm_impl(a, b, scale_a, scale_b, out_dtype, bias)
    return _scaled_mm_op(a, b, scale_a, scale_b, out_dtype, bias)


def softmax(x: Tensor, dim: int = -1, scale: float = 1.0) -> Tensor:
    """softmax(scale * x) over the last dimension (bf16, fp16, fp32), as torch.softmax."""
    scale = float(scale)
    if _plain(x):
        return _softmax_impl(x, dim, scale)
    if _needs_grad(x):
        return _SoftmaxFn.apply(x, dim, scale)
    return _softmax_op(x, dim, scale)
