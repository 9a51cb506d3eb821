"""Compiles every Triton template variant for sm_90a (no GPU) and checks the metadata the C++
side relies on (docs/triton-backend.md)."""

import os
import re
import shutil
import struct
import subprocess

import pytest

triton = pytest.importorskip("triton")

from conftest import COMPILE_TIMES, base_params  # noqa: E402
from gemmtune.kernels import triton_gemm as tg  # noqa: E402
from gemmtune.triton_compile import CompileFailure, compile_gemm  # noqa: E402

EM_CUDA = 190

# dtype case -> (a_dtype, b_dtype, out_dtype, tf32, scale, tile overrides)
DTYPES = {
    "bf16": ("bf16", "bf16", "bf16", False, "none", dict(block_m=128, block_n=128, block_k=64)),
    "fp16": ("fp16", "fp16", "fp16", False, "none", dict(block_m=128, block_n=128, block_k=64)),
    "fp32": ("fp32", "fp32", "fp32", False, "none", dict(block_m=64, block_n=64, block_k=32, num_warps=4,
                                                          num_stages=2)),
    "tf32": ("fp32", "fp32", "fp32", True, "none", dict(block_m=128, block_n=128, block_k=32)),
    "e4m3_tensorwise": ("e4m3", "e4m3", "bf16", False, "tensorwise", dict(block_m=128, block_n=128, block_k=128)),
    "e4m3_rowwise": ("e4m3", "e4m3", "bf16", False, "rowwise", dict(block_m=128, block_n=128, block_k=128)),
    "e4m3_block": ("e4m3", "e4m3", "bf16", False, "block", dict(block_m=128, block_n=64, block_k=128)),
}
# epilogue case -> (has_c, has_bias, act)
EPILOGUES = {
    "plain": (False, False, "none"),
    "bias_relu": (False, True, "relu"),
    "c_gelu": (True, False, "gelu_tanh"),
    "c_bias_silu": (True, True, "silu"),
}
# (a_row, b_row, c_row, d_row): each dtype and each epilogue meets every A/B layout pair.
LAYOUTS = [(True, False, True, True), (True, True, True, False), (False, False, False, True),
           (False, True, False, False)]


def _params(kernel, dtype, epilogue, layout_index, **extra):
    a, b, out, tf32, scale, tile = DTYPES[dtype]
    has_c, has_bias, act = EPILOGUES[epilogue]
    a_row, b_row, c_row, d_row = LAYOUTS[layout_index % len(LAYOUTS)]
    p = base_params(kernel=kernel, a_dtype=a, b_dtype=b, out_dtype=out, tf32=tf32, scale=scale,
                    has_c=has_c, has_bias=has_bias, act=act, a_row=a_row, b_row=b_row, c_row=c_row, d_row=d_row)
    p.update(tile)
    p.update(extra)
    return p


# gemm_tiled's main-loop variants (even_k, i32_offsets): each layout meets each of them.
TILED_VARIANTS = [(False, False), (True, True), (True, False), (False, True)]


def _variant(index):
    even_k, i32 = TILED_VARIANTS[index % len(TILED_VARIANTS)]
    return dict(even_k=even_k, i32_offsets=i32), f"{'E' if even_k else 'k'}{'32' if i32 else '64'}"


def _cross():
    cases = []
    for i, dtype in enumerate(DTYPES):
        for j, epilogue in enumerate(EPILOGUES):
            layout = (i + j) % 4
            # Shift the variant per dtype so every (layout, variant) pair is compiled.
            extra, tag = _variant(layout + i)
            cases.append(pytest.param(_params("gemm_tiled", dtype, epilogue, i + j, **extra),
                                      id=f"gemm_tiled-{dtype}-{epilogue}-L{layout}-{tag}"))
            cases.append(pytest.param(_params("gemm_persistent", dtype, epilogue, i + j),
                                      id=f"gemm_persistent-{dtype}-{epilogue}-L{layout}"))
        # split-k partials (no epilogue in the GEMM)
        extra, tag = _variant(i + 1)
        cases.append(pytest.param(_params("gemm_tiled", dtype, "plain", i, split_k=4, **extra),
                                  id=f"gemm_tiled-{dtype}-splitk4-L{i % 4}-{tag}"))
    for j, epilogue in enumerate(EPILOGUES):
        for out, scale in (("bf16", "none"), ("fp16", "rowwise"), ("fp32", "tensorwise")):
            has_c, has_bias, act = EPILOGUES[epilogue]
            c_row, d_row = LAYOUTS[j][2:]
            p = {"kernel": "splitk_reduce", "out_dtype": out, "scale": scale, "has_c": has_c, "has_bias": has_bias,
                 "act": act, "c_row": c_row, "d_row": d_row, "split_k": 3, "num_warps": 4,
                 "ld_div16": {"c": True, "d": True}}
            cases.append(pytest.param(p, id=f"splitk_reduce-{out}-{scale}-{epilogue}"))
    return cases


def _check_cubin(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF", "not an ELF file"
    assert data[4] == 2, "not a 64-bit ELF"
    (machine, ) = struct.unpack_from("<H", data, 18)
    assert machine == EM_CUDA, f"e_machine {machine} is not EM_CUDA"
    (flags, ) = struct.unpack_from("<I", data, 48)
    assert flags & 0xFF == 90, f"cubin for sm_{flags & 0xFF}, not sm_90"
    return data


def _check_result(result, params, out_dir):
    kernel = params["kernel"]
    COMPILE_TIMES.append(result["compile_s"])
    assert result["name"] == kernel
    assert result["kernel"] == kernel
    artifact = result["artifact"]
    assert os.path.isabs(artifact)
    assert os.path.dirname(artifact) == os.path.abspath(out_dir)
    assert re.fullmatch(rf"{kernel}-[0-9a-f]{{16}}\.cubin", os.path.basename(artifact))
    assert result["hash"] in os.path.basename(artifact)
    _check_cubin(artifact)
    meta = result["meta"]
    for key in ("shared", "num_warps", "num_ctas", "global_scratch_size", "global_scratch_align",
                "profile_scratch_size", "profile_scratch_align"):
        assert isinstance(meta[key], int) and not isinstance(meta[key], bool), key
    assert meta["num_warps"] == params["num_warps"]
    assert meta["num_ctas"] == 1
    assert meta["shared"] > 0
    assert meta["shared"] <= 232448
    assert meta["global_scratch_align"] >= 1 and meta["profile_scratch_align"] >= 1
    assert meta["target"] == "sm_90a"
    assert meta["triton"] == triton.__version__
    runtime = tg.REDUCE_RUNTIME_ARGS if kernel == "splitk_reduce" else tg.RUNTIME_ARGS
    assert meta["num_params"] == len(runtime) + 2  # + global_scratch, profile_scratch
    if kernel == "gemm_persistent":
        assert meta["global_scratch_size"] > 0, "device-side TMA descriptors live in global scratch"
    assert meta["registers"] > 0
    assert result["compile_s"] > 0


@pytest.mark.parametrize("params", _cross())
def test_compile_variant(params, out_dir):
    result = compile_gemm(params, out_dir)
    _check_result(result, params, out_dir)


def test_every_layout_meets_every_tiled_variant():
    seen = set()
    for case in _cross():
        p = case.values[0]
        if p["kernel"] == "gemm_tiled" and p["split_k"] == 1:
            seen.add((p["a_row"], p["b_row"], p["even_k"], p["i32_offsets"]))
    assert len(seen) == 16, sorted(seen)


def test_main_loop_variants_are_distinct_artifacts(out_dir):
    # even_k and i32_offsets are constexprs: each value is its own cubin (the C++ artifact key
    # hashes the params, Triton's hash the constexprs).
    hashes = set()
    for even_k, i32 in TILED_VARIANTS:
        p = base_params(block_m=64, block_n=64, block_k=64, num_warps=4, b_row=True, even_k=even_k, i32_offsets=i32)
        r = compile_gemm(p, out_dir)
        _check_result(r, p, out_dir)
        hashes.add(r["hash"])
    assert len(hashes) == len(TILED_VARIANTS)


def _cuobjdump():
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    return path if os.access(path, os.X_OK) else shutil.which("cuobjdump")


def _k_loop_instructions(cubin, cuobjdump):
    """SASS instructions of the innermost backward-branch loop that holds the HGMMAs."""
    text = subprocess.run([cuobjdump, "-sass", cubin], check=True, capture_output=True, text=True).stdout
    ins = []
    for line in text.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    loops = []
    for addr, t in ins:
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x)([0-9a-f]+)", t)
        if m and int(m.group(1), 16) < addr:
            body = [x for a, x in ins if int(m.group(1), 16) <= a <= addr]
            if any("HGMMA" in x for x in body):
                loops.append(body)
    assert loops, "no K loop with HGMMA found"
    return min(loops, key=len)


def test_k_loop_is_lean(out_dir):
    # llama3-70b/down at m=128 (n=8192, k=28672; A row-major, B = W[n, k]), Inductor's pick
    # 64x128x128 w4 s4: the old template (masks, loop-carried 64-bit pointers) had 237 SASS
    # instructions per K step, Inductor's kernel 136; ours now 111 (EVEN_K) / 117 (K masked).
    cuobjdump = _cuobjdump()
    if not cuobjdump:
        pytest.skip("no cuobjdump")
    for even_k, limit in ((True, 140), (False, 150)):
        p = base_params(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=4, even_k=even_k,
                        i32_offsets=True, ld_div16={"a": True, "b": True, "c": False, "d": True})
        r = compile_gemm(p, out_dir)
        body = _k_loop_instructions(r["artifact"], cuobjdump)
        ops = [x.split()[1] if x.startswith("@") else x.split()[0] for x in body]
        assert sum(op.startswith("HGMMA") for op in ops) == 8
        assert sum(op.startswith("LDGSTS") for op in ops) == 24
        # The old template rebuilt a predicate per load from row/column/K masks (25 SEL per
        # step); now EVEN_K has none and a K mask costs one cp.async size select (2 SEL).
        sels = sum(op == "SEL" or op.startswith("SEL.") for op in ops)
        assert sels <= (0 if even_k else 2), f"even_k={even_k}: {sels} SEL in the K loop: masks are back"
        assert len(body) <= limit, f"even_k={even_k}: {len(body)} instructions per K step (limit {limit})"


def test_argument_order_is_the_documented_abi():
    gemm = ["a", "b", "c", "d", "bias", "scale_a", "scale_b", "workspace", "M", "N", "K",
            "lda", "ldb", "ldc", "ldd", "alpha", "beta"]
    assert list(tg.RUNTIME_ARGS) == gemm
    assert tg.gemm_tiled.arg_names[:len(gemm)] == gemm
    assert tg.gemm_persistent.arg_names[:len(gemm)] == gemm
    reduce = ["workspace", "c", "d", "bias", "scale_a", "scale_b", "M", "N", "ldc", "ldd", "alpha", "beta"]
    assert list(tg.REDUCE_RUNTIME_ARGS) == reduce
    assert tg.splitk_reduce.arg_names[:len(reduce)] == reduce
    # Everything after the runtime arguments is a constexpr (no extra runtime parameter).
    for fn, n in ((tg.gemm_tiled, len(gemm)), (tg.gemm_persistent, len(gemm)), (tg.splitk_reduce, len(reduce))):
        assert all(p.is_constexpr for p in fn.params[n:]), fn.__name__
        assert not any(p.is_constexpr for p in fn.params[:n]), fn.__name__


@pytest.mark.parametrize("kernel", ["gemm_tiled", "gemm_persistent"])
def test_odd_shapes_without_divisibility_hints(kernel, out_dir):
    # The C++ side passes ld_div16 / dims_div16 false for odd leading dimensions and shapes.
    ld = {"a": kernel == "gemm_persistent", "b": kernel == "gemm_persistent", "c": False, "d": False}
    p = base_params(kernel=kernel, ld_div16=ld, dims_div16={"m": False, "n": False, "k": False},
                    has_bias=True, act="relu", block_m=64, block_n=64, block_k=32, num_warps=4)
    _check_result(compile_gemm(p, out_dir), p, out_dir)


def test_e5m2_and_mixed_fp8(out_dir):
    for a, b in (("e5m2", "e5m2"), ("e4m3", "e5m2")):
        p = base_params(a_dtype=a, b_dtype=b, scale="tensorwise", block_k=128)
        _check_result(compile_gemm(p, out_dir), p, out_dir)


def test_kernel_name_from_request_argument(out_dir):
    p = base_params()
    del p["kernel"]
    result = compile_gemm(p, out_dir, kernel="gemm_tiled")
    _check_result(result, dict(p, kernel="gemm_tiled"), out_dir)


def test_cuobjdump_says_sm_90a(out_dir):
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.access(cuobjdump, os.X_OK):
        cuobjdump = shutil.which("cuobjdump")
    if not cuobjdump:
        pytest.skip("no cuobjdump")
    result = compile_gemm(base_params(kernel="gemm_persistent"), out_dir)
    text = subprocess.run([cuobjdump, "-elf", result["artifact"]], check=True, capture_output=True,
                          text=True).stdout
    assert "sm=90a" in text or "sm_90a" in text, text[:400]


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("change, message", [
    (dict(kernel="gemm_nope"), "params.kernel"),
    (dict(a_dtype="int8"), "params.a_dtype"),
    (dict(act="tanh"), "params.act"),
    (dict(block_m="128"), "params.block_m"),
    (dict(has_bias=1), "params.has_bias"),
    (dict(even_k=1), "params.even_k"),
    (dict(i32_offsets="yes"), "params.i32_offsets"),
    (dict(num_warps=6), "params.num_warps"),
    (dict(a_dtype="bf16", b_dtype="fp16"), "b_dtype"),
    (dict(bogus=True), "unknown field"),
    (dict(ld_div16={"x": True}), "params.ld_div16"),
    (dict(kernel="gemm_persistent", split_k=2), "params.split_k"),
    (dict(kernel="gemm_persistent", ld_div16={"a": False, "b": True}), "ld_div16"),
    (dict(kernel="gemm_persistent", num_sms=0), "params.num_sms"),
    (dict(scale="block"), "params.scale"),  # bf16 inputs take no scales
    (dict(a_dtype="e4m3", b_dtype="e4m3", scale="block", block_k=256), "params.block_k"),
])
def test_bad_requests(change, message, out_dir):
    with pytest.raises(CompileFailure) as err:
        compile_gemm(base_params(**change), out_dir)
    assert err.value.kind == "bad_request"
    assert message in err.value.message


@pytest.mark.parametrize("field", ["a_dtype", "b_row", "block_k", "out_dtype"])
def test_missing_fields(field, out_dir):
    p = base_params()
    del p[field]
    with pytest.raises(CompileFailure) as err:
        compile_gemm(p, out_dir)
    assert err.value.kind == "bad_request"
    assert f"params.{field}: missing" in err.value.message


def test_splitk_reduce_needs_split_k(out_dir):
    with pytest.raises(CompileFailure) as err:
        compile_gemm({"kernel": "splitk_reduce", "out_dtype": "bf16"}, out_dir)
    assert err.value.kind == "bad_request" and "split_k" in err.value.message


def test_non_power_of_two_block_does_not_compile(out_dir):
    with pytest.raises(CompileFailure) as err:
        compile_gemm(base_params(block_m=48), out_dir)
    assert err.value.kind == "compile"
    assert "power of 2" in err.value.message.splitlines()[0]


def test_block_k_too_small_for_the_mma_does_not_compile(out_dir):
    with pytest.raises(CompileFailure) as err:
        compile_gemm(base_params(block_k=8), out_dir)
    assert err.value.kind == "compile"


@pytest.mark.parametrize("change", [
    dict(block_m=256, block_n=256, block_k=64, num_warps=4),   # accumulator: 512 registers per thread
    dict(block_m=256, block_n=256, block_k=256, num_stages=4),  # shared memory, refused before compiling
    dict(num_warps=64),                                         # 2048 threads
])
def test_resources_refused_without_compiling(change, out_dir):
    p = base_params(**change)
    with pytest.raises(CompileFailure) as err:
        compile_gemm(p, out_dir)
    assert err.value.kind == ("bad_request" if p["num_warps"] > 32 else "resource")


@pytest.mark.parametrize("kernel", ["gemm_tiled", "gemm_persistent"])
def test_too_much_shared_memory_after_compiling(kernel, out_dir):
    # 5 stages of (256x64 + 64x128) bf16 = 240 KiB > 227 KiB
    with pytest.raises(CompileFailure) as err:
        compile_gemm(base_params(kernel=kernel, block_m=256, block_n=128, block_k=64, num_stages=5), out_dir)
    assert err.value.kind == "resource"
    assert "shared memory" in err.value.message
    assert not os.path.exists(out_dir) or not os.listdir(out_dir), "no artifact for a failed compile"
