"""What each backend costs to keep, counted from the source tree when the report is made: lines of
kernel and glue code (GEMM and softmax apart), and its external dependencies with their pins.

A file belongs to a backend by where it lives (SOURCES); it is kernel code when it is device code
(.cu / .cuh, a backend's kernel/ folder) or a kernel template in Python (KERNEL_PY), else glue.
Code shared by several backends (the Python compile worker) is listed apart (SHARED), not split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

BACKENDS = ("cublaslt", "triton", "cutlass", "cutedsl", "native")

# Per backend: globs relative to the repository root.
SOURCES = {
    "cublaslt": ["src/backends/cublaslt/**/*"],
    "triton": ["src/backends/triton/**/*", "python/gemmtune/kernels/triton_*.py", "python/gemmtune/triton_compile.py"],
    "cutlass": ["src/backends/cutlass/**/*", "src/compile/nvcc.*"],
    "cutedsl": ["src/backends/cutedsl/**/*", "python/gemmtune/cutedsl/**/*"],
    "native": ["src/backends/native/**/*"],
}
SHARED = ["src/compile/python_worker.*", "python/gemmtune/worker.py"]  # Triton and CuTe DSL compile workers
KERNEL_PY = {"triton_gemm.py", "triton_softmax.py", "gemm_sm90.py", "softmax_sm90.py"}
SOURCE_SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".cuh", ".py"}

# What a backend needs besides gemmtune itself; pins are read from these requirements files.
DEPENDENCIES = {
    "cublaslt": ("libcublasLt of the CUDA toolkit (linked); nothing at tune time", None),
    "triton": ("Python 3 with Triton at compile time (the compile workers); the driver loads the cubins",
               "python/requirements.txt"),
    "cutlass": ("CUTLASS C++ headers and nvcc at compile time (or a precompiled kernel pack)",
                "python/requirements-cutlass.txt"),
    "cutedsl": ("the CuTe DSL (Python) and g++ at compile time (or a precompiled kernel pack)",
                "python/requirements-cutedsl.txt"),
    "native": ("none beyond the CUDA runtime (built with the library)", None),
}


@dataclass
class BackendCode:
    backend: str
    gemm_kernel: int = 0
    gemm_glue: int = 0
    softmax_kernel: int = 0
    softmax_glue: int = 0
    files: list = field(default_factory=list)  # [(relative path, lines, "gemm"|"softmax", "kernel"|"glue")]
    dependencies: str = ""
    pins: list = field(default_factory=list)  # ["name==version"]

    @property
    def gemm_total(self) -> int:
        return self.gemm_kernel + self.gemm_glue


def repo_root() -> Optional[Path]:
    """The checkout this package lives in (python/gemmtune/report -> the root), if it is one."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "src" / "backends").is_dir() else None


def _lines(path: Path) -> int:
    """Non-blank lines."""
    try:
        return sum(1 for ln in path.read_text(errors="replace").splitlines() if ln.strip())
    except OSError:
        return 0


def classify(rel: str) -> tuple:
    """("gemm" | "softmax", "kernel" | "glue") of a source file by its path."""
    p = Path(rel)
    op = "softmax" if "softmax" in p.name else "gemm"
    kernel = p.suffix in (".cu", ".cuh") or (p.parts[0] == "src" and "kernel" in p.parts[:-1]) or p.name in KERNEL_PY
    return op, "kernel" if kernel else "glue"


def _files(root: Path, globs: list) -> list:
    out = set()
    for g in globs:
        for f in root.glob(g):
            if f.is_file() and f.suffix in SOURCE_SUFFIXES:
                out.add(f)
    return sorted(out)


def _pins(root: Path, req: Optional[str]) -> list:
    if not req or not (root / req).is_file():
        return []
    pins = []
    for ln in (root / req).read_text().splitlines():
        ln = ln.split("#")[0].strip()
        if "==" in ln and not ln.startswith(("pytest", "matplotlib")):
            pins.append(ln)
    return pins


def count(root: Optional[Path] = None) -> Optional[dict]:
    """backend -> BackendCode, plus "shared" (glue lines of the Python compile worker); None when
    the report does not run from a checkout (no source tree to count)."""
    root = root or repo_root()
    if root is None:
        return None
    out = {}
    for b in BACKENDS:
        code = BackendCode(b)
        for f in _files(root, SOURCES[b]):
            rel = f.relative_to(root).as_posix()
            n = _lines(f)
            op, kind = classify(rel)
            setattr(code, f"{op}_{kind}", getattr(code, f"{op}_{kind}") + n)
            code.files.append((rel, n, op, kind))
        code.dependencies, req = DEPENDENCIES[b]
        code.pins = _pins(root, req)
        out[b] = code
    shared = BackendCode("shared")
    for f in _files(root, SHARED):
        shared.gemm_glue += _lines(f)
        shared.files.append((f.relative_to(root).as_posix(), _lines(f), "gemm", "glue"))
    out["shared"] = shared
    return out
