"""Ahead-of-time compilation of gemmtune's Triton templates for sm_90a (no GPU needed).

    from gemmtune.triton_compile import compile_gemm, CompileFailure
    result = compile_gemm({"kernel": "gemm_tiled", "a_dtype": "bf16", ...}, "/abs/out_dir")
    # {"artifact": "/abs/out_dir/gemm_tiled-<hash16>.cubin", "name": "gemm_tiled",
    #  "meta": {"shared": ..., "num_warps": ..., ...}, "compile_s": 0.4, "hash": "<hash16>"}

Parameters, signatures and the kernels' argument order: docs/triton-backend.md. Failures
raise CompileFailure(kind, message), kind one of "bad_request" (malformed or unsupported
parameters: a bug of the caller), "compile" (the config does not compile) or "resource" (too
much shared memory, registers or threads). gemmtune.worker serves this over JSON lines.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Optional

# Hopper: 227 KiB of shared memory per block (opt-in), 1024 threads per block.
MAX_SHARED_BYTES = 232448
MAX_THREADS = 1024
# ptxas caps a thread at 255 registers: an fp32 accumulator of 256 or more per thread always
# spills (and such configs take seconds to compile), so they are refused before compiling.
MAX_ACC_PER_THREAD = 255
TARGET_ARCH = 90
TARGET_NAME = "sm_90a"

KERNEL_NAMES = ("gemm_tiled", "gemm_persistent", "splitk_reduce")
IN_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "fp8e4nv", "e5m2": "fp8e5"}
OUT_DTYPES = IN_DTYPES
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "e4m3": 1, "e5m2": 1}
ACTS = ("none", "relu", "gelu_tanh", "silu")
SCALES = ("none", "tensorwise", "rowwise", "block")
REDUCE_BLOCK = 1024

# name: (type, default; None = required). "kernel" may also come from the request.
_COMMON = {
    "kernel": (str, None),
    "out_dtype": (str, None),
    "c_row": (bool, True),
    "d_row": (bool, True),
    "has_c": (bool, False),
    "has_bias": (bool, False),
    "act": (str, "none"),
    "scale": (str, "none"),
    "num_warps": (int, 4),
    "num_stages": (int, 3),
    "ld_div16": (dict, {}),
    "dims_div16": (dict, {}),
}
_GEMM = {
    "a_dtype": (str, None),
    "b_dtype": (str, None),
    "a_row": (bool, None),
    "b_row": (bool, None),
    "tf32": (bool, False),
    "fp8_fast_accum": (bool, False),
    "block_m": (int, None),
    "block_n": (int, None),
    "block_k": (int, None),
    "group_m": (int, 8),
    "split_k": (int, 1),
    "even_k": (bool, False),
    "i32_offsets": (bool, False),
    "num_sms": (int, 0),
    "block": (int, REDUCE_BLOCK),
}
# Accepted (so that one parameter dict can describe a GEMM and its reduce) but not all used.
_SCHEMA = {**_COMMON, **_GEMM}


class CompileFailure(Exception):
    """kind: "bad_request", "compile" or "resource"."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def _bad(message: str) -> CompileFailure:
    return CompileFailure("bad_request", message)


def triton_version() -> Optional[str]:
    try:
        import triton
        return triton.__version__
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None


# ---------------------------------------------------------------------------------------------
# Parameters


def _with_kernel(params: Any, kernel: Optional[str]) -> dict:
    """A copy of a request's `params` with the request's `kernel` filled in (refused when params
    names another)."""
    if not isinstance(params, dict):
        raise _bad("params: expected an object")
    p = dict(params)
    if kernel is not None:
        if "kernel" in p and p["kernel"] != kernel:
            raise _bad(f"params.kernel {p['kernel']!r} differs from the request's kernel {kernel!r}")
        p["kernel"] = kernel
    return p


def _typed_fields(p: dict, schema: dict, required: set) -> dict:
    """p's fields against `schema` ({field: (type, default)}): wrong types and missing `required`
    fields refused, absent ones given their default."""
    out = {}
    for key, (typ, default) in schema.items():
        if key in p:
            value = p[key]
            if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
                raise _bad(f"params.{key}: expected {typ.__name__}, got {type(value).__name__} {value!r}")
            out[key] = value
        elif key in required:
            raise _bad(f"params.{key}: missing")
        else:
            out[key] = default
    return out


def _refuse_unknown(p: dict, schema: dict) -> None:
    unknown = sorted(set(p) - set(schema))
    if unknown:
        raise _bad(f"params: unknown field(s) {', '.join(unknown)}")


def checked_fields(params: Any, schema: dict, kernel: Optional[str] = None) -> dict:
    """The fields of a request's `params` against `schema` ({field: (type, default)}, default None:
    required), the request's `kernel` filled in: unknown fields, wrong types and missing fields are
    refused with CompileFailure("bad_request"); defaults filled. Used by the Triton templates whose
    kernels share one schema (softmax, grouped GEMM)."""
    p = _with_kernel(params, kernel)
    _refuse_unknown(p, schema)
    return _typed_fields(p, schema, {k for k, (_, default) in schema.items() if default is None})


def normalize_params(params: Any, kernel: Optional[str] = None) -> dict:
    """Checks types and values, fills defaults; raises CompileFailure("bad_request")."""
    p = _with_kernel(params, kernel)
    _refuse_unknown(p, _SCHEMA)
    name = p.get("kernel")
    if name not in KERNEL_NAMES:
        raise _bad(f"params.kernel: {name!r} is not one of {', '.join(KERNEL_NAMES)}")
    # splitk_reduce needs no GEMM fields but must be told how many partials to sum.
    fields = {**_COMMON, "split_k": (int, None)} if name == "splitk_reduce" else _SCHEMA
    out = _typed_fields(p, _SCHEMA, {k for k, (_, default) in fields.items() if default is None})

    def one_of(key, allowed):
        if out[key] not in allowed:
            raise _bad(f"params.{key}: {out[key]!r} is not one of {', '.join(allowed)}")

    one_of("out_dtype", list(OUT_DTYPES))
    one_of("act", ACTS)
    one_of("scale", SCALES)
    for key, allowed in (("ld_div16", ("a", "b", "c", "d")), ("dims_div16", ("m", "n", "k"))):
        flags = out[key]
        for k, v in flags.items():
            if k not in allowed or not isinstance(v, bool):
                raise _bad(f"params.{key}: keys {', '.join(allowed)} with true/false values, got {k!r}: {v!r}")
        out[key] = {k: bool(flags.get(k, False)) for k in allowed}
    if out["num_warps"] < 1 or out["num_warps"] & (out["num_warps"] - 1) or out["num_warps"] > 32:
        raise _bad(f"params.num_warps: {out['num_warps']} is not a power of two in [1, 32]")
    if out["num_stages"] < 1 or out["num_stages"] > 16:
        raise _bad(f"params.num_stages: {out['num_stages']} not in [1, 16]")
    if out["split_k"] < 1 or out["split_k"] > 1024:
        raise _bad(f"params.split_k: {out['split_k']} not in [1, 1024]")

    if name == "splitk_reduce":
        if out["block"] < 1 or out["block"] & (out["block"] - 1) or out["block"] > 8192:
            raise _bad("params.block: a power of two in [1, 8192]")
        return out

    one_of("a_dtype", list(IN_DTYPES))
    one_of("b_dtype", list(IN_DTYPES))
    a_fp8 = out["a_dtype"] in ("e4m3", "e5m2")
    b_fp8 = out["b_dtype"] in ("e4m3", "e5m2")
    if out["a_dtype"] != out["b_dtype"] and not (a_fp8 and b_fp8):
        raise _bad(f"params: a_dtype {out['a_dtype']} with b_dtype {out['b_dtype']} is not supported "
                   "(equal dtypes, or two fp8 dtypes)")
    for key in ("block_m", "block_n", "block_k", "group_m"):
        if out[key] < 1 or out[key] > 4096:
            raise _bad(f"params.{key}: {out[key]} not in [1, 4096]")
    if out["scale"] != "none" and not (a_fp8 and b_fp8):
        raise _bad(f"params.scale: {out['scale']} scales apply to fp8 inputs only")
    if out["scale"] == "block" and 128 % out["block_k"] != 0:
        raise _bad(f"params.block_k: {out['block_k']} does not divide 128 (block scales change every 128 of k)")
    if name == "gemm_persistent":
        if out["split_k"] != 1:
            raise _bad("params.split_k: gemm_persistent has no split-k (use gemm_tiled)")
        if out["num_sms"] < 1:
            raise _bad("params.num_sms: gemm_persistent needs the number of programs (num_sms >= 1)")
        if not (out["ld_div16"]["a"] and out["ld_div16"]["b"]):
            raise _bad("params.ld_div16: gemm_persistent reads A and B with TMA, whose row strides must be "
                       "multiples of 16 bytes: needs ld_div16.a and ld_div16.b")
    return out


def _gemm_constexprs(p: dict) -> dict:
    from .kernels import triton_gemm as tg
    fp8 = p["a_dtype"] in ("e4m3", "e5m2")
    if p["a_dtype"] == "fp32":
        precision = "tf32" if p["tf32"] else "ieee"
    else:
        precision = "ieee"  # ignored by tl.dot for 16-bit and fp8 inputs
    max_imprecise = p["block_k"] if fp8 and not p["fp8_fast_accum"] else None
    ce = {
        "A_ROW": p["a_row"], "B_ROW": p["b_row"], "C_ROW": p["c_row"], "D_ROW": p["d_row"],
        "HAS_C": p["has_c"], "HAS_BIAS": p["has_bias"],
        "ACT": tg.ACT_CODES[p["act"]], "SCALE": tg.SCALE_CODES[p["scale"]],
        "DOT_PRECISION": precision, "MAX_IMPRECISE": max_imprecise,
        "BLOCK_M": p["block_m"], "BLOCK_N": p["block_n"], "BLOCK_K": p["block_k"], "GROUP_M": p["group_m"],
    }
    if p["kernel"] == "gemm_tiled":
        ce["SPLIT_K"] = p["split_k"]
        ce["EVEN_K"] = p["even_k"]
        ce["I32_OFFSETS"] = p["i32_offsets"]
    else:
        ce["NUM_SMS"] = p["num_sms"]
    return ce


def build_source_args(p: dict):
    """(fn, signature, constexprs, attrs) for triton.compiler.ASTSource from normalized params."""
    from .kernels import triton_gemm as tg
    name = p["kernel"]
    fn = tg.KERNELS[name]
    out_t = "*" + OUT_DTYPES[p["out_dtype"]]
    types = {"c": out_t, "d": out_t, "bias": out_t, "scale_a": "*fp32", "scale_b": "*fp32", "workspace": "*fp32",
             "M": "i32", "N": "i32", "K": "i32", "lda": "i32", "ldb": "i32", "ldc": "i32", "ldd": "i32",
             "alpha": "fp32", "beta": "fp32"}
    if name == "splitk_reduce":
        runtime = tg.REDUCE_RUNTIME_ARGS
        constexprs = {"C_ROW": p["c_row"], "D_ROW": p["d_row"], "HAS_C": p["has_c"], "HAS_BIAS": p["has_bias"],
                      "ACT": tg.ACT_CODES[p["act"]], "SCALE": tg.SCALE_CODES[p["scale"]],
                      "SPLIT_K": p["split_k"], "BLOCK": p["block"]}
    else:
        runtime = tg.RUNTIME_ARGS
        types["a"] = "*" + IN_DTYPES[p["a_dtype"]]
        types["b"] = "*" + IN_DTYPES[p["b_dtype"]]
        constexprs = _gemm_constexprs(p)
    arg_names = list(fn.arg_names)
    assert arg_names[:len(runtime)] == list(runtime), (arg_names, runtime)
    assert sorted(arg_names[len(runtime):]) == sorted(constexprs), (arg_names, constexprs)
    signature = {n: types[n] for n in runtime}
    signature.update({n: "constexpr" for n in arg_names[len(runtime):]})
    # Divisibility hints: every pointer is 16-byte aligned (the engine requires it); leading
    # dimensions and M, N, K where the caller says they are multiples of 16 elements.
    div16 = [n for n in runtime if types[n].startswith("*")]
    div16 += ["ld" + k for k, v in p["ld_div16"].items() if v and ("ld" + k) in runtime]
    div16 += [k.upper() for k, v in p["dims_div16"].items() if v and k.upper() in runtime]
    attrs = {(arg_names.index(n), ): [["tt.divisibility", 16]] for n in div16}
    return fn, signature, constexprs, attrs


# ---------------------------------------------------------------------------------------------
# Compilation


class _CapturedOutput:
    """Sends fds 1 and 2 (LLVM, MLIR and ptxas write there directly) and sys.stdout /
    sys.stderr (Triton prints) to a temporary file while compiling; afterwards the text is kept
    in .text and, less ptxas' info lines, copied to the real stderr."""

    def __init__(self, echo_filter=None):
        self._echo_filter = echo_filter

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._tmp = tempfile.TemporaryFile(mode="w+b")
        self._saved = (os.dup(1), os.dup(2))
        os.dup2(self._tmp.fileno(), 1)
        os.dup2(self._tmp.fileno(), 2)
        self._py = (sys.stdout, sys.stderr)
        self._pytext = open(self._tmp.fileno(), "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stdout = sys.stderr = self._pytext
        self.text = ""
        return self

    def __exit__(self, *exc):
        try:
            self._pytext.flush()
            self._pytext.close()
        except Exception:  # noqa: BLE001
            pass
        sys.stdout, sys.stderr = self._py
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        os.close(self._saved[0])
        os.close(self._saved[1])
        self._tmp.seek(0)
        data = self._tmp.read()
        self._tmp.close()
        self.text = data.decode("utf-8", "replace")
        echo = self._echo_filter(self.text) if self._echo_filter else self.text
        if echo:
            try:
                sys.stderr.write(echo)
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
        return False


_cache_dir: Optional[str] = None


def _private_cache_dir() -> str:
    """Triton insists on a file cache; ours is private to the process and emptied after each
    compile (the C++ artifact store is the cache that matters)."""
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = tempfile.mkdtemp(prefix="gemmtune-triton-")
        atexit.register(shutil.rmtree, _cache_dir, True)
    return _cache_dir


_RESOURCE_PATTERNS = re.compile(
    r"out of resource|too much shared|exceeds? .*(shared|register)|(shared|register)s? .*exceed|"
    r"insufficient (shared|register)|Entry function .* uses too much", re.IGNORECASE)


def _classify(exc: BaseException, chatter: str) -> CompileFailure:
    from triton.runtime.errors import OutOfResources
    # Triton's CompilationError starts with source context: the reason is its last line.
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    text = f"{type(exc).__module__}.{type(exc).__name__}: {lines[-1] if lines else ''}"
    if len(lines) > 1:
        text += "\n" + "\n".join(lines)
    tail = chatter.strip()
    if tail and tail not in text:
        text += "\n--- compiler output ---\n" + tail[-3000:]
    if isinstance(exc, OutOfResources) or _RESOURCE_PATTERNS.search(str(exc)) or _RESOURCE_PATTERNS.search(chatter):
        return CompileFailure("resource", text)
    return CompileFailure("compile", text)


def _precheck_resources(p: dict) -> None:
    """Refuses, without compiling, configs that cannot fit: compiling them can take minutes."""
    if p["num_warps"] * 32 > MAX_THREADS:
        raise CompileFailure("resource", f"{p['num_warps']} warps exceed {MAX_THREADS} threads per block")
    if p["kernel"] == "splitk_reduce":
        return
    per_thread = p["block_m"] * p["block_n"] // (32 * p["num_warps"])
    if per_thread > MAX_ACC_PER_THREAD:
        raise CompileFailure("resource", f"a {p['block_m']}x{p['block_n']} fp32 accumulator over {p['num_warps']} "
                             f"warps needs {per_thread} registers per thread (at most {MAX_ACC_PER_THREAD})")
    # One stage of A and B tiles in shared memory (Triton keeps at least num_stages - 1).
    stage = p["block_m"] * p["block_k"] * DTYPE_BYTES[p["a_dtype"]] + \
        p["block_k"] * p["block_n"] * DTYPE_BYTES[p["b_dtype"]]
    if stage * max(1, p["num_stages"] - 1) > MAX_SHARED_BYTES:
        raise CompileFailure("resource", f"{max(1, p['num_stages'] - 1)} stages of {stage} bytes exceed "
                             f"{MAX_SHARED_BYTES} bytes of shared memory")


def compile_gemm(params: Any, out_dir: str, kernel: Optional[str] = None) -> dict:
    """Compiles one template instance for sm_90a, writes <out_dir>/<name>-<hash16>.cubin and
    returns {"artifact", "name", "kernel", "hash", "meta", "compile_s"}. Raises CompileFailure."""
    t0 = time.perf_counter()
    p = normalize_params(params, kernel)
    if not isinstance(out_dir, str) or not out_dir:
        raise _bad("out_dir: expected a path")
    _precheck_resources(p)
    try:
        import triton  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        raise _bad(f"triton is not available: {type(exc).__name__}: {exc}")
    out = build_cubin(build_source_args(p), {"num_warps": p["num_warps"], "num_stages": p["num_stages"]}, out_dir)
    return {**out, "kernel": p["kernel"], "compile_s": round(time.perf_counter() - t0, 4)}


def build_cubin(source_args, options: dict, out_dir: str) -> dict:
    """The compile step every Triton kernel of gemmtune shares (GEMM, split-k reduce, softmax):
    triton.compile of source_args = (fn, signature, constexprs, attrs) with `options`
    (num_warps, num_stages) for sm_90a in a private cache, ptxas -v parsed for registers and
    spills; refuses what does not fit an sm_90 block; writes <out_dir>/<name>-<hash16>.cubin
    atomically. Returns {"artifact", "name", "hash", "meta"}. Raises CompileFailure."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    knobs = triton.knobs
    saved = (knobs.cache.dir, knobs.nvidia.dump_ptxas_log)
    knobs.cache.dir = _private_cache_dir()
    knobs.nvidia.dump_ptxas_log = True  # registers and spills, parsed below
    compiled = None
    try:
        with _CapturedOutput(echo_filter=_without_ptxas_info) as out:
            try:
                src = ASTSource(*source_args)
                compiled = triton.compile(src, target=GPUTarget("cuda", TARGET_ARCH, 32), options=options)
            except Exception as exc:  # noqa: BLE001
                failure = exc
            else:
                failure = None
        if failure is not None:
            raise _classify(failure, out.text) from None
        md = compiled.metadata
        cubin = compiled.asm["cubin"]
        ptx = compiled.asm.get("ptx", "")
    finally:
        knobs.cache.dir, knobs.nvidia.dump_ptxas_log = saved
        if compiled is not None:
            for path in compiled.metadata_group.values():
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
                break

    def num(value, default):
        return default if value is None else int(value)

    meta = {
        "shared": num(md.shared, 0),
        "num_warps": num(md.num_warps, options["num_warps"]),
        "num_ctas": num(md.num_ctas, 1),
        "num_stages": num(md.num_stages, options["num_stages"]),
        "global_scratch_size": num(md.global_scratch_size, 0),
        "global_scratch_align": max(1, num(md.global_scratch_align, 1)),
        "profile_scratch_size": num(getattr(md, "profile_scratch_size", 0), 0),
        "profile_scratch_align": max(1, num(getattr(md, "profile_scratch_align", 1), 1)),
        "target": _ptx_target(ptx) or TARGET_NAME,
        "num_params": _ptx_num_params(ptx),
        "triton": triton.__version__,
        **_ptxas_usage(out.text),
    }
    if meta["shared"] > MAX_SHARED_BYTES:
        raise CompileFailure("resource", f"needs {meta['shared']} bytes of shared memory; "
                             f"sm_90 allows {MAX_SHARED_BYTES} per block")
    if meta["num_warps"] * 32 > MAX_THREADS:
        raise CompileFailure("resource", f"{meta['num_warps']} warps exceed {MAX_THREADS} threads per block")

    digest = md.hash[:16]
    os.makedirs(out_dir, exist_ok=True)
    artifact = os.path.join(os.path.abspath(out_dir), f"{md.name}-{digest}.cubin")
    tmp = f"{artifact}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(cubin)
    os.replace(tmp, artifact)
    return {"artifact": artifact, "name": md.name, "hash": digest, "meta": meta}


_PTXAS_INFO = re.compile(r"^ptxas info\s*:.*$|^\s+\d+ bytes stack frame.*$", re.MULTILINE)


def _without_ptxas_info(text: str) -> str:
    """Compiler output minus ptxas -v's info lines (printed for every successful compile)."""
    rest = _PTXAS_INFO.sub("", text)
    return "" if not rest.strip() else text


def _ptxas_usage(log: str) -> dict:
    """registers, spill_stores, spill_loads, stack_bytes (-1 when unknown) and
    wgmma_serialized (ptxas C7511: not enough registers to pipeline the wgmma chain)."""
    def grab(pattern):
        m = re.search(pattern, log)
        return int(m.group(1)) if m else -1
    return {
        "registers": grab(r"Used (\d+) registers"),
        "spill_stores": grab(r"(\d+) bytes spill stores"),
        "spill_loads": grab(r"(\d+) bytes spill loads"),
        "stack_bytes": grab(r"(\d+) bytes stack frame"),
        "wgmma_serialized": "C7511" in log or "wgmma.mma_async instructions are serialized" in log,
    }


def _ptx_num_params(ptx: str) -> int:
    """Parameters of the kernel's entry (the runtime arguments plus Triton's two hidden
    scratch pointers); -1 when unknown."""
    m = re.search(r"\.entry\s+\w+\s*\(([^)]*)\)", ptx or "")
    return len(re.findall(r"\.param\b", m.group(1))) if m else -1


def _ptx_target(ptx: str) -> Optional[str]:
    m = re.search(r"^\s*\.target\s+(\w+)", ptx or "", re.MULTILINE)
    return m.group(1) if m else None
