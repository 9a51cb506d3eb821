"""Ahead-of-time compilation of gemmtune's CuTe DSL GEMM for sm_90a (no GPU needed).

    from gemmtune.cutedsl.compile import compile_gemm, toolchain, CompileFailure
    r = compile_gemm(params, "/abs/out_dir")
    # {"artifact": "/abs/out_dir/<name>.so", "name": "<name>", "meta": {...},
    #  "compile_s": 1.1, "times": {"trace_compile": .., "export": .., "link": ..},
    #  "runtime": {"path": "/abs/.../libgt_cutedsl_rt_<hash>.so", "soname": "libgt_..."}}

Route A (docs/cutedsl.md): cute.compile on fake tensors (dynamic m, n, k and leading
dimensions), export_to_c -> object + header (checked against what the shim assumes), linked by
g++ with our shim (gemm_shim.cpp, C ABI gt_cutedsl_abi.h: one object for every instance, compiled
once per worker) and the instance's data (a few lines of generated assembly: the config text and
a descriptor) into a kernel .so (~45 kB); no C++ is compiled per artifact. The .so exports only
the gt_cutedsl_* entry points and needs one shared runtime library by soname: libgt_cutedsl_rt_<hash>.so
(runtime.cpp + the DSL's libcuda_dialect_runtime_static.a + the CUDA toolkit's
libcudart_static.a, ~1 MB, one per toolchain; built once per worker process). At run time the
two need only libc and a CUDA driver; the loader loads the runtime first.

params (problem terms, gemmtune's GemmProblem; all required unless a default is given):
    a_dtype, b_dtype: "bf16" | "fp16" | "e4m3" | "e5m2"; d_dtype: "bf16" | "fp16"
    a_row, b_row, d_row: bool; c_row: bool (default d_row)
    has_c: bool (beta != 0), bias: bool (bias[n]), act: none|relu|gelu_tanh|silu,
    scale: none|tensorwise|rowwise|block (fp8 only; block: the kernel's "block_m", or "block_n"
    with swap_ab)
    tile_m, tile_n, cluster_m, cluster_n, stages (0 = auto), swap_ab: bool (KERNEL terms:
    with swap_ab the kernel's M is the problem's n)
Failures raise CompileFailure(kind, message): "bad_request" (malformed params), "compile"
(the DSL refused or failed), "resource" (does not fit: shared memory), "link" (g++ failed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Optional

# Without a GPU the DSL would target sm_100a. Read at cutlass' import: compile_gemm also passes
# --gpu-arch, for processes that imported cutlass before this module.
os.environ["CUTE_DSL_ARCH"] = "sm_90a"
# Our artifact store is the cache; the DSL's own file cache would only hide compile times.
os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ARCH = "sm_90a"
DTYPES_IN = ("bf16", "fp16", "e4m3", "e5m2")
DTYPES_OUT = ("bf16", "fp16")
ACTS = ("none", "relu", "gelu_tanh", "silu")
SCALES = ("none", "tensorwise", "rowwise", "block")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "e4m3": 1, "e5m2": 1}

_SPEC = {
    "a_dtype": str, "b_dtype": str, "d_dtype": str,
    "a_row": bool, "b_row": bool, "d_row": bool, "c_row": bool,
    "has_c": bool, "bias": bool, "act": str, "scale": str,
    "tile_m": int, "tile_n": int, "cluster_m": int, "cluster_n": int, "stages": int,
    "swap_ab": bool,
}
_DEFAULTS = {"c_row": None, "has_c": False, "bias": False, "act": "none", "scale": "none",
             "stages": 0, "swap_ab": False, "cluster_m": 1, "cluster_n": 1}


class CompileFailure(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def check_fields(params: Any, spec: dict, defaults: Optional[dict] = None) -> dict:
    """{name: value} for every field of spec ({name: type}; int refuses bools), from params (a
    JSON object) or else defaults; raises CompileFailure("bad_request") naming the field that is
    unknown, missing or of the wrong type."""
    if not isinstance(params, dict):
        raise CompileFailure("bad_request", "params must be a JSON object")
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise CompileFailure("bad_request", f"params: unknown field(s) {unknown}")
    p = {}
    for name, typ in spec.items():
        if name in params:
            v = params[name]
            if typ is int and (isinstance(v, bool) or not isinstance(v, int)):
                raise CompileFailure("bad_request", f"params.{name}: {v!r} is not an integer")
            if typ is not int and not isinstance(v, typ):
                raise CompileFailure("bad_request", f"params.{name}: {v!r} is not a {typ.__name__}")
            p[name] = v
        elif defaults and name in defaults:
            p[name] = defaults[name]
        else:
            raise CompileFailure("bad_request", f"params.{name}: missing")
    return p


def normalize(params: Any) -> dict:
    """Checked, complete params (defaults filled in); raises CompileFailure("bad_request")."""
    p = check_fields(params, _SPEC, _DEFAULTS)
    if p["c_row"] is None:
        p["c_row"] = p["d_row"]
    for f in ("a_dtype", "b_dtype"):
        if p[f] not in DTYPES_IN:
            raise CompileFailure("bad_request", f"params.{f}: {p[f]!r} not in {DTYPES_IN}")
    if p["d_dtype"] not in DTYPES_OUT:
        raise CompileFailure("bad_request", f"params.d_dtype: {p['d_dtype']!r} not in {DTYPES_OUT}")
    fp8 = DTYPE_BYTES[p["a_dtype"]] == 1
    if DTYPE_BYTES[p["a_dtype"]] != DTYPE_BYTES[p["b_dtype"]] or (not fp8 and p["a_dtype"] != p["b_dtype"]):
        raise CompileFailure("bad_request", f"params: A {p['a_dtype']} and B {p['b_dtype']} do not pair")
    if p["a_dtype"] == "e5m2" and p["b_dtype"] == "e5m2":
        raise CompileFailure("bad_request", "params: e5m2 x e5m2 is not supported")
    if fp8 and not (p["a_row"] and not p["b_row"]):
        raise CompileFailure("bad_request", "params: fp8 needs A row-major and B column-major (K-major)")
    if p["act"] not in ACTS:
        raise CompileFailure("bad_request", f"params.act: {p['act']!r} not in {ACTS}")
    if p["scale"] not in SCALES:
        raise CompileFailure("bad_request", f"params.scale: {p['scale']!r} not in {SCALES}")
    if p["scale"] != "none" and not fp8:
        raise CompileFailure("bad_request", "params.scale: scales are for fp8 inputs only")
    return p


def kernel_config(p: dict):
    """The kernel's KernelConfig for normalized params (problem -> kernel terms)."""
    from .gemm_sm90 import KernelConfig
    bias = "none"
    if p["bias"]:
        bias = "m" if p["swap_ab"] else "n"
    scale = p["scale"]
    if scale == "block":  # A's 1x128 scales run along the kernel's M, or with swap-AB its N
        scale = "block_n" if p["swap_ab"] else "block_m"
    return KernelConfig(tile_m=p["tile_m"], tile_n=p["tile_n"], cluster_m=p["cluster_m"],
                        cluster_n=p["cluster_n"], stages=p["stages"],
                        has_c=p["has_c"], bias=bias, act=p["act"], scale=scale,
                        weights="a" if p["swap_ab"] else "b")


def config_text(p: dict) -> str:
    """Canonical one-line text of normalized params: what the .so reports as its config."""
    return json.dumps(p, sort_keys=True, separators=(",", ":"))


def instance_name(p: dict) -> str:
    """A short C identifier for the instance (symbol prefix), unique per config text."""
    import hashlib
    return "gt_cutedsl_" + hashlib.sha256(config_text(p).encode()).hexdigest()[:16]


# ---- toolchain ----------------------------------------------------------------------------------

def _cuda_home() -> str:
    for cand in (os.environ.get("GEMMTUNE_CUDA_HOME"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if cand and os.path.isfile(os.path.join(cand, "include", "cuda_runtime_api.h")):
            return cand
    raise CompileFailure("link", "no CUDA toolkit (cuda_runtime_api.h) in $GEMMTUNE_CUDA_HOME, $CUDA_HOME "
                                 "or /usr/local/cuda: needed to link the shim and libcudart_static.a")


def _cudart_static(cuda_home: str) -> str:
    for sub in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
        f = os.path.join(cuda_home, sub, "libcudart_static.a")
        if os.path.isfile(f):
            return f
    raise CompileFailure("link", f"no libcudart_static.a under {cuda_home}")


def _dsl_flavor() -> tuple[str, str, str]:
    """(flavor "cu12"/"cu13", the toolchain CUDA version the DSL compiles with, runtime lib dir)."""
    import nvidia_cutlass_dsl
    from cutlass.base_dsl import version_info
    v = version_info.CUDA_VERSION
    flavor = f"cu{v.major}"
    libdir = os.path.join(nvidia_cutlass_dsl.__path__[0], flavor, "lib")
    return flavor, f"{v.major}.{v.minor}", libdir


_TOOLCHAIN: dict | None = None


def toolchain() -> dict:
    """What, besides our sources and the params, determines an artifact's bytes. Cached."""
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        from importlib import metadata
        cuda_home = _cuda_home()
        cxx = os.environ.get("GEMMTUNE_CXX", "g++")
        try:
            cxx_version = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                                         timeout=60).stdout.splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError) as exc:
            raise CompileFailure("link", f"C++ compiler {cxx!r} not usable: {exc}")
        with open(os.path.join(cuda_home, "include", "cuda_runtime_api.h")) as f:
            m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", f.read())
        flavor, dsl_cuda, libdir = _dsl_flavor()
        rt = os.path.join(libdir, "libcuda_dialect_runtime_static.a")
        if not os.path.isfile(rt):
            raise CompileFailure("link", f"the DSL's static runtime {rt} is missing")
        _TOOLCHAIN = {
            "dsl": metadata.version("nvidia-cutlass-dsl-libs-base"),
            "flavor": flavor,
            "dsl_cuda": dsl_cuda,
            "arch": ARCH,
            "cxx": cxx_version,
            "cudart_static": m.group(1) if m else "unknown",
            # not part of the key's text, used to link
            "_cxx": cxx,
            "_cuda_home": cuda_home,
            "_cudart": _cudart_static(cuda_home),
            "_runtime": rt,
        }
    return _TOOLCHAIN


def toolchain_text() -> str:
    """One line naming the toolchain (the keyed fields of toolchain())."""
    t = toolchain()
    return " ".join(f"{k}={t[k]}" for k in ("dsl", "flavor", "dsl_cuda", "arch", "cxx", "cudart_static"))


def _check_dsl_arch() -> None:
    """The DSL reads CUTE_DSL_ARCH when cutlass is first imported; compiled for another arch than
    that, it treats the compile as a cross-compile and export_to_c fails ("PIC relocation")."""
    try:
        from cutlass.cutlass_dsl import CuTeDSL
        arch = CuTeDSL._get_dsl().envar.arch
    except Exception:  # noqa: BLE001 - an internal API: if it moved, let the compile tell
        return
    if arch != ARCH:
        raise CompileFailure("bad_request", f"cutlass was imported with CUTE_DSL_ARCH={arch!r} before "
                                            f"gemmtune.cutedsl.compile; set CUTE_DSL_ARCH={ARCH} before importing it")


_RUNTIME: dict | None = None


def runtime() -> dict:
    """The shared runtime library of this toolchain: {"path", "soname"}. Built on first use into
    a private temporary directory of this process (deterministic bytes: same toolchain, same
    sources -> same file)."""
    global _RUNTIME
    if _RUNTIME is not None and os.path.isfile(_RUNTIME["path"]):
        return _RUNTIME
    import hashlib
    import tempfile
    tc = toolchain()
    with open(os.path.join(HERE, "runtime.cpp"), "rb") as f:
        src = f.read()
    digest = hashlib.sha256(b"gemmtune-cutedsl-runtime 1\n" + toolchain_text().encode() + b"\n" + src)
    soname = f"libgt_cutedsl_rt_{digest.hexdigest()[:16]}.so"
    d = tempfile.mkdtemp(prefix="gemmtune-cutedsl-rt-")
    import atexit
    atexit.register(shutil.rmtree, d, True)
    vs = os.path.join(d, "rt.map")
    with open(vs, "w") as f:
        f.write("{ global: _cuda*; _cu*; gt_cutedsl_rt_*; local: *; };\n")
    path = os.path.join(d, soname)
    cmd = [tc["_cxx"], "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-shared", "-o", path,
           "-I" + os.path.join(tc["_cuda_home"], "include"), os.path.join(HERE, "runtime.cpp"),
           "-Wl,--whole-archive", tc["_runtime"], "-Wl,--no-whole-archive", tc["_cudart"],
           "-ldl", "-lrt", "-lpthread", "-static-libstdc++", "-static-libgcc", "-Wl,-soname," + soname,
           "-Wl,--no-undefined", "-Wl,--version-script=" + vs, "-Wl,--build-id=none"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileFailure("link", f"runtime library: {' '.join(cmd)}\n{r.stderr[-4000:]}")
    _RUNTIME = {"path": path, "soname": soname}
    return _RUNTIME


_SHIMS: dict[str, str] = {}


def shim_object(source: str = "gemm_shim.cpp") -> str:
    """A shim source of this directory (gemm_shim.cpp: every GEMM kernel .so links it;
    grouped_shim.cpp: every grouped one) compiled (-fPIC) into a private temporary directory of
    this process, once (deterministic bytes: same toolchain, same sources)."""
    path = _SHIMS.get(source)
    if path is not None and os.path.isfile(path):
        return path
    import atexit
    import tempfile
    tc = toolchain()
    d = tempfile.mkdtemp(prefix="gemmtune-cutedsl-shim-")
    atexit.register(shutil.rmtree, d, True)
    path = os.path.join(d, source.replace(".cpp", ".o"))
    cmd = [tc["_cxx"], "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-c", "-o", path,
           "-I" + os.path.join(tc["_cuda_home"], "include"), "-I" + HERE,
           "-fno-exceptions", "-fno-rtti", "-fno-asynchronous-unwind-tables", os.path.join(HERE, source)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileFailure("link", f"shim {source}: {' '.join(cmd)}\n{r.stderr[-4000:]}")
    _SHIMS[source] = path
    return path


# ---- fake tensors ---------------------------------------------------------------------------------

def _dtype(name: str):
    import cutlass
    return {"bf16": cutlass.BFloat16, "fp16": cutlass.Float16, "e4m3": cutlass.Float8E4M3FN,
            "e5m2": cutlass.Float8E5M2}[name]


def _matrix(dtype: str, unit_first: bool, tma: bool = True):
    """A fake (rows, cols, 1) tensor with dynamic extents and leading dimension; unit stride on
    mode 0 (`unit_first`) or mode 1. Its C struct: dynamic_shapes = [rows, cols],
    dynamic_strides = [ld, batch stride]. `tma`: read or written by TMA, so 16-byte aligned with
    a 16-byte multiple ld (A, B, D); C is read element by element: any ld, element alignment."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor
    div = 16 // DTYPE_BYTES[dtype] if tma else 1
    rows, cols = cute.sym_int32(), cute.sym_int32()
    ld, batch = cute.sym_int64(divisibility=div), cute.sym_int64(divisibility=div)
    stride = (1, ld, batch) if unit_first else (ld, 1, batch)
    return make_fake_tensor(_dtype(dtype), (rows, cols, 1), stride=stride,
                            assumed_align=16 if tma else DTYPE_BYTES[dtype])


def _vector(dtype, dynamic: bool, align: int = 0):
    """bias (D's dtype) or scales (fp32): read element by element, element alignment, unless
    `align` says otherwise (block scales: TMA)."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor
    n = cute.sym_int32() if dynamic else 1
    return make_fake_tensor(dtype, (n,), stride=(1,), assumed_align=align or dtype.width // 8)


def _unused():
    import cutlass
    from cutlass.cute.runtime import make_fake_tensor
    return make_fake_tensor(cutlass.Float32, (1,), stride=(1,), assumed_align=16)


# Which problem operand feeds each kernel tensor, as C++ expressions over `args` (GtCutedslArgs*).
# A problem matrix X[r, c] with layout row has X[i][j] at i*ld + j. As a kernel (rows, cols, 1)
# tensor: unit stride on the mode that walks the stored-contiguous dimension.
def _bindings(p: dict) -> dict:
    swap = p["swap_ab"]
    # kernel A (M, K): problem A (m, k), or with swap-AB problem B^T (n, k)
    if not swap:
        ka = ("a", "args->a", "args->m", "args->k", "args->lda", not p["a_row"], p["a_dtype"],
              "args->lda * (" + ("args->m" if p["a_row"] else "args->k") + ")")
        kb = ("b", "args->b", "args->n", "args->k", "args->ldb", p["b_row"], p["b_dtype"],
              "args->ldb * (" + ("args->k" if p["b_row"] else "args->n") + ")")
    else:
        ka = ("a", "args->b", "args->n", "args->k", "args->ldb", p["b_row"], p["b_dtype"],
              "args->ldb * (" + ("args->k" if p["b_row"] else "args->n") + ")")
        kb = ("b", "args->a", "args->m", "args->k", "args->lda", not p["a_row"], p["a_dtype"],
              "args->lda * (" + ("args->m" if p["a_row"] else "args->k") + ")")
    # D (M, N): problem D (m, n) or D^T (n, m); row-major D has unit stride along n.
    def out(name, ptr, ld, row, dtype):
        if not swap:
            return (name, ptr, "args->m", "args->n", ld, not row, dtype,
                    ld + " * (" + ("args->m" if row else "args->n") + ")")
        return (name, ptr, "args->n", "args->m", ld, row, dtype,
                ld + " * (" + ("args->m" if row else "args->n") + ")")
    kd = out("d", "args->d", "args->ldd", p["d_row"], p["d_dtype"])
    kc = out("c", "args->c", "args->ldc", p["c_row"], p["d_dtype"]) if p["has_c"] else None
    return {"a": ka, "b": kb, "d": kd, "c": kc}


def _fake_args(p: dict):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream
    bd = _bindings(p)
    t = {}
    for name in ("a", "b", "d"):
        _, _, _, _, _, unit_first, dtype, _ = bd[name]
        t[name] = _matrix(dtype, unit_first)
    t["c"] = _matrix(p["d_dtype"], bd["c"][5], tma=False) if bd["c"] else _unused()
    t["bias"] = _vector(_dtype(p["d_dtype"]), True) if p["bias"] else _unused()
    if p["scale"] == "block":  # loaded by TMA (16-byte aligned: the C++ side checks)
        t["row_scale"], t["col_scale"] = _vector(cutlass.Float32, True, 16), _vector(cutlass.Float32, True, 16)
    elif p["scale"] == "rowwise":
        t["row_scale"], t["col_scale"] = _vector(cutlass.Float32, True), _vector(cutlass.Float32, True)
    elif p["scale"] == "tensorwise":
        t["row_scale"], t["col_scale"] = _vector(cutlass.Float32, False), _vector(cutlass.Float32, False)
    else:
        t["row_scale"], t["col_scale"] = _unused(), _unused()
    return (t["a"], t["b"], t["d"], t["c"], t["bias"], t["row_scale"], t["col_scale"],
            cutlass.Float32(1.0), cutlass.Float32(0.0), cutlass.Int32(1), cutlass.Int32(0), make_fake_stream())


# ---- the shim -------------------------------------------------------------------------------------

_ARG_ORDER = ("a", "b", "d", "c", "bias", "row_scale", "col_scale")


def _struct_fields(header: str, prefix: str, tensor: str) -> dict:
    """{field: array length} of `<prefix>_Tensor_<tensor>_t` in the exported header."""
    m = re.search(r"typedef struct \{([^}]*)\}\s*" + re.escape(f"{prefix}_Tensor_{tensor}_t") + ";", header)
    if not m:
        raise CompileFailure("compile", f"export header lacks struct {prefix}_Tensor_{tensor}_t")
    fields = {}
    for line in m.group(1).split(";"):
        line = line.strip()
        if not line:
            continue
        fm = re.fullmatch(r"(?:void \*|int32_t |int64_t )(\w+)(?:\[(\d+)\])?", line)
        if not fm:
            raise CompileFailure("compile", f"unexpected field {line!r} in {prefix}_Tensor_{tensor}_t")
        fields[fm.group(1)] = int(fm.group(2) or 0)
    return fields


_MATRIX = {"data": 0, "dynamic_shapes": 2, "dynamic_strides": 2}
_MATRIX3 = {"data": 0, "dynamic_shapes": 3, "dynamic_strides": 2}  # a third (batch) extent
_VECTOR = {"data": 0, "dynamic_shapes": 1}
_SCALAR = {"data": 0}


def _check_export(prefix: str, header: str, structs: dict, scalars: list[str]) -> str:
    """Checks that the exported header (export_to_c's <prefix>.h) declares what a shim assumes:
    each tensor argument's C struct (structs: {name: {field: array length}}, in argument order)
    and a wrapper that passes (the tensors, &each of `scalars` (C declarations, e.g. "float
    alpha"), &ret) to the host entry. Returns the host entry's symbol
    (_mlir_<prefix>__mlir_ciface_<function>). Raises CompileFailure("compile") when the DSL's
    export no longer matches."""
    for name, expect in structs.items():
        f = _struct_fields(header, prefix, name)
        if f != expect:
            raise CompileFailure("compile", f"struct of {name}: fields {f}, expected {expect}")
    wm = re.search(r"static inline int32_t cute_dsl_" + re.escape(prefix) + r"_wrapper\(([^)]*)\) \{(.*?)\n\}",
                   header, re.S)
    if not wm:
        raise CompileFailure("compile", "export header lacks the wrapper function")
    params = [x.strip() for x in wm.group(1).split(",")]
    if params[-len(scalars):] != scalars or len(params) != 1 + len(structs) + len(scalars):
        raise CompileFailure("compile", f"unexpected wrapper signature: {params}")
    body = " ".join(wm.group(2).split())
    n = len(structs) + len(scalars) + 1
    passed = ", ".join(list(structs) + ["&" + x.split()[-1] for x in scalars] + ["&ret"])
    em = re.fullmatch(re.escape(f"int32_t ret = 0; void *args[{n}] = {{ {passed} }}; ") + r"(_mlir_" +
                      re.escape(prefix) + r"__mlir_ciface_\w+)" + re.escape(f"(args, {n}); return ret;"), body)
    if not em:
        raise CompileFailure("compile", f"unexpected wrapper body: {body[:400]}")
    return em.group(1)


def _check_header(p: dict, prefix: str, header: str) -> str:
    """_check_export for a GEMM instance: the tensor structs as _bindings lays them out (matrix
    {data, dynamic_shapes[2], dynamic_strides[2]}, a vector with a length {data,
    dynamic_shapes[1]}, else {data}), then (alpha, beta, max_clusters, pdl, stream), as
    gemm_shim.cpp passes them."""
    bd = _bindings(p)
    dyn_scales = p["scale"] in ("rowwise", "block")
    structs = {"a": _MATRIX, "b": _MATRIX, "d": _MATRIX, "c": _MATRIX if bd["c"] else _SCALAR,
               "bias": _VECTOR if p["bias"] else _SCALAR, "row_scale": _VECTOR if dyn_scales else _SCALAR,
               "col_scale": _VECTOR if dyn_scales else _SCALAR}
    assert tuple(structs) == _ARG_ORDER
    return _check_export(prefix, header, structs, ["float alpha", "float beta", "int32_t max_clusters",
                                                   "int32_t pdl", "cudaStream_t stream"])


# gemm_shim.cpp's GtGemmDesc, field by field (32-bit each).
_DESC_FIELDS = ("version", "swap_ab", "a_row", "b_row", "c_row", "d_row", "ab_bytes", "d_bytes", "has_c", "bias",
                "scale", "cluster_size")
_DESC_VERSION = 1
_DESC_SCALES = {"none": 0, "tensorwise": 1, "rowwise": 2, "block": 3}


def _gemm_desc(p: dict) -> list[int]:
    """gemm_shim.cpp's GtGemmDesc of normalized params."""
    v = {"version": _DESC_VERSION, "swap_ab": p["swap_ab"], "a_row": p["a_row"], "b_row": p["b_row"],
         "c_row": p["c_row"], "d_row": p["d_row"], "ab_bytes": DTYPE_BYTES[p["a_dtype"]],
         "d_bytes": DTYPE_BYTES[p["d_dtype"]], "has_c": p["has_c"], "bias": p["bias"],
         "scale": _DESC_SCALES[p["scale"]], "cluster_size": p["cluster_m"] * p["cluster_n"]}
    return [int(v[k]) for k in _DESC_FIELDS]


def _asm_string(text: str) -> str:
    """text as a GNU as string literal (printable ASCII as is, the rest octal escapes)."""
    out = []
    for b in text.encode():
        c = chr(b)
        out.append("\\" + c if c in '"\\' else c if 32 <= b < 127 else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def instance_asm(config: str, desc: list[int]) -> str:
    """The per-instance data gemm_shim.cpp reads (gt_inst_config, gt_inst_desc), as assembly:
    all an artifact needs besides the prebuilt shim object and its exported kernel object."""
    return ("\t.section .rodata.gt_inst,\"a\",@progbits\n"
            "\t.globl gt_inst_desc\n\t.hidden gt_inst_desc\n\t.p2align 2\n"
            "gt_inst_desc:\n\t.long " + ", ".join(str(x) for x in desc) + "\n"
            "\t.globl gt_inst_config\n\t.hidden gt_inst_config\n"
            "gt_inst_config:\n\t.asciz " + _asm_string(config) + "\n"
            "\t.section .note.GNU-stack,\"\",@progbits\n")


class LinkedShim:
    """A shim linked into the kernel .so without compiling C++ per artifact (build_instance):
    prebuilt `objects`, the instance's data as assembly `asm`, and symbol `aliases` {new: existing}
    (ld --defsym)."""

    def __init__(self, objects: list[str], asm: str, aliases: dict[str, str]):
        self.objects, self.asm, self.aliases = objects, asm, aliases


def _linked_shim(source: str, prefix: str, config: str, desc: list[int], entry: str) -> LinkedShim:
    """The shim `source` (gemm_shim.cpp, grouped_shim.cpp) with an instance's data: its config
    text and descriptor, its export's init / load functions and host entry as gt_inst_*."""
    return LinkedShim([shim_object(source)], instance_asm(config, desc),
                      {"gt_inst_entry": entry, "gt_inst_init": f"_mlir_{prefix}_cuda_init",
                       "gt_inst_load": f"_mlir_{prefix}_cuda_load_to_device"})


def _gemm_shim(p: dict, prefix: str, header: str) -> LinkedShim:
    return _linked_shim("gemm_shim.cpp", prefix, config_text(p), _gemm_desc(p), _check_header(p, prefix, header))


# ---- compile --------------------------------------------------------------------------------------

_DSL_RUNTIME_LOADED: bool | None = None


def _load_dsl_runtime() -> bool:
    """Loads the DSL's runtime libraries (libcute_dsl_runtime.so) into this process, globally,
    once; True when they are. export_to_c resolves the host code's _cuda* calls in this process:
    an execution engine loads them, a compile without one needs them loaded here (else export
    fails: "JIT session error: Symbols not found"). False when the DSL's internal API for them
    moved: compiles then make an engine (slower; the same artifact)."""
    global _DSL_RUNTIME_LOADED
    if _DSL_RUNTIME_LOADED is None:
        try:
            import ctypes
            from cutlass.cutlass_dsl import CuTeDSL
            for lib in CuTeDSL._get_dsl().get_shared_libs():
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            _DSL_RUNTIME_LOADED = True
        except Exception:  # noqa: BLE001 - an internal API, or a library that does not load
            _DSL_RUNTIME_LOADED = False
    return _DSL_RUNTIME_LOADED


_FP16_TYPES = re.compile(r"\b(?:__half2?|half2?|__nv_bfloat162?|nv_bfloat162?)\b")


def _light_header(header: str) -> str:
    """The exported header as the shim includes it. Its declarations need only the CUDA runtime
    API (cudaLibrary_t, cudaError_t, cudaStream_t, the calls of its inline load/unload helpers);
    the <cuda_runtime.h> and <cuda_fp16.h> it includes were two thirds of the shim's g++ time
    (~0.12 of 0.18 s CPU per artifact). cuda_fp16.h stays when a 16-bit scalar type appears; a
    header without these include lines is returned as it is."""
    lines = header.split("\n")
    keep_fp16 = _FP16_TYPES.search(header) is not None
    out = []
    for line in lines:
        if line == "#include <cuda_runtime.h>":
            line = "#include <cuda_runtime_api.h>"
        elif line == "#include <cuda_fp16.h>" and not keep_fp16:
            continue
        out.append(line)
    return "\n".join(out)


def build_instance(kernel, fake_args, out_dir: str, name: str, make_shim, exports: list[str]) -> dict:
    """The ahead-of-time build every CuTe DSL kernel shares: cute.compile(kernel, *fake_args) for
    ARCH, export it to C (name.o + name.h), then link name.so against the shared runtime library,
    exporting `exports` only, with the shim make_shim(header text) gives: C++ source (compiled
    with the link: softmax), or a LinkedShim (prebuilt objects and generated data: GEMM, no C++
    compile per artifact). Returns the compile result's common part: {artifact, name, compile_s,
    times{trace_compile, export, link}, runtime}. Raises CompileFailure("compile" | "link", ...)."""
    import cutlass.cute as cute
    _check_dsl_arch()
    tc = toolchain()
    times = {}
    t0 = time.perf_counter()
    try:
        # The arch also as an option: CUTE_DSL_ARCH is read when cutlass is first imported, which
        # may have happened before this module set it.
        # Without an execution engine (the host code JIT-compiled into this process and looked
        # up: ~0.06 s per compile, unused) when the DSL's runtime library is loaded here.
        compiled = cute.compile(kernel, *fake_args, options=f"--gpu-arch {ARCH}",
                                no_jit_engine=_load_dsl_runtime())
    except Exception as exc:  # noqa: BLE001 - the DSL raises many types
        raise CompileFailure("compile", f"{type(exc).__name__}: {exc}")
    t1 = time.perf_counter()
    times["trace_compile"] = round(t1 - t0, 3)
    compiled.export_to_c(out_dir, name, function_prefix=name)
    t2 = time.perf_counter()
    times["export"] = round(t2 - t1, 3)
    with open(os.path.join(out_dir, name + ".h")) as f:
        header = f.read()
    shim = make_shim(header)
    vs = os.path.join(out_dir, name + ".map")
    with open(vs, "w") as f:
        f.write("{ global: " + "; ".join(exports) + "; local: *; };\n")
    so = os.path.join(out_dir, name + ".so")
    rt = runtime()
    tail = [os.path.join(out_dir, name + ".o"), rt["path"],
            "-static-libgcc", "-Wl,--no-undefined", "-Wl,--exclude-libs,ALL",
            "-Wl,--version-script=" + vs, "-Wl,-Bsymbolic", "-Wl,--build-id=none"]
    if isinstance(shim, LinkedShim):
        src = os.path.join(out_dir, name + "_inst.s")
        with open(src, "w") as f:
            f.write(shim.asm)
        cmd = [tc["_cxx"], "-shared", "-o", so, "-Wl,--as-needed", src, *shim.objects, *tail]
        cmd += [f"-Wl,--defsym={k}={v}" for k, v in sorted(shim.aliases.items())]
    else:
        with open(os.path.join(out_dir, name + ".h"), "w") as f:
            f.write(_light_header(header))
        src = os.path.join(out_dir, name + "_shim.cpp")
        with open(src, "w") as f:
            f.write(shim)
        cmd = [tc["_cxx"], "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-shared", "-o", so,
               "-I" + os.path.join(tc["_cuda_home"], "include"), "-I" + out_dir, "-I" + HERE,
               "-fno-exceptions", "-fno-rtti", "-fno-asynchronous-unwind-tables", "-Wl,--as-needed", src, *tail]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileFailure("link", f"{' '.join(cmd)}\n{r.stderr[-4000:]}")
    t3 = time.perf_counter()
    times["link"] = round(t3 - t2, 3)
    return {"artifact": so, "name": name, "compile_s": round(t3 - t0, 3), "times": times, "runtime": dict(rt)}


def _plan(out_dir: str, config_of, p: dict, ab_dtype: str):
    """What every compile checks before any work: out_dir, the toolchain, the kernel config
    (config_of(p)) and its shared-memory plan. Returns (config, stages); raises CompileFailure
    ("bad_request" | "resource")."""
    if not os.path.isabs(out_dir):
        raise CompileFailure("bad_request", "out_dir must be an absolute path")
    os.makedirs(out_dir, exist_ok=True)
    toolchain()  # the DSL's availability and versions, before any work
    try:
        cfg = config_of(p)
        cfg.check()
    except ValueError as exc:
        raise CompileFailure("bad_request", f"params: {exc}")
    from .gemm_sm90 import plan_smem
    try:
        return cfg, plan_smem(cfg, DTYPE_BYTES[ab_dtype], DTYPE_BYTES[p["d_dtype"]])[1]
    except ValueError as exc:
        raise CompileFailure("resource", str(exc))


def compile_gemm(params: Any, out_dir: str) -> dict:
    p = normalize(params)
    cfg, stages = _plan(out_dir, kernel_config, p, p["a_dtype"])
    from .gemm_sm90 import HopperGemm
    name = instance_name(p)
    out = build_instance(HopperGemm(cfg), _fake_args(p), out_dir, name, lambda header: _gemm_shim(p, name, header),
                         ["gt_cutedsl_abi_version", "gt_cutedsl_config", "gt_cutedsl_can_implement",
                          "gt_cutedsl_run", "gt_cutedsl_status_text"])
    out["meta"] = {"config": config_text(p), "toolchain": toolchain_text(), "stages": stages}
    return out


# ---- grouped GEMM ----------------------------------------------------------------------------------
# Params of a grouped instance (gemmtune/grouped.hpp; src/backends/cutedsl/grouped.cpp sends all):
#   op "grouped", layout contiguous|masked, ab_dtype (A's and B's), d_dtype (16-bit), bias (bias
#   [G, n]), act, scale none|tensorwise|rowwise (fp8 only, then required), tile_m, tile_n,
#   cluster_n, stages (0 = auto). The kernel: gemm_sm90.HopperGemm's grouped mode.
GROUPED_LAYOUTS = ("contiguous", "masked")
_GROUPED_SPEC = {
    "op": str, "layout": str, "ab_dtype": str, "d_dtype": str, "bias": bool, "act": str, "scale": str,
    "tile_m": int, "tile_n": int, "cluster_n": int, "stages": int,
}


def normalize_grouped(params: Any) -> dict:
    """Checked grouped params (every field required); raises CompileFailure("bad_request")."""
    p = check_fields(params, _GROUPED_SPEC)
    if p["op"] != "grouped":
        raise CompileFailure("bad_request", f"params.op: {p['op']!r} is not 'grouped'")
    if p["layout"] not in GROUPED_LAYOUTS:
        raise CompileFailure("bad_request", f"params.layout: {p['layout']!r} not in {GROUPED_LAYOUTS}")
    if p["ab_dtype"] not in DTYPES_IN:
        raise CompileFailure("bad_request", f"params.ab_dtype: {p['ab_dtype']!r} not in {DTYPES_IN}")
    if p["d_dtype"] not in DTYPES_OUT:
        raise CompileFailure("bad_request", f"params.d_dtype: {p['d_dtype']!r} not in {DTYPES_OUT}")
    if p["act"] not in ACTS:
        raise CompileFailure("bad_request", f"params.act: {p['act']!r} not in {ACTS}")
    fp8 = DTYPE_BYTES[p["ab_dtype"]] == 1
    scales = ("tensorwise", "rowwise") if fp8 else ("none",)
    if p["scale"] not in scales:
        raise CompileFailure("bad_request", f"params.scale: {p['scale']!r} not in {scales} for {p['ab_dtype']}")
    return p


def grouped_kernel_config(p: dict):
    from .gemm_sm90 import KernelConfig
    return KernelConfig(tile_m=p["tile_m"], tile_n=p["tile_n"], cluster_m=1, cluster_n=p["cluster_n"],
                        stages=p["stages"], bias="n" if p["bias"] else "none", act=p["act"], scale=p["scale"],
                        grouped=p["layout"])


def _grouped_fake_args(p: dict):
    """The fake tensors of grouped_call (grouped_shim.cpp fills their structs): packed row-major
    A (rows, K, 1 | G), B (N, K, G), D (rows, N, 1 | G), dynamic extents and leading dimensions."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor
    masked = p["layout"] == "masked"
    groups = cute.sym_int32()

    def matrix(dtype: str, batched: bool):
        div = 16 // DTYPE_BYTES[dtype]
        rows, cols = cute.sym_int32(), cute.sym_int32()
        ld, batch = cute.sym_int64(divisibility=div), cute.sym_int64(divisibility=div)
        return make_fake_tensor(_dtype(dtype), (rows, cols, groups if batched else 1), stride=(ld, 1, batch),
                                assumed_align=16)

    a, b, d = matrix(p["ab_dtype"], masked), matrix(p["ab_dtype"], True), matrix(p["d_dtype"], masked)
    rows = _vector(cutlass.Int32, True)
    bias = _vector(_dtype(p["d_dtype"]), True) if p["bias"] else _unused()
    if p["scale"] == "rowwise":
        rs, cs = _vector(cutlass.Float32, True), _vector(cutlass.Float32, True)
    elif p["scale"] == "tensorwise":
        rs, cs = _vector(cutlass.Float32, False), _vector(cutlass.Float32, True)
    else:
        rs, cs = _unused(), _unused()
    return (a, b, d, rows, bias, rs, cs, cutlass.Float32(1.0), cutlass.Int32(1), make_fake_stream())


_GROUPED_ARGS = ("a", "b", "d", "rows", "bias", "row_scale", "col_scale")


def _check_grouped_header(p: dict, prefix: str, header: str) -> str:
    """_check_export for grouped_call: the tensor structs grouped_shim.cpp fills, then (alpha,
    max_clusters, stream)."""
    masked = p["layout"] == "masked"
    structs = {"a": _MATRIX3 if masked else _MATRIX, "b": _MATRIX3, "d": _MATRIX3 if masked else _MATRIX,
               "rows": _VECTOR, "bias": _VECTOR if p["bias"] else _SCALAR,
               "row_scale": _VECTOR if p["scale"] == "rowwise" else _SCALAR,
               "col_scale": _VECTOR if p["scale"] != "none" else _SCALAR}
    assert tuple(structs) == _GROUPED_ARGS
    return _check_export(prefix, header, structs, ["float alpha", "int32_t max_clusters", "cudaStream_t stream"])


# grouped_shim.cpp's GtGroupedDesc, field by field (32-bit each).
_GROUPED_DESC_FIELDS = ("version", "masked", "ab_bytes", "d_bytes", "bias", "scale", "cluster_size")
_GROUPED_DESC_VERSION = 1


def _grouped_desc(p: dict) -> list[int]:
    v = {"version": _GROUPED_DESC_VERSION, "masked": p["layout"] == "masked", "ab_bytes": DTYPE_BYTES[p["ab_dtype"]],
         "d_bytes": DTYPE_BYTES[p["d_dtype"]], "bias": p["bias"], "scale": _DESC_SCALES[p["scale"]],
         "cluster_size": p["cluster_n"]}
    return [int(v[k]) for k in _GROUPED_DESC_FIELDS]


def compile_grouped(params: Any, out_dir: str) -> dict:
    """compile_gemm for a grouped instance (params above); the same result and failures."""
    p = normalize_grouped(params)
    cfg, stages = _plan(out_dir, grouped_kernel_config, p, p["ab_dtype"])
    from .gemm_sm90 import HopperGemm
    name = instance_name(p)
    text = config_text(p)

    def shim(header: str) -> LinkedShim:
        return _linked_shim("grouped_shim.cpp", name, text, _grouped_desc(p), _check_grouped_header(p, name, header))

    out = build_instance(HopperGemm(cfg).grouped_call, _grouped_fake_args(p), out_dir, name, shim,
                         ["gt_cutedsl_grouped_abi_version", "gt_cutedsl_grouped_config",
                          "gt_cutedsl_grouped_can_implement", "gt_cutedsl_grouped_run",
                          "gt_cutedsl_grouped_status_text"])
    out["meta"] = {"config": text, "toolchain": toolchain_text(), "stages": stages}
    return out


def main(argv: list[str]) -> int:
    """python -m gemmtune.cutedsl.compile '<params json>' OUT_DIR: one compile, result on stdout."""
    if len(argv) != 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        params = json.loads(argv[1])
        build = compile_grouped if isinstance(params, dict) and params.get("op") == "grouped" else compile_gemm
        print(json.dumps(build(params, os.path.abspath(argv[2]))))
    except CompileFailure as exc:
        print(f"{exc.kind}: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
