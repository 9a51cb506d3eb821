"""TorchInductor as a contender of the GEMM bench: torch.compile of the problem (max-autotune with
its default gemm backends, or restricted to its Triton backend) from a cold cache, its compile
time, and what the generated code runs (TorchInductor); MockInductor for --mock."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from . import warn
from .gpu import Rotation

_MM_EXTERNS = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_int_mm", "_scaled_mm_v2"}


def analyze_inductor_code(codes):
    """What Inductor's generated wrapper code runs: {kernels: Triton kernels it defines, extern:
    ATen/extern GEMMs it calls, kind: 'triton' (template kernels only), 'aten' (an extern GEMM only),
    'mixed', or 'unknown' (no code captured), config: the first template's tile and launch
    parameters as far as the source shows them}."""
    if not codes:
        return {"kernels": [], "extern": [], "kind": "unknown", "config": ""}
    text = "\n".join(codes)
    kernels = list(dict.fromkeys(re.findall(r"async_compile\.triton\(\s*['\"](\w+)['\"]", text)))
    extern = re.findall(r"extern_kernels\.(\w+)\(", text)
    extern += re.findall(r"(?:torch\.ops\.)?aten\.(\w+)\.(?:default|out)\(", text)
    extern = sorted({e for e in extern if e in _MM_EXTERNS})
    templates = [k for k in kernels if "_tem_" in k]
    if templates and not extern:
        kind = "triton"
    elif extern and not templates:
        kind = "aten"
    elif extern and templates:
        kind = "mixed"
    else:
        kind = "triton" if kernels else "unknown"
    cfg = []
    blocks = [re.search(rf"\b{nm}\s*:\s*tl\.constexpr\s*=\s*(\d+)", text) for nm in ("BLOCK_M", "BLOCK_N", "BLOCK_K")]
    if all(blocks):
        cfg.append("x".join(b.group(1) for b in blocks))
    for nm, short in (("num_warps", "w"), ("num_stages", "s")):
        mt = re.search(rf"\b{nm}\s*=\s*(\d+)", text)
        if mt:
            cfg.append(f"{short}{mt.group(1)}")
    for nm in ("GROUP_M", "NUM_SMS"):
        mt = re.search(rf"\b{nm}\s*:\s*tl\.constexpr\s*=\s*(\d+)", text)
        if mt:
            cfg.append(f"{nm}={mt.group(1)}")
    return {"kernels": kernels, "extern": extern, "kind": kind, "config": " ".join(cfg)}


def _write_code(info, codes, code_path):
    if code_path is None or not codes:
        return
    try:
        Path(code_path).parent.mkdir(parents=True, exist_ok=True)
        Path(code_path).write_text("\n\n# ---- next module ----\n\n".join(codes))
        info["code_file"] = str(Path(code_path).name)
    except OSError as e:
        info["code_file_error"] = str(e)


class TorchInductor:
    def __init__(self, gpu, mode):
        self.gpu, self.torch, self.mode = gpu, gpu.torch, mode
        self.init_s = None   # Inductor's one-time start-up, once measured
        self.n_fns = 0

    def init(self):
        """Inductor's one-time start-up (imports, compile worker pool), kept out of the per-problem
        compile times; its seconds in init_s."""
        if self.init_s is not None:
            return
        t = self.torch
        import torch._dynamo
        t0 = time.perf_counter()
        torch._dynamo.reset()
        a0 = t.randn(256, 256, device=self.gpu.dev, dtype=t.bfloat16)
        t.compile(lambda a, w: t.mm(a, w.t()), mode=self.mode, dynamic=False)(a0, a0)
        self.gpu.sync()
        self.init_s = time.perf_counter() - t0

    def reset(self):
        """Drops every compiled function (and CUDA graph pools) of earlier problems. Never between
        two compiles of one problem: a reset clears the caches of every compiled function, and the
        first would compile again when called."""
        import torch._dynamo
        torch._dynamo.reset()

    def defaults(self):
        """Inductor's gemm backends as configured in this process (what plain max-autotune uses)."""
        try:
            import torch._inductor.config as ic
            return {"max_autotune_gemm_backends": ic.max_autotune_gemm_backends,
                    "enable_persistent_tma_matmul": getattr(ic.triton, "enable_persistent_tma_matmul", None)}
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}

    def _gemm_fn(self, p, tag):
        """A new function (its own code object, so its own Dynamo cache) computing the problem as
        torch does: a @ w.t(), or torch._scaled_mm(a, w.t(), sa, sb, out_dtype=bf16)."""
        self.n_fns += 1
        name = f"gemm_{tag.replace('-', '_')}_{self.n_fns}"
        if p.dtype == "bf16":
            src = f"def {name}(a, w):\n    return torch.mm(a, w.t())\n"
        else:
            src = (f"def {name}(a, w, sa, sb):\n"
                   f"    return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)\n")
        ns = {"torch": self.torch}
        exec(compile(src, f"<h200 {name}>", "exec"), ns)
        return ns[name]

    def _first_call_with_code(self, f, args):
        """Calls f (compiling it) and returns the wrapper code Inductor generated, captured as
        torch._inductor.utils.run_and_get_code does but without its Dynamo reset (which would drop
        the other compiled function of the problem). [] when the hook is not there."""
        codes = []
        try:
            from unittest import mock
            from torch._inductor.graph import GraphLowering
            hook = hasattr(GraphLowering, "save_output_code")
        except Exception:
            hook = False
        if hook:
            with mock.patch.object(GraphLowering, "save_output_code", lambda *a: codes.append(a[-1])):
                f(*args)
        else:
            f(*args)
        return codes

    def _fresh_cache(self, d):
        """What torch._inductor.utils.fresh_cache does, without deleting the folder at the end (the
        compiled module and kernels are used after the compile): empty cache folders for Inductor
        and Triton (their environment variables: Inductor's compile workers read them), and
        Inductor's in-memory caches cleared."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(d)
        os.environ["TRITON_CACHE_DIR"] = str(d / "triton")
        try:
            import torch._inductor.utils as iu
            clear = getattr(iu, "clear_caches", None) or getattr(iu, "clear_inductor_caches", None)
            if clear is not None:
                clear()
        except Exception as e:
            warn(f"inductor: clearing its in-memory caches failed ({type(e).__name__}: {e})")

    def fn(self, p, xs, mode, backends=None, extra_options=None, fresh_dir=None, code_path=None):
        """(fn, compile_s, info): torch.compile of a @ w.t() (fp8: torch._scaled_mm with the problem's
        scales, bf16 out), compiled now from a cold cache (fresh_dir) on input set xs[0]. fn rotates
        over the sets xs (a Rotation) unless the mode uses CUDA graphs, whose static input
        addresses would re-record per set: then it runs on xs[0]. backends=None: the mode as is
        (Inductor's default gemm backends); else the mode's options plus max_autotune_gemm_backends
        = backends (e.g. "TRITON") and extra_options. info: options, the generated code's kernels and
        whether it calls an ATen/extern GEMM (kind 'triton', 'aten', 'mixed' or 'unknown')."""
        t = self.torch
        import torch._dynamo
        import torch._inductor
        self.init()
        if fresh_dir is not None:
            self._fresh_cache(fresh_dir)
        fn = self._gemm_fn(p, backends or "default")
        args_of = (lambda x: (x["a"], x["w"])) if p.dtype == "bf16" else (lambda x: (x["a"], x["w"], x["sa"], x["sb"]))
        args = args_of(xs[0])
        options = dict(torch._inductor.list_mode_options(mode))
        if backends is None and not extra_options:
            f = t.compile(fn, mode=mode, dynamic=False)
        else:
            # torch.compile takes a mode or options, not both: the mode's options, then ours.
            if backends is not None:
                options["max_autotune_gemm_backends"] = backends
            options.update(extra_options or {})
            f = t.compile(fn, options=options, dynamic=False)
        if options.get("triton.cudagraphs"):
            # Without this, CUDA graphs copy every non-static input into the graph's own buffers
            # before each replay: a copy of W per call, which a model (whose weights are
            # parameters) never pays.
            try:
                for a in args:
                    torch._dynamo.mark_static_address(a)
            except Exception as e:
                warn(f"inductor: mark_static_address failed ({e}); inputs may be copied per call")
        t0 = time.perf_counter()
        codes = self._first_call_with_code(f, args)
        self.gpu.sync()
        compile_s = time.perf_counter() - t0
        info = {"mode": mode, "options": dict(options), **analyze_inductor_code(codes)}
        _write_code(info, codes, code_path)
        if options.get("triton.cudagraphs"):
            return (lambda: f(*args)), compile_s, info
        return Rotation([(lambda xa=args_of(x): f(*xa)) for x in xs]), compile_s, info


class MockInductor:
    """Compiles in 10 ms; max-autotune 2% slower than the mock's gemmtune base, restricted to
    Triton 4%; its fake code calls an ATen GEMM at m <= 16 with the default backends."""

    def __init__(self, gpu):
        self.gpu, self.init_s = gpu, 0.01

    def init(self):
        pass

    def reset(self):
        pass

    def defaults(self):
        return {"max_autotune_gemm_backends": "ATEN,TRITON", "enable_persistent_tma_matmul": False}

    def fn(self, p, xs, mode, backends=None, extra_options=None, fresh_dir=None, code_path=None):
        time.sleep(0.01)
        base = self.gpu.base_us(p) * (1.02 if backends is None else 1.04)
        name = "triton_tem_fused__scaled_mm_0" if p.dtype != "bf16" else "triton_tem_fused_mm_0"
        code = (f"{name} = async_compile.triton('{name}', \'\'\'\n    BLOCK_M : tl.constexpr = 128\n"
                f"    BLOCK_N : tl.constexpr = 128\n    BLOCK_K : tl.constexpr = 64\n    GROUP_M : tl.constexpr = 8\n"
                f"\'\'\', device_str='cuda')\n@triton_heuristics.template(num_stages=3, num_warps=8)\n")
        if backends is None and p.m <= 16:
            code += "extern_kernels.mm(arg0_1, reinterpret_tensor(arg1_1, (8192, 10240), (1, 8192), 0), out=buf0)\n"
        info = {"mode": mode, "options": {"max_autotune": True, **({"max_autotune_gemm_backends": backends} if backends else {}),
                                          **(extra_options or {})}, **analyze_inductor_code([code])}
        _write_code(info, [code], code_path)
        call = lambda: ("out", base)  # noqa: E731
        return (call if mode == "max-autotune" else Rotation([call] * len(xs))), 0.01, info
