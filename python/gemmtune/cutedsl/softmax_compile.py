"""Ahead-of-time compilation of gemmtune's CuTe DSL softmax (softmax_sm90.py) for sm_90a.

    from gemmtune.cutedsl.softmax_compile import compile_softmax, sources_digest
    r = compile_softmax(params, "/abs/out_dir")   # same result shape as compile.compile_gemm

The GEMM's route A (compile.py, docs/cutedsl.md): cute.compile on fake tensors (dynamic rows,
cols and ld), export_to_c -> object + header, our shim (softmax_shim.cpp, C ABI softmax_abi.h),
linked by g++ into a kernel .so that exports only the gt_cutedsl_softmax_* entry points and
needs the same shared runtime library (compile.runtime()) as the GEMM kernels.

The compile worker routes a "cutedsl" compile request here when params["op"] == "softmax".
params (all required):
    op: "softmax"; in_dtype, out_dtype: "bf16" | "fp16" | "fp32"
    vec, chunks, tpr, threads, cluster (int), online, packed (bool): the kernel's SoftmaxConfig
    virt (bool, default false): virtual columns (rows need not start on a vec pack: any ld)
    src: sources_digest() of the C++ side, which must equal this side's (the files that make an
         artifact: the C++ key hashes them through it)
Failures raise compile.CompileFailure(kind, message) with kind bad_request, compile or link.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from . import compile as base
from .compile import CompileFailure

HERE = base.HERE
DTYPES = ("bf16", "fp16", "fp32")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# The files (relative to the python dir) that determine a softmax artifact's bytes besides the
# params and the toolchain; src/backends/cutedsl/softmax.cpp hashes the same list the same way.
SOURCES = ("gemmtune/cutedsl/softmax_sm90.py", "gemmtune/cutedsl/softmax_compile.py",
           "gemmtune/cutedsl/softmax_shim.cpp", "gemmtune/cutedsl/softmax_abi.h",
           "gemmtune/cutedsl/compile.py", "gemmtune/cutedsl/runtime.cpp", "gemmtune/cutedsl/shim_common.h")

_SPEC = {"op": str, "in_dtype": str, "out_dtype": str, "vec": int, "chunks": int, "tpr": int,
         "threads": int, "cluster": int, "online": bool, "packed": bool, "virt": bool, "src": str}


def sources_digest() -> str:
    """16 hex digits of SHA-256 over SOURCES: "<rel>\\n<size>\\n<bytes>\\n" each."""
    root = os.path.dirname(os.path.dirname(HERE))
    h = hashlib.sha256()
    for rel in SOURCES:
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        h.update(f"{rel}\n{len(data)}\n".encode() + data + b"\n")
    return h.hexdigest()[:16]


def normalize(params: Any) -> dict:
    """Checked params (every field required); raises CompileFailure("bad_request")."""
    p = base.check_fields(params, _SPEC, {"virt": False})
    if p["op"] != "softmax":
        raise CompileFailure("bad_request", f"params.op: {p['op']!r} is not 'softmax'")
    for f in ("in_dtype", "out_dtype"):
        if p[f] not in DTYPES:
            raise CompileFailure("bad_request", f"params.{f}: {p[f]!r} not in {DTYPES}")
    try:
        kernel_config(p).check(DTYPE_BYTES[p["in_dtype"]])
    except ValueError as exc:
        raise CompileFailure("bad_request", f"params: {exc}")
    return p


def kernel_config(p: dict):
    from .softmax_sm90 import SoftmaxConfig
    return SoftmaxConfig(vec=p["vec"], chunks=p["chunks"], tpr=p["tpr"], threads=p["threads"],
                         cluster=p["cluster"], online=p["online"], packed=p["packed"], virt=p["virt"])


def config_text(p: dict) -> str:
    """Canonical one-line text of normalized params: what the .so reports as its config."""
    return json.dumps(p, sort_keys=True, separators=(",", ":"))


def instance_name(p: dict) -> str:
    return "gt_cutedsl_sm_" + hashlib.sha256(config_text(p).encode()).hexdigest()[:16]


def _fake_args(p: dict):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor
    dt = {"bf16": cutlass.BFloat16, "fp16": cutlass.Float16, "fp32": cutlass.Float32}
    # x and y share rows, cols and ld at run time but are separate fake tensors (their own structs).
    def tensor(name):
        rows, cols = cute.sym_int32(), cute.sym_int32()
        ld = cute.sym_int64(divisibility=1 if p["virt"] else p["vec"])  # virt: any ld
        return make_fake_tensor(dt[p[name]], (rows, cols), stride=(ld, 1), assumed_align=16)
    return tensor("in_dtype"), tensor("out_dtype"), cutlass.Float32(1.0), make_fake_stream()


def _shim_source(p: dict, prefix: str, header: str) -> str:
    fill = []
    for var, name, ptr in (("tx", "x", "args->x"), ("ty", "y", "args->y")):
        f = base._struct_fields(header, prefix, name)
        if f != {"data": 0, "dynamic_shapes": 2, "dynamic_strides": 1}:
            raise CompileFailure("compile", f"struct of {name}: unexpected fields {f}")
        fill.append(f"  {prefix}_Tensor_{name}_t {var};\n"
                    f"  {var}.data = const_cast<void*>(static_cast<const void*>({ptr}));\n"
                    f"  {var}.dynamic_shapes[0] = static_cast<int32_t>(args->rows);\n"
                    f"  {var}.dynamic_shapes[1] = static_cast<int32_t>(args->cols);\n"
                    f"  {var}.dynamic_strides[0] = args->ld;")
    import re
    wm = re.search(r"static inline int32_t cute_dsl_" + re.escape(prefix) + r"_wrapper\(([^)]*)\)", header)
    if not wm:
        raise CompileFailure("compile", "export header lacks the wrapper function")
    params = [x.strip() for x in wm.group(1).split(",")]
    if params[1:] != [f"{prefix}_Tensor_x_t *x", f"{prefix}_Tensor_y_t *y", "float scale", "cudaStream_t stream"]:
        raise CompileFailure("compile", f"unexpected wrapper signature: {params}")
    with open(os.path.join(HERE, "softmax_shim.cpp")) as f:
        src = f.read()
    cfg = config_text(p).replace("\\", "\\\\").replace('"', '\\"')
    return (src.replace("@PREFIX@", prefix).replace("@CONFIG@", cfg).replace("@FILL@", "\n".join(fill))
            .replace("@MAX_COLS@", str(kernel_config(p).max_cols)).replace("@LD_ALIGN@", str(1 if p["virt"] else p["vec"])))


def compile_softmax(params: Any, out_dir: str) -> dict:
    p = normalize(params)
    if not os.path.isabs(out_dir):
        raise CompileFailure("bad_request", "out_dir must be an absolute path")
    mine = sources_digest()
    if p["src"] != mine:
        raise CompileFailure("bad_request", f"params.src {p['src']!r}: the worker's softmax sources are {mine!r} "
                                            "(the C++ side hashed other files: GEMMTUNE_PYTHON_DIR?)")
    os.makedirs(out_dir, exist_ok=True)
    base.toolchain()  # the DSL's availability and versions, before any work
    from .softmax_sm90 import HopperSoftmax
    cfg = kernel_config(p)
    name = instance_name(p)
    out = base.build_instance(
        HopperSoftmax(cfg), _fake_args(p), out_dir, name, lambda header: _shim_source(p, name, header),
        ["gt_cutedsl_softmax_abi_version", "gt_cutedsl_softmax_config", "gt_cutedsl_softmax_max_cols",
         "gt_cutedsl_softmax_can_implement", "gt_cutedsl_softmax_run", "gt_cutedsl_softmax_status_text"])
    out["meta"] = {"config": config_text(p), "toolchain": base.toolchain_text(), "max_cols": cfg.max_cols}
    return out


def main(argv: list[str]) -> int:
    """python -m gemmtune.cutedsl.softmax_compile '<params json>' OUT_DIR (params.src may be
    "auto": this side's digest): one compile, result on stdout."""
    if len(argv) != 3:
        print(main.__doc__, file=sys.stderr)
        return 2
    try:
        params = json.loads(argv[1])
        if isinstance(params, dict) and params.get("src") == "auto":
            params["src"] = sources_digest()
        print(json.dumps(compile_softmax(params, os.path.abspath(argv[2]))))
    except CompileFailure as exc:
        print(f"{exc.kind}: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
