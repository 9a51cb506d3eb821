"""ctypes bindings of libgemmtune_c.so (include/gemmtune/gemmtune_c.h).

The library is found, in order, at $GEMMTUNE_LIB (the file, or a folder holding it), next to
this package, in <repository>/build/ (python/gemmtune/../../build), then by the dynamic
linker's search (LD_LIBRARY_PATH, ldconfig).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

LIB_NAME = "libgemmtune_c.so"

GT_OK = 0
GT_ERR_ARGUMENT = 1
GT_ERR_INVALID = 2
GT_ERR_NO_DEVICE = 3
GT_ERR_RUNTIME = 4
GT_ERR_INTERNAL = 5

STATUS_NAMES = {
    GT_OK: "GT_OK",
    GT_ERR_ARGUMENT: "GT_ERR_ARGUMENT",
    GT_ERR_INVALID: "GT_ERR_INVALID",
    GT_ERR_NO_DEVICE: "GT_ERR_NO_DEVICE",
    GT_ERR_RUNTIME: "GT_ERR_RUNTIME",
    GT_ERR_INTERNAL: "GT_ERR_INTERNAL",
}


class GemmtuneError(RuntimeError):
    """A failed C API call: `status` is the GT_ERR_* code, the message gt_last_error()."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{message} ({STATUS_NAMES.get(status, status)})")
        self.status = status
        self.message = message


def candidate_paths() -> list[str]:
    here = Path(__file__).resolve().parent
    out = []
    env = os.environ.get("GEMMTUNE_LIB")
    if env:
        p = Path(env)
        out.append(str(p / LIB_NAME) if p.is_dir() else str(p))
    out.append(str(here / LIB_NAME))
    out.append(str(here.parent.parent / "build" / LIB_NAME))
    out.append(LIB_NAME)  # the dynamic linker's own search
    return out


_lib = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    try:
        # Where the library links SQLite dynamically, Python's own sqlite3 module brings a
        # libsqlite3.so.0 into the process first (harmless otherwise).
        import sqlite3  # noqa: F401
    except ImportError:
        pass
    errors = []
    for path in candidate_paths():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: not found")
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _declare(handle)
        _lib = handle
        return handle
    raise OSError(
        "gemmtune: cannot load " + LIB_NAME + " (set GEMMTUNE_LIB to the file or its folder):\n  "
        + "\n  ".join(errors)
    )


def _declare(L: ctypes.CDLL) -> None:
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    pvp = ctypes.POINTER(ctypes.c_void_p)
    L.gt_last_error.argtypes, L.gt_last_error.restype = [], cp
    L.gt_version.argtypes, L.gt_version.restype = [], cp
    L.gt_free.argtypes, L.gt_free.restype = [vp], None
    L.gt_engine_create.argtypes, L.gt_engine_create.restype = [cp, pvp], i
    L.gt_engine_destroy.argtypes, L.gt_engine_destroy.restype = [vp], i
    L.gt_engine_info.argtypes, L.gt_engine_info.restype = [vp, pvp], i
    L.gt_select.argtypes, L.gt_select.restype = [vp, cp, i, pvp, pvp], i
    L.gt_load.argtypes, L.gt_load.restype = [vp, cp, cp, cp, pvp], i
    # a, b, c, d, bias, scale_a, scale_b, stream: plain addresses (ints) or None.
    L.gt_kernel_run.argtypes, L.gt_kernel_run.restype = [vp] * 9, i
    # ... and flags (GT_RUN_OVERLAP_PREVIOUS = 1)
    L.gt_kernel_run_ex.argtypes, L.gt_kernel_run_ex.restype = [vp] * 9 + [i], i
    L.gt_kernel_destroy.argtypes, L.gt_kernel_destroy.restype = [vp], i
    L.gt_kernel_describe.argtypes, L.gt_kernel_describe.restype = [vp, pvp], i
    L.gt_softmax_select.argtypes, L.gt_softmax_select.restype = [vp, cp, i, pvp, pvp], i
    # x, y, stream
    L.gt_softmax_run.argtypes, L.gt_softmax_run.restype = [vp] * 4, i
    L.gt_softmax_destroy.argtypes, L.gt_softmax_destroy.restype = [vp], i
    L.gt_softmax_describe.argtypes, L.gt_softmax_describe.restype = [vp, pvp], i
    L.gt_grouped_select.argtypes, L.gt_grouped_select.restype = [vp, cp, i, pvp, pvp], i
    # a, b, d, rows, capacity (int64), bias, scale_a, scale_b, stream
    L.gt_grouped_run.argtypes, L.gt_grouped_run.restype = [vp] * 5 + [ctypes.c_int64] + [vp] * 4, i
    L.gt_grouped_destroy.argtypes, L.gt_grouped_destroy.restype = [vp], i
    L.gt_grouped_describe.argtypes, L.gt_grouped_describe.restype = [vp, pvp], i


def last_error() -> str:
    return lib().gt_last_error().decode("utf-8", "replace")


def check(status: int) -> None:
    if status != GT_OK:
        raise GemmtuneError(status, last_error())


def take_string(ptr: ctypes.c_void_p) -> str:
    """The text of a char* the API returned, freed with gt_free."""
    if not ptr.value:
        return ""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        lib().gt_free(ptr)
