"""Host cost of gemmtune.torch's call paths, without a GPU: CPU tensors, the kernel faked (the C
call is a ctypes call of libc's labs with gt_kernel_run_abd's six arguments, so its conversion
cost is real). Interleaved rounds, the median per call in us. What it answers:

  - the eager hot path (gt.mm's own implementation) and its pieces (key, output, C call);
  - the registration of the op that torch.compile's code calls: a `torch.library.Library` CUDA/CPU
    kernel (gemmtune's), the same behind a Python autograd kernel (`torch.library.register_autograd`),
    and a `torch.library.custom_op` (the s8 registration), each calling the same implementation.

    PYTHONPATH=python .venv/bin/python bench/torch_host.py [--n 20000] [--rounds 9]

On a loaded 2-core build machine only the ratios mean anything; scripts/gpu/torch_check.py times
the real paths on the H200.
"""

import argparse
import contextlib
import ctypes
import statistics
import time

import torch

import gemmtune.torch as gt
from gemmtune.torch import _ops, _plan as P


class _FakeKernel:
    _h = ctypes.c_void_p(0)  # labs(NULL) = 0: "GT_OK"

    def describe(self):
        return {"backend": "fake", "id": "f", "name": "f"}


def _fake_engine():
    """Fakes the engine and the C calls; returns a fake of gt_kernel_run_ex's arity."""
    labs = ctypes.PyDLL(None).labs  # any C function: the extra arguments are ignored (SysV x86-64)
    labs.argtypes, labs.restype = [ctypes.c_void_p] * 6, ctypes.c_int
    labs10 = ctypes.PyDLL(None).labs  # gt_kernel_run_ex's arity, for comparison
    labs10.argtypes, labs10.restype = [ctypes.c_void_p] * 9 + [ctypes.c_int], ctypes.c_int
    _ops._State.run = object()   # "bound"
    _ops._State.run_abd = labs
    _ops._raw_stream = lambda device: 0x20000
    _ops._select = lambda op, plan, device: _FakeKernel()
    P._check_cuda = lambda op, name, t, device: None
    torch.cuda.current_device = lambda: 0
    torch.cuda.device = lambda d: contextlib.nullcontext()
    return labs10


def variants(dispatch_key: str = "CPU"):
    """gemmtune::mm registered two other ways, each calling gemmtune's own implementation:
    (the Library, keep it alive; a Library kernel behind register_autograd's Python autograd
    kernel; a torch.library.custom_op). scripts/gpu/torch_check.py times them on the H200."""
    lib = torch.library.Library("gtbench", "DEF")
    lib.define("mm_autograd(Tensor a, Tensor b) -> Tensor")
    lib.impl("mm_autograd", _ops._mm_impl, dispatch_key)
    torch.library.register_fake("gtbench::mm_autograd", _ops._mm_fake, lib=lib)

    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.t(), a.t() @ grad

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    torch.library.register_autograd("gtbench::mm_autograd", backward, setup_context=setup, lib=lib)

    @torch.library.custom_op("gtbench::mm_custom", mutates_args=())
    def mm_custom(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ops._mm_impl(a, b)

    mm_custom.register_fake(_ops._mm_fake)
    mm_custom.register_autograd(backward, setup_context=setup)
    return lib, torch.ops.gtbench.mm_autograd.default, torch.ops.gtbench.mm_custom.default


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    ex = _fake_engine()
    keep, mm_autograd, mm_custom = variants()
    bf16 = torch.bfloat16
    a = torch.randn(16, 512, dtype=bf16)
    w = torch.randn(512, 512, dtype=bf16)
    b = w.t()
    dev = a.device
    abd = _ops._State.run_abd
    cases = {
        "eager hot path (_mm_impl)": lambda: _ops._mm_impl(a, b),
        "  _plain(a, b) (CPU tensors: stops at is_cuda)": lambda: _ops._plain(a, b),
        "  key tuple": lambda: (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype,
                                b.get_device()),
        "  torch.empty(shape, dtype=, device=)": lambda: torch.empty((16, 512), dtype=bf16, device=dev),
        "  a.new_empty(shape)": lambda: a.new_empty((16, 512)),
        "  ctypes call, 6 arguments (gt_kernel_run_abd)": lambda: abd(None, 0x30000, 0x40000, 0x50000, None, 0x20000),
        "  ctypes call, 10 arguments (gt_kernel_run_ex)": lambda: ex(None, 0x30000, 0x40000, None, 0x50000, None, None,
                                                                    None, 0x20000, 0),
        "op: Library CPU kernel (gemmtune's)": lambda: _ops._mm_op(a, b),
        "op: Library + register_autograd": lambda: mm_autograd(a, b),
        "op: torch.library.custom_op (s8)": lambda: mm_custom(a, b),
    }
    for fn in cases.values():
        fn()
    res = {k: [] for k in cases}
    for _ in range(args.rounds):
        for k, fn in cases.items():
            t = time.perf_counter_ns()
            for _ in range(args.n):
                fn()
            res[k].append((time.perf_counter_ns() - t) / args.n / 1000)
    base = statistics.median(res["eager hot path (_mm_impl)"])
    print(f"{'path':45s} {'us/call':>8s} {'x hot path':>10s}")
    for k, v in res.items():
        m = statistics.median(v)
        print(f"{k:45s} {m:8.3f} {m / base:10.2f}")
    del keep


if __name__ == "__main__":
    main()
