"""gemmtune from Python, through the C API (ctypes). No dependency on torch.

    import torch, gemmtune
    engine = gemmtune.Engine(cache_path="/tmp/tune.sqlite")
    problem = {"m": 16, "n": 10240, "k": 8192, "dtype": "bf16"}   # D = A @ W^T (nn.Linear)
    kernel, report = engine.select(problem)
    a = torch.randn(16, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(10240, 8192, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(16, 10240, device="cuda", dtype=torch.bfloat16)
    kernel.run(a.data_ptr(), w.data_ptr(), 0, d.data_ptr(),
               stream_ptr=torch.cuda.current_stream().cuda_stream)

Pointers are plain integers (device addresses); 0 or None for an operand the problem does
not use. Problem dicts use the C API's fields: m, n, k (required), dtype, b_dtype, out_dtype,
layout ("rc" = A row-major, B col-major), d_layout, lda, ldb, ldc, ldd, alpha, beta, bias,
act, scale, tf32.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any, Iterable, Optional

from . import _capi
from ._capi import GemmtuneError, GT_ERR_ARGUMENT, GT_ERR_INVALID, GT_ERR_NO_DEVICE, GT_ERR_RUNTIME, GT_ERR_INTERNAL

__all__ = [
    "Engine",
    "Kernel",
    "SoftmaxKernel",
    "GroupedKernel",
    "GemmtuneError",
    "version",
    "library_path",
    "GT_ERR_ARGUMENT",
    "GT_ERR_INVALID",
    "GT_ERR_NO_DEVICE",
    "GT_ERR_RUNTIME",
    "GT_ERR_INTERNAL",
]


def _installed_compile_defaults() -> dict:
    """Compile options of an installed copy (a wheel: libgemmtune_c.so inside this package):
    the workers run this interpreter on this installation's kernel sources, so nothing points
    back into a source tree. $GEMMTUNE_PYTHON / $GEMMTUNE_PYTHON_DIR / $GEMMTUNE_CUTLASS_DIR
    still win. Empty in a source checkout (the library's own defaults apply there)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.exists(os.path.join(here, _capi.LIB_NAME)):
        return {}
    out: dict = {}
    if not os.environ.get("GEMMTUNE_PYTHON_DIR"):
        out["python_dir"] = os.path.dirname(here)
    if not os.environ.get("GEMMTUNE_PYTHON"):
        out["python"] = sys.executable
    if not os.environ.get("GEMMTUNE_CUTLASS_DIR"):
        import importlib.util
        spec = importlib.util.find_spec("cutlass_library")
        if spec and spec.submodule_search_locations:
            src = os.path.join(list(spec.submodule_search_locations)[0], "source")
            if os.path.exists(os.path.join(src, "include", "cutlass", "version.h")):
                out["cutlass_dir"] = src
    return out


def version() -> str:
    """The engine's version (of the loaded libgemmtune_c.so)."""
    return _capi.lib().gt_version().decode()


def library_path() -> str:
    """Path of the loaded libgemmtune_c.so."""
    return _capi.lib()._name


def _problem_text(problem: Any) -> bytes:
    if isinstance(problem, (bytes, str)):
        return problem.encode() if isinstance(problem, str) else problem
    return json.dumps(problem).encode()


def _ptr(x: Any) -> Optional[int]:
    if x is None or x == 0:
        return None
    return int(x)


class _Owned:
    """Owns one C API handle (self._h), released by close(), `with`, or garbage collection
    through the C function named by _destroy (e.g. "gt_kernel_destroy")."""

    _destroy = ""

    def close(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h and h.value:
            _capi.check(getattr(_capi.lib(), self._destroy)(h))

    def __del__(self):
        # At interpreter shutdown the CUDA runtime may already be gone: leak rather than crash.
        if getattr(self, "_h", None) and not sys.is_finalizing():
            try:
                self.close()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Kernel(_Owned):
    """A selected, loaded kernel. run() enqueues one GEMM; describe() says what it is."""

    _destroy = "gt_kernel_destroy"

    def __init__(self, handle: ctypes.c_void_p, problem: Any):
        self._h = handle
        self.problem = problem
        self._info: Optional[dict] = None
        # Bound once: run() is called in timing loops.
        self._run = _capi.lib().gt_kernel_run_ex

    def describe(self) -> dict:
        """{"backend", "id", "name", "can_overlap", "problem", "problem_json", "cache_key", "torch_baseline",
        "median_us", "torch_baseline_us"}: can_overlap, run(overlap_previous=True) takes effect (a
        programmatic dependent launch; else the kernel launches as usual); torch_baseline, the cuBLASLt baseline that reproduces torch's own call
        (docs/cublaslt.md); median_us and torch_baseline_us, the kernel's and that baseline's medians
        in the last tune of the problem, from the tuning cache (None where it has none)."""
        if self._info is None:
            out = ctypes.c_void_p()
            _capi.check(_capi.lib().gt_kernel_describe(self._h, ctypes.byref(out)))
            self._info = json.loads(_capi.take_string(out))
        return self._info

    @property
    def backend(self) -> str:
        return self.describe()["backend"]

    @property
    def id(self) -> str:
        return self.describe()["id"]

    @property
    def name(self) -> str:
        return self.describe()["name"]

    def run(self, a_ptr: int, b_ptr: int, c_ptr: int = 0, d_ptr: int = 0, bias_ptr: int = 0,
            scale_a_ptr: int = 0, scale_b_ptr: int = 0, stream_ptr: int = 0,
            overlap_previous: bool = False) -> None:
        """Enqueues D = ... on the stream (a cudaStream_t as an int, 0 = legacy default stream).
        Pointers are device addresses, e.g. tensor.data_ptr(); B is W[n, k] row-major for the
        default layout "rc". overlap_previous: a programmatic dependent launch where the kernel
        supports it (it may read B before the previous kernel on the stream has finished: that
        kernel must not write B). Raises GemmtuneError on a launch or argument error."""
        st = self._run(self._h, _ptr(a_ptr), _ptr(b_ptr), _ptr(c_ptr), _ptr(d_ptr), _ptr(bias_ptr),
                       _ptr(scale_a_ptr), _ptr(scale_b_ptr), _ptr(stream_ptr), 1 if overlap_previous else 0)
        if st:
            _capi.check(st)

    def __repr__(self) -> str:
        try:
            d = self.describe()
            return f"<gemmtune.Kernel {d['backend']} {d['name']} for {d['problem']}>"
        except Exception:
            return "<gemmtune.Kernel>"


class SoftmaxKernel(_Owned):
    """A selected softmax kernel: run(x_ptr, y_ptr, stream_ptr) enqueues y = softmax(scale * x)."""

    _destroy = "gt_softmax_destroy"

    def __init__(self, handle: ctypes.c_void_p, problem: Any):
        self._h = handle
        self.problem = problem
        self._info: Optional[dict] = None

    def describe(self) -> dict:
        """{"backend", "id", "name", "problem", "cache_key"}."""
        if self._info is None:
            out = ctypes.c_void_p()
            _capi.check(_capi.lib().gt_softmax_describe(self._h, ctypes.byref(out)))
            self._info = json.loads(_capi.take_string(out))
        return self._info

    def run(self, x_ptr: int, y_ptr: int, stream_ptr: int = 0) -> None:
        st = _capi.lib().gt_softmax_run(self._h, _ptr(x_ptr), _ptr(y_ptr), _ptr(stream_ptr))
        if st:
            _capi.check(st)


class GroupedKernel(_Owned):
    """A selected grouped GEMM kernel (mixture-of-experts layers; docs/grouped.md):
    run(a, b, d, rows, capacity, bias, scale_a, scale_b, stream) enqueues it. rows: int32 [G] on
    the GPU (cumulative ends for the contiguous layout, counts for the masked one)."""

    _destroy = "gt_grouped_destroy"

    def __init__(self, handle: ctypes.c_void_p, problem: Any):
        self._h = handle
        self.problem = problem
        self._info: Optional[dict] = None

    def describe(self) -> dict:
        """{"backend", "id", "name", "problem", "cache_key"}."""
        if self._info is None:
            out = ctypes.c_void_p()
            _capi.check(_capi.lib().gt_grouped_describe(self._h, ctypes.byref(out)))
            self._info = json.loads(_capi.take_string(out))
        return self._info

    def run(self, a_ptr: int, b_ptr: int, d_ptr: int, rows_ptr: int, capacity: int, bias_ptr: int = 0,
            scale_a_ptr: int = 0, scale_b_ptr: int = 0, stream_ptr: int = 0) -> None:
        st = _capi.lib().gt_grouped_run(self._h, _ptr(a_ptr), _ptr(b_ptr), _ptr(d_ptr), _ptr(rows_ptr), int(capacity),
                                        _ptr(bias_ptr), _ptr(scale_a_ptr), _ptr(scale_b_ptr), _ptr(stream_ptr))
        if st:
            _capi.check(st)


class Engine(_Owned):
    """Selects, tunes and remembers kernels (one gemmtune::Engine).

    cache_path: the tuning-cache file (None: $GEMMTUNE_CACHE or ~/.cache/gemmtune/tuning.sqlite);
    use_cache=False never reads or writes it; backends: names to enable (None: all);
    tune: dict of TuneOptions (warmup_ms, min_rounds, max_rounds, round_budget_ms, prune_ratio,
    tie_tolerance, tie_rounds, prefer_margin, duel_rounds, duel_window, duels, seed); log_to_stderr prints progress lines;
    compile: dict of CompileOptions (artifacts, workers, nvcc_jobs, timeout_s, load_only, python, python_dir);
    max_configs: candidates per backend and problem at most; compile_budget: how many of them a tune
    may compile per backend, the cost model's best (None: $GEMMTUNE_COMPILE_BUDGET or 8; -1: all);
    log_level: quiet, warning, info or debug;
    remote_cache: a tuning cache shared by machines, "redis://host:port/db", in front of the local one
    (docs/remote-cache.md), remote_timeout_ms the bound on each of its operations.
    isolation: dict of IsolationOptions (mode: "process" (default: candidates run in a tuning helper
    process) or "in_process", helper, candidate_timeout_s; docs/isolation.md).
    Options left out take the library's defaults ($GEMMTUNE_* where set; include/gemmtune/engine_options.hpp).
    """

    _destroy = "gt_engine_destroy"

    def __init__(self, cache_path: Optional[str] = None, backends: Optional[Iterable[str]] = None,
                 device: int = 0, use_cache: bool = True, log_to_stderr: bool = False,
                 tune: Optional[dict] = None, compile: Optional[dict] = None, max_configs: Optional[int] = None,
                 compile_budget: Optional[int] = None,
                 log_level: Optional[str] = None, remote_cache: Optional[str] = None,
                 remote_timeout_ms: Optional[float] = None,
                 isolation: Optional[dict] = None):
        opts: dict = {"device": int(device), "use_cache": bool(use_cache), "log_to_stderr": bool(log_to_stderr)}
        if cache_path is not None:
            opts["cache_path"] = str(cache_path)
        if backends is not None:
            opts["backends"] = [backends] if isinstance(backends, str) else list(backends)
        if tune:
            opts["tune"] = dict(tune)
        compile_opts = {**_installed_compile_defaults(), **(compile or {})}
        if compile_opts:
            opts["compile"] = compile_opts
        if max_configs is not None:
            opts["max_configs"] = int(max_configs)
        if compile_budget is not None:
            opts["compile_budget"] = int(compile_budget)
        if log_level is not None:
            opts["log_level"] = str(log_level)
        if remote_cache is not None:
            opts["remote_cache"] = str(remote_cache)
        if remote_timeout_ms is not None:
            opts["remote_timeout_ms"] = float(remote_timeout_ms)
        if isolation:
            opts["isolation"] = dict(isolation)
        self.options = opts
        self._h = ctypes.c_void_p()
        _capi.check(_capi.lib().gt_engine_create(json.dumps(opts).encode(), ctypes.byref(self._h)))

    def select(self, problem: Any, force: bool = False) -> tuple[Kernel, dict]:
        """(kernel, report): from the cache, or tuned now (force=True: always tuned). The report
        mirrors TuneReport: problem, key, from_cache, seconds, spread, notes, results[...]."""
        k = ctypes.c_void_p()
        rep = ctypes.c_void_p()
        st = _capi.lib().gt_select(self._h, _problem_text(problem), 1 if force else 0, ctypes.byref(k), ctypes.byref(rep))
        _capi.check(st)
        return Kernel(k, problem), json.loads(_capi.take_string(rep))

    def load(self, problem: Any, backend: str, id: str) -> Kernel:
        """A specific candidate (backend and id from a report), bypassing the cache."""
        k = ctypes.c_void_p()
        _capi.check(_capi.lib().gt_load(self._h, _problem_text(problem), backend.encode(), id.encode(), ctypes.byref(k)))
        return Kernel(k, problem)

    def select_softmax(self, problem: Any, force: bool = False) -> tuple["SoftmaxKernel", dict]:
        """(kernel, report) for a softmax problem {"rows", "cols", "ld", "dtype", "out_dtype",
        "scale"}: from the cache, or tuned now."""
        k = ctypes.c_void_p()
        rep = ctypes.c_void_p()
        _capi.check(_capi.lib().gt_softmax_select(self._h, _problem_text(problem), 1 if force else 0,
                                                  ctypes.byref(k), ctypes.byref(rep)))
        return SoftmaxKernel(k, problem), json.loads(_capi.take_string(rep))

    def select_grouped(self, problem: Any, force: bool = False) -> tuple["GroupedKernel", dict]:
        """(kernel, report) for a grouped GEMM problem {"groups", "n", "k", "rows_per_group",
        "layout", "dtype", "out_dtype", "scale", "act", "bias", "alpha", "skew"}: from the cache
        (keyed by rows_per_group's power-of-two bucket), or tuned now."""
        k = ctypes.c_void_p()
        rep = ctypes.c_void_p()
        _capi.check(_capi.lib().gt_grouped_select(self._h, _problem_text(problem), 1 if force else 0,
                                                  ctypes.byref(k), ctypes.byref(rep)))
        return GroupedKernel(k, problem), json.loads(_capi.take_string(rep))

    def info(self) -> dict:
        """{"version", "device": {...}, "environment", "backends": [...], "cache_path"}."""
        out = ctypes.c_void_p()
        _capi.check(_capi.lib().gt_engine_info(self._h, ctypes.byref(out)))
        return json.loads(_capi.take_string(out))

    def close(self) -> None:
        """Releases the engine (kernels it made stay usable until closed)."""
        super().close()
