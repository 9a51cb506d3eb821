"""gemmtune's engines as the benches make them: their options, which reach the library through
the Python bindings (python/gemmtune -> gt_engine_create's options JSON), never through the
environment; and the softmax calls of the C API, which the bindings do not cover."""

from __future__ import annotations

import ctypes
import json
import os
import sys

from . import REPO


def compile_options(artifacts=None):
    """The "compile" object of the benches' engine options: the Python compile workers run this
    interpreter (the GPU machine's, with its triton) on this checkout's python/ (the path built into
    the library is the build machine's); artifacts: the artifact store (None: the library's default)."""
    opts = {} if artifacts is None else {"artifacts": str(artifacts)}
    return {**opts, "python": sys.executable, "python_dir": str(REPO / "python")}


def bindings(lib=""):
    """The gemmtune Python bindings of this checkout. lib: libgemmtune_c.so or its folder; the
    bindings find it through $GEMMTUNE_LIB (set here, also for the processes the bench starts),
    default this checkout's build/."""
    if lib:
        os.environ["GEMMTUNE_LIB"] = lib
    elif "GEMMTUNE_LIB" not in os.environ:
        os.environ["GEMMTUNE_LIB"] = str(REPO / "build")
    if str(REPO / "python") not in sys.path:
        sys.path.insert(0, str(REPO / "python"))
    import gemmtune
    return gemmtune


class SoftmaxEngine:
    """An engine of the bindings (options as gemmtune.Engine's) with gt_softmax_select / run /
    destroy on its handle. Kernels are the C API's handles (ctypes.c_void_p)."""

    def __init__(self, gemmtune, **options):
        from gemmtune import _capi
        self._capi = _capi
        self.engine = gemmtune.Engine(**options)
        L = self.lib = _capi.lib()
        vp, pvp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        L.gt_softmax_select.argtypes = [vp, ctypes.c_char_p, ctypes.c_int, pvp, pvp]
        L.gt_softmax_run.argtypes = [vp, vp, vp, vp]
        L.gt_softmax_destroy.argtypes = [vp]

    def info(self):
        return self.engine.info()

    def softmax_select(self, problem):
        """(kernel, report): the C API's softmax report (results[] with tbps per candidate)."""
        k, rep = ctypes.c_void_p(), ctypes.c_void_p()
        # the bindings' engine handle (_h): the softmax calls take it as the GEMM calls do
        self._capi.check(self.lib.gt_softmax_select(self.engine._h, json.dumps(problem).encode(), 0,
                                                    ctypes.byref(k), ctypes.byref(rep)))
        return k, json.loads(self._capi.take_string(rep))

    def softmax_run(self, kernel, x_ptr, y_ptr, stream):
        st = self.lib.gt_softmax_run(kernel, ctypes.c_void_p(x_ptr), ctypes.c_void_p(y_ptr), ctypes.c_void_p(stream))
        if st:
            self._capi.check(st)

    def softmax_destroy(self, kernel):
        self.lib.gt_softmax_destroy(kernel)

    def close(self):
        self.engine.close()
