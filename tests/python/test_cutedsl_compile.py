"""Compiles representative CuTe DSL GEMM variants for sm_90a on the CPU (no GPU) through
gemmtune.cutedsl.compile and checks what the C++ loader relies on (docs/cutedsl.md): a kernel .so
that exports exactly the gt_cutedsl_* entry points, needs only the shared runtime library and
libc, reports its config, embeds an sm_90a cubin, and checks its arguments. Skipped without the
CuTe DSL (python/requirements-cutedsl.txt)."""

import ctypes
import json
import os
import re
import subprocess
import sys
import time

import pytest

os.environ["CUTE_DSL_ARCH"] = "sm_90a"  # before cutlass is imported (gemmtune.cutedsl.compile says why)
pytest.importorskip("cutlass.cute")

from gemmtune.cutedsl import compile as cc  # noqa: E402

EM_CUDA = 190
ENTRY_POINTS = {"gt_cutedsl_abi_version", "gt_cutedsl_config", "gt_cutedsl_can_implement", "gt_cutedsl_run",
                "gt_cutedsl_status_text"}


def params(**kw):
    p = {"a_dtype": "bf16", "b_dtype": "bf16", "d_dtype": "bf16", "a_row": True, "b_row": False, "d_row": True,
         "tile_m": 128, "tile_n": 128}
    p.update(kw)
    return p


# Representative variants: every dtype pairing, layout class, epilogue piece, cluster shape,
# swap-AB (bias and rowwise scales then run along the kernel's M) and an explicit stage count.
VARIANTS = {
    "bf16_plain": params(),
    "bf16_c2x1_256_c_bias_gelu": params(tile_n=256, cluster_m=2, has_c=True, bias=True, act="gelu_tanh"),
    "fp16_layouts_1x2_silu": params(a_dtype="fp16", b_dtype="fp16", d_dtype="fp16", a_row=False, b_row=True,
                                    d_row=False, c_row=True, has_c=True, tile_m=64, tile_n=64, cluster_n=2,
                                    act="silu"),
    "bf16_swap_decode_bias": params(tile_m=128, tile_n=32, swap_ab=True, bias=True, act="relu"),
    "e4m3_tensorwise": params(a_dtype="e4m3", b_dtype="e4m3", scale="tensorwise"),
    # tile N 192: the mainloop that promotes each batch once it retired (one register tile).
    "e4m3_192_c2x1_bias": params(a_dtype="e4m3", b_dtype="e4m3", scale="tensorwise", tile_n=192, cluster_m=2,
                                 bias=True),
    "e4m3_rowwise_swap": params(a_dtype="e4m3", b_dtype="e4m3", scale="rowwise", swap_ab=True, tile_m=64,
                                tile_n=64, bias=True),
    "e5m2_e4m3_fp16_stages3": params(a_dtype="e5m2", b_dtype="e4m3", d_dtype="fp16", stages=3, act="relu"),
    "e4m3_block_c2x1_c_bias": params(a_dtype="e4m3", b_dtype="e4m3", scale="block", cluster_m=2, has_c=True,
                                     bias=True, act="silu"),
    "e4m3_block_swap": params(a_dtype="e4m3", b_dtype="e4m3", scale="block", swap_ab=True, tile_m=64, tile_n=32),
    # tile N 192 with block scales: three 64-column bands, one B scale each (scale_bands).
    "e4m3_block_192_c2x1": params(a_dtype="e4m3", b_dtype="e4m3", scale="block", tile_n=192, cluster_m=2),
}

TIMES = {}


def _dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def _needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def _memfd_load(path):
    fd = os.memfd_create(os.path.basename(path))
    with open(path, "rb") as f:
        os.write(fd, f.read())
    return ctypes.CDLL(f"/proc/self/fd/{fd}", mode=os.RTLD_LOCAL)


with open(os.path.join(os.path.dirname(cc.__file__), "gt_cutedsl_abi.h")) as _f:
    ABI_VERSION = int(re.search(r"#define GT_CUTEDSL_ABI_VERSION (\d+)", _f.read()).group(1))


class Args(ctypes.Structure):  # gt_cutedsl_abi.h GtCutedslArgs
    _fields_ = ([("abi_version", ctypes.c_int32), ("device", ctypes.c_int32), ("sm_count", ctypes.c_int32),
                 ("flags", ctypes.c_int32), ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64)]
                + [(x, ctypes.c_void_p) for x in ("a", "b", "c", "d", "bias", "scale_a", "scale_b")]
                + [(x, ctypes.c_int64) for x in ("lda", "ldb", "ldc", "ldd")]
                + [("alpha", ctypes.c_float), ("beta", ctypes.c_float)])


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_compiles_to_a_loadable_so(name, tmp_path):
    p = VARIANTS[name]
    t0 = time.perf_counter()
    r = cc.compile_gemm(p, str(tmp_path))
    TIMES[name] = time.perf_counter() - t0
    so = r["artifact"]
    assert os.path.isfile(so) and so.startswith(str(tmp_path))
    assert r["meta"]["config"] == cc.config_text(cc.normalize(p))
    assert "arch=sm_90a" in r["meta"]["toolchain"]
    assert set(r["times"]) == {"trace_compile", "export", "link"}
    # Exactly our entry points; needs the shared runtime by soname and nothing beyond libc.
    assert _dynamic_symbols(so) == ENTRY_POINTS
    rt = r["runtime"]
    assert os.path.basename(rt["path"]) == rt["soname"]
    assert set(_needed(so)) <= {rt["soname"], "libc.so.6", "ld-linux-x86-64.so.2", "libm.so.6"}
    assert rt["soname"] in _needed(so)
    assert os.path.getsize(so) < 200 * 1024, "a kernel .so carries no CUDA runtime of its own"
    # The object embeds a CUDA ELF (the cubin) for sm_90a.
    with open(os.path.join(str(tmp_path), r["name"] + ".o"), "rb") as f:
        obj = f.read()
    i = obj.find(b"\x7fELF", 64)
    assert i > 0
    assert int.from_bytes(obj[i + 18:i + 20], "little") == EM_CUDA
    assert (int.from_bytes(obj[i + 48:i + 52], "little") >> 8) & 0xff == 90 or b"sm_90a" in obj

    # Loads (no GPU needed) with its runtime, reports its config, checks arguments.
    _memfd_load(rt["path"])
    lib = _memfd_load(so)
    lib.gt_cutedsl_config.restype = ctypes.c_char_p
    lib.gt_cutedsl_status_text.restype = ctypes.c_char_p
    assert lib.gt_cutedsl_abi_version() == ABI_VERSION
    assert lib.gt_cutedsl_config().decode() == r["meta"]["config"]
    buf = ctypes.create_string_buffer(1 << 12)
    addr = (ctypes.addressof(buf) + 15) // 16 * 16
    fp8 = p["a_dtype"] in ("e4m3", "e5m2")
    a = Args(abi_version=ABI_VERSION, m=300, n=200, k=256, a=addr, b=addr, c=addr, d=addr, bias=addr, scale_a=addr,
             scale_b=addr, lda=256 if p["a_row"] else 304, ldb=208 if p["b_row"] else 256, ldc=208, ldd=208,
             alpha=1.0)
    if not p["d_row"]:
        a.ldd = 304
        a.ldc = 208 if p.get("c_row", True) else 304
    assert lib.gt_cutedsl_can_implement(ctypes.byref(a)) == 0, lib.gt_cutedsl_status_text(
        lib.gt_cutedsl_can_implement(ctypes.byref(a)))
    bad = Args.from_buffer_copy(a)
    bad.abi_version = ABI_VERSION + 1
    assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 1
    bad = Args.from_buffer_copy(a)
    bad.flags = 1  # GT_CUTEDSL_OVERLAP_PREVIOUS
    assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 0
    bad.flags = 2
    assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 2
    bad = Args.from_buffer_copy(a)
    bad.a = addr + (1 if fp8 else 2)
    assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 3
    bad = Args.from_buffer_copy(a)
    bad.m = 0
    assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 2
    if p.get("scale") == "block":  # the scales' int32 indexing: m * ceil(k / 128) must fit
        bad = Args.from_buffer_copy(a)
        bad.m, bad.k, bad.ldd, bad.ldc = 2**30, 384, 208, 208
        assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 2
        bad.k = 128
        assert lib.gt_cutedsl_can_implement(ctypes.byref(bad)) == 0
    if not os.path.exists("/dev/nvidia0"):
        st = lib.gt_cutedsl_run(ctypes.byref(a), None)
        assert st != 0 and lib.gt_cutedsl_status_text(st)


def test_compile_times_reported():
    if TIMES:
        print("\ncutedsl compile s per variant: " + ", ".join(f"{k}={v:.2f}" for k, v in sorted(TIMES.items())),
              file=sys.stderr)


@pytest.mark.parametrize("bad,kind,text", [
    ({"tile_m": 256}, "bad_request", "tile_m"),
    ({"tile_n": 48}, "bad_request", "tile_n"),
    ({"cluster_m": 2, "cluster_n": 4}, "bad_request", "cluster"),
    ({"stages": 9}, "resource", "stages"),
    ({"a_dtype": "e4m3", "b_dtype": "e4m3", "b_row": True}, "bad_request", "K-major"),
    ({"a_dtype": "fp32", "b_dtype": "fp32"}, "bad_request", "a_dtype"),
    ({"d_dtype": "fp32"}, "bad_request", "d_dtype"),
    ({"scale": "rowwise"}, "bad_request", "fp8"),
    ({"scale": "block"}, "bad_request", "fp8"),
    ({"a_dtype": "e4m3", "b_dtype": "e4m3", "scale": "block", "tile_n": 160}, "bad_request", "block scales"),
    ({"act": "tanh"}, "bad_request", "act"),
    ({"tile_m": "128"}, "bad_request", "tile_m"),
    ({"bogus": 1}, "bad_request", "bogus"),
])
def test_bad_params_fail_with_the_field(bad, kind, text, tmp_path):
    with pytest.raises(cc.CompileFailure) as e:
        cc.compile_gemm(params(**bad), str(tmp_path))
    assert e.value.kind == kind
    assert text in e.value.message


def test_worker_serves_cutedsl(tmp_path):
    """The shared compile worker with GEMMTUNE_WORKER_BACKENDS=cutedsl: ready line, one compile."""
    env = dict(os.environ, GEMMTUNE_WORKER_BACKENDS="cutedsl")
    req = {"id": 3, "op": "compile", "backend": "cutedsl", "params": params(tile_m=64, tile_n=64),
           "out_dir": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "gemmtune.worker"], input=json.dumps(req) + "\n",
                          capture_output=True, text=True, env=env, timeout=300)
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert lines[0]["ready"] and lines[0]["versions"]["cutedsl"]
    assert "flavor=" in lines[0]["versions"]["cutedsl_toolchain"]
    assert "triton" not in lines[0]["versions"]
    assert lines[1]["id"] == 3 and lines[1]["ok"], lines[1]
    assert os.path.isfile(lines[1]["artifact"]) and lines[1]["runtime"]["soname"].startswith("libgt_cutedsl_rt_")


@pytest.mark.parametrize("tile_m,tile_n", [(64, 64), (128, 128), (128, 256), (64, 32)])
def test_epilogue_coordinates_are_per_thread(tile_m, tile_n):
    """The fused epilogue reads C, bias and rowwise scales at the coordinates acc_coords() gives
    each consumer thread. Over all consumer threads they must cover the tile exactly once, with
    as many coordinates per thread as the accumulator fragment has registers (a warpgroup-wide
    slice gave every thread its warpgroup's thread-0 coordinates: 72% of a bias+gelu output
    wrong on the H200). Evaluated at trace time (static layouts), no GPU."""
    import cutlass
    import cutlass.cute as cute
    import cutlass.tensor_utils as tensor_utils
    from gemmtune.cutedsl.gemm_sm90 import KernelConfig, acc_coords, make_tiled_mma

    cfg = KernelConfig(tile_m=tile_m, tile_n=tile_n)
    k_major = tensor_utils.LayoutEnum.ROW_MAJOR  # A (M, K) and B (N, K) K-major
    threads = 128 * (tile_m // 64)
    seen, per_thread, acc_size = [], set(), []

    @cute.jit
    def probe():
        mma = make_tiled_mma(cfg, cutlass.BFloat16, cutlass.BFloat16, k_major, k_major)
        tile = cute.make_identity_tensor((tile_m, tile_n))
        for wg in cutlass.range_constexpr(tile_m // 64):
            acc_size.append(cute.size(mma.get_slice(wg * 128).partition_C(tile)))
        for t in cutlass.range_constexpr(threads):
            c = acc_coords(mma, t, tile)
            coords = [tuple(int(x) for x in c[i]) for i in range(cute.size(c))]
            per_thread.add(len(coords))
            seen.extend(coords)

    cute.compile(probe)
    assert per_thread == set(acc_size[:1]) and len(set(acc_size)) == 1
    assert len(seen) == tile_m * tile_n
    assert set(seen) == {(m, n) for m in range(tile_m) for n in range(tile_n)}


def test_light_header_keeps_declarations_and_drops_heavy_includes():
    header = ("#pragma once\n\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <stdio.h>\n"
              "typedef struct { void *data; } x_Tensor_a_t;\n")
    light = cc._light_header(header)
    assert "#include <cuda_runtime_api.h>" in light.split("\n")
    assert "cuda_fp16.h" not in light and "<cuda_runtime.h>" not in light
    assert "typedef struct { void *data; } x_Tensor_a_t;" in light and "#include <stdio.h>" in light
    # a 16-bit scalar type in a declaration keeps cuda_fp16.h; a header without the includes is unchanged
    half = header + "void f(__half scale);\n"
    assert "#include <cuda_fp16.h>" in cc._light_header(half).split("\n")
    assert cc._light_header("typedef int t;\n") == "typedef int t;\n"


@pytest.mark.parametrize("tile_m,tile_n,mode", [(128, 128, 0), (64, 64, 0), (64, 32, 0), (128, 32, 1), (64, 64, 1)])
def test_block_scale_groups_hold_for_every_thread(tile_m, tile_n, mode):
    """Block scales: the kernel loads one scale per group of a thread's accumulator registers
    (scale_groups, worked out on thread 0) at its representative register's coordinate. For every
    consumer thread, each register's coordinate along the scales' mode (0: rows, block_m; 1:
    columns, block_n) must equal its representative's: else a register is scaled with another
    row's scale. And the groups are few: 2 rows a thread; 2 columns per 8 of the tile."""
    import cutlass
    import cutlass.cute as cute
    import cutlass.tensor_utils as tensor_utils
    from gemmtune.cutedsl.gemm_sm90 import KernelConfig, acc_coords, make_tiled_mma, scale_groups

    cfg = KernelConfig(tile_m=tile_m, tile_n=tile_n)
    k_major = tensor_utils.LayoutEnum.ROW_MAJOR
    threads = 128 * (tile_m // 64)
    groups, bad = [], []

    @cute.jit
    def probe():
        mma = make_tiled_mma(cfg, cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, k_major, k_major)
        reps, group_of = scale_groups(mma, (tile_m, tile_n), mode)
        groups.append((reps, group_of))
        tile = cute.make_identity_tensor((tile_m, tile_n))
        for t in cutlass.range_constexpr(threads):
            c = acc_coords(mma, t, tile)
            along = [int(c[i][mode]) for i in range(cute.size(c))]
            bad.extend((t, i) for i, x in enumerate(along) if x != along[reps[group_of[i]]])

    cute.compile(probe)
    reps, group_of = groups[0]
    assert not bad, f"registers grouped with another row / column: {bad[:8]}"
    assert len(reps) == (2 if mode == 0 else tile_n // 4)
    assert sorted(set(group_of)) == list(range(len(reps)))


@pytest.mark.parametrize("tile_m,tile_n,bands", [(128, 192, 3), (64, 192, 3), (128, 128, 1), (64, 32, 1)])
def test_block_scale_bands_hold_for_every_thread_and_offset(tile_m, tile_n, bands):
    """Block scales with tile N 192: the tile starts at column 0 or 64 of a 128-wide scale block,
    so its columns straddle two blocks. scale_bands cuts it into bands of gcd(tile N, 128)
    columns, worked out on thread 0: for every consumer thread, each register's band must be that
    of its column (column // width), and at either offset every band must lie in one block (else a
    register is scaled with its neighbour block's scale)."""
    import math

    import cutlass
    import cutlass.cute as cute
    import cutlass.tensor_utils as tensor_utils
    from gemmtune.cutedsl.gemm_sm90 import (SCALE_BLOCK, KernelConfig, acc_coords, block_scale_counts,
                                            make_tiled_mma, scale_bands)

    cfg = KernelConfig(tile_m=tile_m, tile_n=tile_n)
    k_major = tensor_utils.LayoutEnum.ROW_MAJOR
    threads = 128 * (tile_m // 64)
    found, cols, bad = [], [], []

    @cute.jit
    def probe():
        mma = make_tiled_mma(cfg, cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, k_major, k_major)
        band_of, w = scale_bands(mma, (tile_m, tile_n), 0)
        found.append((band_of, w))
        tile = cute.make_identity_tensor((tile_m, tile_n))
        for t in cutlass.range_constexpr(threads):
            c = acc_coords(mma, t, tile)
            cols.append([int(c[i][1]) for i in range(cute.size(c))])

    cute.compile(probe)
    band_of, w = found[0]
    for t, along in enumerate(cols):
        for i, col in enumerate(along):
            for start in range(0, SCALE_BLOCK, w):  # where the tile starts within a block
                first = start + band_of[i] * w  # its band's first column
                if col // w != band_of[i] or (start + col) // SCALE_BLOCK != first // SCALE_BLOCK:
                    bad.append((t, i, start))
    assert not bad, f"registers scaled with another block's scale: {bad[:8]}"
    assert sorted(set(band_of)) == list(range(bands))
    assert w == math.gcd(tile_n, SCALE_BLOCK)
    # Per k block the consumers read one 1x128 scale per tile row and one block scale per band:
    # block_scale_counts (the scale ring holds tile rows x chunk of the former).
    assert block_scale_counts(KernelConfig(tile_m=tile_m, tile_n=tile_n, scale="block_m")) == (tile_m, bands)
    assert block_scale_counts(KernelConfig(tile_m=64, tile_n=tile_n, scale="block_n")) == (tile_n, 1)  # swap-AB


@pytest.mark.parametrize("extent", [32, 64, 96, 128, 192, 256])
def test_scale_ring_box_covers_every_band(extent):
    """The scale ring's box of B's block scales spans scale_blocks(cfg) 128x128 blocks from the
    tile's first: wherever the tile starts within a block (a multiple of gcd(extent, 128)), the
    blocks it touches must fit in the box (else a band reads the next tile's stage padding), and
    some start must need them all (else the box is wider than needed)."""
    import math

    from gemmtune.cutedsl.gemm_sm90 import SCALE_BLOCK, KernelConfig, scale_blocks

    w = math.gcd(extent, SCALE_BLOCK)
    touched = [(start + extent - 1) // SCALE_BLOCK + 1 for start in range(0, SCALE_BLOCK, w)]
    cfg = KernelConfig(tile_m=64, tile_n=extent, scale="block_m")
    assert scale_blocks(cfg) == max(touched)
    if extent <= 128:  # swap-AB: the blocks run along tile M
        assert scale_blocks(KernelConfig(tile_m=extent, tile_n=64, scale="block_n")) == max(touched)


@pytest.mark.parametrize("tile_m,tile_n,scale,stages,chunk", [
    (128, 128, "block_m", 6, 8), (128, 192, "block_m", 5, 4), (64, 128, "block_m", 8, 8),
    (64, 32, "block_n", 17, 8), (128, 128, "tensorwise", 6, 0)])
def test_plan_smem_fits_the_scale_ring(tile_m, tile_n, scale, stages, chunk):
    """fp8, bf16 out: the stages fit beside the epilogue and the scale ring at its smallest chunk
    (the C++ mirror, tests/host/test_cutedsl_configs.cpp, counts the same), and the chunk grows
    to 8 only where that still fits; B's box (chunk x blocks) fits its 32-float stage."""
    from gemmtune.cutedsl.gemm_sm90 import (SMEM_BYTES, SMEM_RESERVED, KernelConfig, plan_smem, scale_blocks,
                                            scale_ring_bytes)

    cfg = KernelConfig(tile_m=tile_m, tile_n=tile_n, scale=scale)
    tile_k, got_stages, got_chunk = plan_smem(cfg, 1, 2)
    assert (tile_k, got_stages, got_chunk) == (128, stages, chunk)
    used = got_stages * (tile_m + tile_n) * 128 + 2 * min(tile_m, 128) * min(32, tile_n) * 2
    assert used + scale_ring_bytes(cfg, got_chunk) <= SMEM_BYTES - SMEM_RESERVED
    assert got_chunk * scale_blocks(cfg) <= 32


# The shared runtime library's entry points, as the fake kernels below stand in for it.
RUNTIME_STUBS = r"""
int gt_cutedsl_rt_set_device(int d) { return 0; }
int gt_cutedsl_rt_get_last_error(void) { return 0; }
const char* gt_cutedsl_rt_error_name(int e) { return "none"; }
const char* gt_cutedsl_rt_error_string(int e) { return "none"; }
int gt_cutedsl_rt_sm_count(int d, int* out) { *out = 132; return 0; }
"""

# A stand-in for one instance's exported object and for the runtime library: records what the
# shim passes to the host entry (no GPU, no DSL trace).
FAKE_KERNEL = r"""
#include <stdint.h>
#include <string.h>
#define X __attribute__((visibility("default")))
X unsigned char fake_seen[7][32];
X int fake_sizes[7];
X float fake_alpha, fake_beta;
X int32_t fake_max_clusters, fake_pdl;
X void* fake_stream;
X int fake_calls;
void fake_init(void** a) { *(int*)a[1] = 0; }
void fake_load(void** a) { *(int*)a[2] = 0; }
void fake_entry(void** args, int32_t n) {
  for (int i = 0; i < 7; ++i) memcpy(fake_seen[i], args[i], (size_t)fake_sizes[i]);
  fake_alpha = *(float*)args[7];
  fake_beta = *(float*)args[8];
  fake_max_clusters = *(int32_t*)args[9];
  fake_pdl = *(int32_t*)args[10];
  fake_stream = *(void**)args[11];
  *(int32_t*)args[12] = 0;
  fake_calls += n == 13;
}
"""



def _expected_structs(p, v):
    """The kernel's 7 tensor structs, as bytes, for problem arguments v (names of GtCutedslArgs):
    what compile._bindings (the fake tensors' layouts) and the scale and bias conventions of
    gt_cutedsl_abi.h ask for. Matrices {data, int32 rows, cols, int64 ld, batch}, vectors with
    a length {data, int32 length}, else {data}."""
    import struct
    ev = lambda e: eval(e.replace("args->", ""), {}, dict(v))  # noqa: E731 - C expressions over args
    bd = cc._bindings(p)
    mat = lambda b: struct.pack("<QiiqQ", ev(b[1]), ev(b[2]), ev(b[3]), ev(b[4]), ev(b[7]))  # noqa: E731
    vec = lambda ptr, n: struct.pack("<Qi", ptr, n)  # noqa: E731
    ptr = lambda x: struct.pack("<Q", x)  # noqa: E731
    out = [mat(bd["a"]), mat(bd["b"]), mat(bd["d"]), mat(bd["c"]) if bd["c"] else ptr(v["d"]),
           vec(v["bias"], v["n"]) if p["bias"] else ptr(v["d"])]
    swap = p["swap_ab"]
    rs, cs = (v["scale_b"], v["scale_a"]) if swap else (v["scale_a"], v["scale_b"])
    if p["scale"] == "none":
        out += [ptr(v["d"]), ptr(v["d"])]
    elif p["scale"] == "tensorwise":
        out += [ptr(rs), ptr(cs)]
    else:
        rows, cols = (v["n"], v["m"]) if swap else (v["m"], v["n"])
        if p["scale"] == "block":
            kb = (v["k"] + 127) // 128
            sa, sb = v["m"] * kb, (v["n"] + 127) // 128 * ((kb + 3) // 4 * 4)
            rows, cols = (sb, sa) if swap else (sa, sb)
        out += [vec(rs, rows), vec(cs, cols)]
    return out


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_gemm_shim_fills_the_kernel_structs(name, tmp_path):
    """gemm_shim.cpp (one object for every instance, linked with the instance's generated data)
    passes the host entry the tensor structs _bindings lays out, the scalars, the persistent grid
    cap (SMs / cluster size) and the stream; and run() refuses a null pointer the instance reads."""
    p = cc.normalize(VARIANTS[name])
    tc = cc.toolchain()
    fake_c = tmp_path / "fake.c"
    fake_c.write_text(FAKE_KERNEL + RUNTIME_STUBS)
    inst = tmp_path / "inst.s"
    inst.write_text(cc.instance_asm(cc.config_text(p), cc._gemm_desc(p)))
    so = tmp_path / "fake.so"
    subprocess.run([tc["_cxx"], "-shared", "-fPIC", "-o", str(so), "-x", "c", str(fake_c), "-x", "none", str(inst),
                    cc.shim_object(), "-Wl,--no-undefined", "-Wl,-Bsymbolic",
                    "-Wl,--defsym=gt_inst_entry=fake_entry", "-Wl,--defsym=gt_inst_init=fake_init",
                    "-Wl,--defsym=gt_inst_load=fake_load"], check=True)
    lib = _memfd_load(str(so))
    lib.gt_cutedsl_config.restype = ctypes.c_char_p
    assert lib.gt_cutedsl_config().decode() == cc.config_text(p)
    base = 1 << 20  # distinct 16-byte aligned fake device pointers
    v = dict(m=300, n=200, k=1024, a=base, b=base * 2, c=base * 3, d=base * 4, bias=base * 5, scale_a=base * 6,
             scale_b=base * 7, lda=1024 if p["a_row"] else 304, ldb=208 if p["b_row"] else 1024,
             ldc=208 if p["c_row"] else 304, ldd=208 if p["d_row"] else 304)
    expect = _expected_structs(p, v)
    sizes = (ctypes.c_int * 7).in_dll(lib, "fake_sizes")
    for i, e in enumerate(expect):
        sizes[i] = len(e)
    a = Args(abi_version=ABI_VERSION, sm_count=132, alpha=1.5, beta=0.25, **v)
    assert lib.gt_cutedsl_can_implement(ctypes.byref(a)) == 0
    assert lib.gt_cutedsl_run(ctypes.byref(a), ctypes.c_void_p(0x1234)) == 0
    assert ctypes.c_int.in_dll(lib, "fake_calls").value == 1
    seen = (ctypes.c_ubyte * (7 * 32)).in_dll(lib, "fake_seen")
    for i, e in enumerate(expect):
        assert bytes(seen[i * 32:i * 32 + len(e)]) == e, cc._ARG_ORDER[i]
    assert ctypes.c_float.in_dll(lib, "fake_alpha").value == 1.5
    assert ctypes.c_float.in_dll(lib, "fake_beta").value == 0.25
    assert ctypes.c_int32.in_dll(lib, "fake_max_clusters").value == 132 // (p["cluster_m"] * p["cluster_n"])
    assert ctypes.c_void_p.in_dll(lib, "fake_stream").value == 0x1234
    assert ctypes.c_int32.in_dll(lib, "fake_pdl").value == 0
    # flags GT_CUTEDSL_OVERLAP_PREVIOUS: a programmatic dependent launch.
    pdl = Args.from_buffer_copy(a)
    pdl.flags = 1
    assert lib.gt_cutedsl_run(ctypes.byref(pdl), ctypes.c_void_p(0x1234)) == 0
    assert ctypes.c_int.in_dll(lib, "fake_calls").value == 2
    assert ctypes.c_int32.in_dll(lib, "fake_pdl").value == 1
    reads = ["a", "b", "d"] + (["c"] if p["has_c"] else []) + (["bias"] if p["bias"] else []) + \
        (["scale_a", "scale_b"] if p["scale"] != "none" else [])
    for x in ("a", "b", "c", "d", "bias", "scale_a", "scale_b"):
        null = Args.from_buffer_copy(a)
        setattr(null, x, None)
        assert lib.gt_cutedsl_run(ctypes.byref(null), None) == (2 if x in reads else 0), x


# ---- grouped instances (gemm_sm90.HopperGemm's grouped mode, compile.compile_grouped) ----------

GROUPED_ENTRY_POINTS = {"gt_cutedsl_grouped_abi_version", "gt_cutedsl_grouped_config",
                        "gt_cutedsl_grouped_can_implement", "gt_cutedsl_grouped_run", "gt_cutedsl_grouped_status_text"}
with open(os.path.join(os.path.dirname(cc.__file__), "gt_cutedsl_abi.h")) as _f:
    GROUPED_ABI_VERSION = int(re.search(r"#define GT_CUTEDSL_GROUPED_ABI_VERSION (\d+)", _f.read()).group(1))


def grouped_params(**kw):
    p = {"op": "grouped", "layout": "contiguous", "ab_dtype": "bf16", "d_dtype": "bf16", "bias": False,
         "act": "none", "scale": "none", "tile_m": 128, "tile_n": 128, "cluster_n": 1, "stages": 0}
    p.update(kw)
    return p


GROUPED_VARIANTS = {
    "bf16_contiguous": grouped_params(),
    "fp16_masked_64x64_bias_relu": grouped_params(layout="masked", ab_dtype="fp16", d_dtype="fp16", tile_m=64,
                                                  tile_n=64, bias=True, act="relu"),
    "e4m3_contiguous_tensorwise_c1x2": grouped_params(ab_dtype="e4m3", scale="tensorwise", tile_n=256, cluster_n=2),
    "e4m3_masked_rowwise_bias_silu": grouped_params(layout="masked", ab_dtype="e4m3", scale="rowwise", bias=True,
                                                    act="silu", tile_m=64),
}


class GroupedArgs(ctypes.Structure):  # gt_cutedsl_abi.h GtCutedslGroupedArgs
    _fields_ = ([("abi_version", ctypes.c_int32), ("device", ctypes.c_int32), ("sm_count", ctypes.c_int32),
                 ("flags", ctypes.c_int32)]
                + [(x, ctypes.c_int64) for x in ("groups", "n", "k", "capacity")]
                + [(x, ctypes.c_void_p) for x in ("a", "b", "d", "rows", "bias", "scale_a", "scale_b")]
                + [("alpha", ctypes.c_float), ("reserved", ctypes.c_int32)])


@pytest.mark.parametrize("name", sorted(GROUPED_VARIANTS))
def test_grouped_variant_compiles_to_a_loadable_so(name, tmp_path):
    p = GROUPED_VARIANTS[name]
    t0 = time.perf_counter()
    r = cc.compile_grouped(p, str(tmp_path))
    TIMES["grouped_" + name] = time.perf_counter() - t0
    so = r["artifact"]
    assert r["meta"]["config"] == cc.config_text(cc.normalize_grouped(p))
    assert _dynamic_symbols(so) == GROUPED_ENTRY_POINTS
    rt = r["runtime"]
    assert set(_needed(so)) <= {rt["soname"], "libc.so.6", "ld-linux-x86-64.so.2", "libm.so.6"}
    _memfd_load(rt["path"])
    lib = _memfd_load(so)
    lib.gt_cutedsl_grouped_config.restype = ctypes.c_char_p
    lib.gt_cutedsl_grouped_status_text.restype = ctypes.c_char_p
    assert lib.gt_cutedsl_grouped_abi_version() == GROUPED_ABI_VERSION
    assert lib.gt_cutedsl_grouped_config().decode() == r["meta"]["config"]
    buf = ctypes.create_string_buffer(1 << 12)
    addr = (ctypes.addressof(buf) + 15) // 16 * 16
    a = GroupedArgs(abi_version=GROUPED_ABI_VERSION, groups=8, n=256, k=512, capacity=1000, a=addr, b=addr, d=addr,
                    rows=addr, bias=addr, scale_a=addr, scale_b=addr, alpha=1.0)
    assert lib.gt_cutedsl_grouped_can_implement(ctypes.byref(a)) == 0
    for field, value, status in (("abi_version", GROUPED_ABI_VERSION + 1, 1), ("flags", 1, 2), ("reserved", 1, 2),
                                 ("groups", 0, 2), ("capacity", 0, 2), ("k", 260, 3), ("a", addr + 8, 3),
                                 ("rows", addr + 2, 3)):
        bad = GroupedArgs.from_buffer_copy(a)
        setattr(bad, field, value)
        assert lib.gt_cutedsl_grouped_can_implement(ctypes.byref(bad)) == status, field
    if not os.path.exists("/dev/nvidia0"):
        st = lib.gt_cutedsl_grouped_run(ctypes.byref(a), None)
        assert st != 0 and lib.gt_cutedsl_grouped_status_text(st)


@pytest.mark.parametrize("bad,text", [
    ({"op": "gemm"}, "op"), ({"layout": "ragged"}, "layout"), ({"ab_dtype": "fp32"}, "ab_dtype"),
    ({"d_dtype": "fp32"}, "d_dtype"), ({"scale": "rowwise"}, "scale"), ({"ab_dtype": "e4m3"}, "scale"),
    ({"ab_dtype": "e4m3", "scale": "block"}, "scale"), ({"tile_m": 256}, "tile_m"), ({"cluster_n": 3}, "cluster_n"),
    ({"act": "tanh"}, "act"), ({"tile_n": "128"}, "tile_n"),
])
def test_bad_grouped_params_fail_with_the_field(bad, text, tmp_path):
    with pytest.raises(cc.CompileFailure) as e:
        cc.compile_grouped(grouped_params(**bad), str(tmp_path))
    assert e.value.kind == "bad_request"
    assert text in e.value.message
    incomplete = grouped_params()
    del incomplete["stages"]
    with pytest.raises(cc.CompileFailure, match="stages"):
        cc.compile_grouped(incomplete, str(tmp_path))


GROUPED_FAKE_KERNEL = r"""
#include <stdint.h>
#include <string.h>
#define X __attribute__((visibility("default")))
X unsigned char fake_seen[7][40];
X int fake_sizes[7];
X float fake_alpha;
X int32_t fake_max_clusters;
X void* fake_stream;
X int fake_calls;
void fake_init(void** a) { *(int*)a[1] = 0; }
void fake_load(void** a) { *(int*)a[2] = 0; }
void fake_entry(void** args, int32_t n) {
  for (int i = 0; i < 7; ++i) memcpy(fake_seen[i], args[i], (size_t)fake_sizes[i]);
  fake_alpha = *(float*)args[7];
  fake_max_clusters = *(int32_t*)args[8];
  fake_stream = *(void**)args[9];
  *(int32_t*)args[10] = 0;
  fake_calls += n == 11;
}
"""



@pytest.mark.parametrize("name", sorted(GROUPED_VARIANTS))
def test_grouped_shim_fills_the_kernel_structs(name, tmp_path):
    """grouped_shim.cpp passes grouped_call's tensor structs as _grouped_fake_args lays them out
    (packed row-major: ld = columns, batch stride = rows x columns; masked A and D and every B
    with the group count as a third extent; scales and bias with their lengths), alpha, the grid
    cap and the stream; and run() refuses a null pointer the instance reads."""
    import struct
    p = cc.normalize_grouped(GROUPED_VARIANTS[name])
    tc = cc.toolchain()
    fake_c = tmp_path / "fake.c"
    fake_c.write_text(GROUPED_FAKE_KERNEL + RUNTIME_STUBS)
    inst = tmp_path / "inst.s"
    inst.write_text(cc.instance_asm(cc.config_text(p), cc._grouped_desc(p)))
    so = tmp_path / "fake.so"
    subprocess.run([tc["_cxx"], "-shared", "-fPIC", "-o", str(so), "-x", "c", str(fake_c), "-x", "none", str(inst),
                    cc.shim_object("grouped_shim.cpp"), "-Wl,--no-undefined", "-Wl,-Bsymbolic",
                    "-Wl,--defsym=gt_inst_entry=fake_entry", "-Wl,--defsym=gt_inst_init=fake_init",
                    "-Wl,--defsym=gt_inst_load=fake_load"], check=True)
    lib = _memfd_load(str(so))
    base = 1 << 20
    G, n, k, cap = 8, 200, 1024, 300
    v = dict(groups=G, n=n, k=k, capacity=cap, a=base, b=2 * base, d=3 * base, rows=4 * base, bias=5 * base,
             scale_a=6 * base, scale_b=7 * base)
    masked = p["layout"] == "masked"
    m2 = lambda ptr, r, c: struct.pack("<QiiqQ", ptr, r, c, c, r * c)  # noqa: E731
    m3 = lambda ptr, r, c: struct.pack("<QiiiiqQ", ptr, r, c, G, 0, c, r * c)  # noqa: E731 (padded to 8)
    vec = lambda ptr, length: struct.pack("<Qi", ptr, length)  # noqa: E731
    ptr = lambda x: struct.pack("<Q", x)  # noqa: E731
    rows_a = G * cap if masked else cap
    expect = [m3(v["a"], cap, k) if masked else m2(v["a"], cap, k), m3(v["b"], n, k),
              m3(v["d"], cap, n) if masked else m2(v["d"], cap, n), vec(v["rows"], G),
              vec(v["bias"], G * n) if p["bias"] else ptr(v["d"])]
    if p["scale"] == "rowwise":
        expect += [vec(v["scale_a"], rows_a), vec(v["scale_b"], G * n)]
    elif p["scale"] == "tensorwise":
        expect += [ptr(v["scale_a"]), vec(v["scale_b"], G)]
    else:
        expect += [ptr(v["d"]), ptr(v["d"])]
    # m3's padding word is not part of the struct's fields: compare the fields only.
    sizes = (ctypes.c_int * 7).in_dll(lib, "fake_sizes")
    for i, e in enumerate(expect):
        sizes[i] = len(e)
    a = GroupedArgs(abi_version=GROUPED_ABI_VERSION, sm_count=132, alpha=1.5, **v)
    assert lib.gt_cutedsl_grouped_run(ctypes.byref(a), ctypes.c_void_p(0x1234)) == 0
    assert ctypes.c_int.in_dll(lib, "fake_calls").value == 1
    seen = (ctypes.c_ubyte * (7 * 40)).in_dll(lib, "fake_seen")
    for i, e in enumerate(expect):
        got = bytes(seen[i * 40:i * 40 + len(e)])
        if len(e) == 40:  # three extents: skip the padding after them
            got, e = got[:20] + got[24:], e[:20] + e[24:]
        assert got == e, cc._GROUPED_ARGS[i]
    assert ctypes.c_float.in_dll(lib, "fake_alpha").value == 1.5
    assert ctypes.c_int32.in_dll(lib, "fake_max_clusters").value == 132 // p["cluster_n"]
    assert ctypes.c_void_p.in_dll(lib, "fake_stream").value == 0x1234
    reads = ["a", "b", "d", "rows"] + (["bias"] if p["bias"] else []) + \
        (["scale_a", "scale_b"] if p["scale"] != "none" else [])
    for x in ("a", "b", "d", "rows", "bias", "scale_a", "scale_b"):
        null = GroupedArgs.from_buffer_copy(a)
        setattr(null, x, None)
        assert lib.gt_cutedsl_grouped_run(ctypes.byref(null), None) == (2 if x in reads else 0), x
