"""A fake gemmtune engine for --mock (CPU self-tests of the benches): the bindings' Engine interface
and options (gemmtune.Engine, python/gemmtune/__init__.py; unknown options are refused as the C API
refuses them), GEMM and softmax."""

from __future__ import annotations

import json
import math
import random
import time

COMPILE_KEYS = {"artifacts", "workers", "nvcc_jobs", "timeout_s", "load_only", "python", "python_dir"}
LOG_LEVELS = {"quiet", "warning", "info", "debug"}


class MockError(RuntimeError):
    pass


class MockKernel:
    """speed: GEMM: time per call relative to the mock GPU's base; softmax: TB/s."""

    def __init__(self, backend, id_, name, speed):
        self.backend, self.id, self.name, self.speed = backend, id_, name, speed

    def run(self, *a):
        pass

    def close(self):
        pass


class MockEngine:
    """Tunes fake cuBLASLt (4) and Triton (6) candidates (and CUTLASS (3) and CuTe DSL (2) where
    asked); the pick differs between engines now and then; rowwise problems get Triton candidates
    only. A Triton config compiles (0.3-0.9 s) the first time its artifact store (compile.artifacts)
    sees it in this process, later it is a store hit. Softmax: two fake candidates."""
    count = 0
    stores = {}   # compile.artifacts -> {(triton id, dtype, scale)} compiled

    def __init__(self, cache_path=None, backends=None, device=0, use_cache=True, log_to_stderr=False, tune=None,
                 compile=None, max_configs=None, log_level=None):
        unknown = set(compile or {}) - COMPILE_KEYS
        if unknown:
            raise MockError(f"options.compile: unknown field(s) {', '.join(sorted(unknown))} (mock)")
        if log_level is not None and log_level not in LOG_LEVELS:
            raise MockError(f"options.log_level: '{log_level}' is not one of {', '.join(sorted(LOG_LEVELS))} (mock)")
        MockEngine.count += 1
        self.salt = MockEngine.count
        self.cache_path = cache_path
        self.backends = list(backends) if backends else ["cublaslt", "triton"]
        self.compiled = MockEngine.stores.setdefault((compile or {}).get("artifacts"), set())

    def info(self):
        return {"version": "mock", "device": {"name": "Mock H200", "str": "Mock H200 (sm_90)"},
                "environment": "mock", "backends": [{"name": b, "status": "available (mock)"} for b in self.backends],
                "cache_path": self.cache_path}

    TRITON_IDS = ("t128x128x64w8s3g8", "t64x128x64w4s4g8", "p128x256x64w8s3g8", "t128x256x64w8s3g8",
                  "t16x64x128w4s4g8k4", "t256x256x128w8s5g8")

    def _cands(self, problem):
        """[(backend, id, name, speed)] in a stable order."""
        rng = random.Random(json.dumps(problem, sort_keys=True))
        out = []
        if "cublaslt" in self.backends and problem.get("scale") != "rowwise":
            for i in range(4):
                out.append(("cublaslt", f"{i:02x}" * 4, f"algo={i} tile=128x128", 1.0 + 0.1 * rng.random()))
        if "triton" in self.backends:
            for tid in self.TRITON_IDS:
                out.append(("triton", tid, f"triton {tid}", 0.97 + 0.12 * rng.random()))
        if "cutlass" in self.backends:
            for cid in ("co128x256x64c2x1", "pp64x256x64c1x1", "co256x128x64c1x2"):
                out.append(("cutlass", cid, f"cutlass {cid}", 0.98 + 0.1 * rng.random()))
        if "cutedsl" in self.backends:
            for cid in ("ds128x256x64c2x1", "ds128x128x64c1x1"):
                out.append(("cutedsl", cid, f"cutedsl {cid}", 0.98 + 0.1 * rng.random()))
        return out

    def select(self, problem, force=False):
        time.sleep(0.02)
        cands = self._cands(problem)
        if not cands:
            raise MockError("no backend has a candidate (mock)")
        speeds = [c[3] for c in cands]
        if self.salt % 2 == 0 and problem["n"] % 3 == 0:
            speeds[1] = min(speeds) - 0.001  # a different pick in the second engine
        results = []
        for i, ((backend, id_, name, _), sp) in enumerate(zip(cands, speeds)):
            status, reason, rel = "ok", "", 1e-3
            if backend == "cublaslt" and i == 3:
                status, reason, rel = "wrong", "mock wrong", 0.5
            if id_ == "t256x256x128w8s5g8":
                status, reason, rel = "failed", "triton: compile failed (resource): out of shared memory (mock)", -1
            compile_s = 0.001
            if backend == "triton":
                key = (id_, problem.get("dtype"), problem.get("scale"))
                if key not in self.compiled:
                    self.compiled.add(key)
                    compile_s = 0.3 + 0.6 * random.Random(id_).random()
                else:
                    compile_s = 0.002
            timed = status == "ok"
            results.append({"backend": backend, "id": id_, "name": name, "status": status, "reason": reason,
                            "rel_err": rel, "median_us": 10 * sp if timed else 0, "p20_us": 9.9 * sp if timed else 0,
                            "p80_us": 10.1 * sp if timed else 0, "samples": 10 if timed else 0, "compile_s": compile_s,
                            "winner": False, "is_default": backend == "cublaslt" and i == 0})
        win = min((r for r in results if r["status"] == "ok"), key=lambda r: r["median_us"])
        win["winner"] = True
        results.sort(key=lambda r: (not r["winner"], r["median_us"] or math.inf))
        rep = {"problem": str(problem), "key": "mock", "from_cache": False, "seconds": 0.005,
               "spread": 0.01, "notes": [], "results": results}
        return MockKernel(win["backend"], win["id"], win["name"], win["median_us"] / 10), rep

    def load(self, problem, backend, id_):
        for b, i, name, sp in self._cands(problem):
            if b == backend and i == id_:
                return MockKernel(backend, id_, name, sp)
        raise MockError(f"mock: no candidate {backend} {id_}")

    def softmax_select(self, problem):
        """A native pick at 3.9 TB/s over a Triton candidate at 3.0, as the C API's softmax report."""
        b = problem["rows"] * problem["cols"] * 2 * {"bf16": 2, "fp16": 2, "fp32": 4}[problem["dtype"]]
        res = [{"backend": "native", "id": "cluster_v8_e32_t512_c8", "name": "cluster_v8_e32_t512_c8", "status": "ok",
                "reason": "", "rel_err": None, "median_us": b / 3.9e6, "p20_us": b / 3.95e6, "p80_us": b / 3.85e6,
                "samples": 10, "compile_s": 0, "winner": True, "TBps": 3.9},
               {"backend": "triton", "id": "online_b4096_w16", "name": "online_b4096_w16", "status": "ok",
                "reason": "", "rel_err": None, "median_us": b / 3.0e6, "p20_us": b / 3.05e6, "p80_us": b / 2.95e6,
                "samples": 10, "compile_s": 0.4, "winner": False, "TBps": 3.0}]
        rep = {"op": "softmax", "bytes": b, "from_cache": False, "seconds": 1.5, "results": res, "notes": []}
        return MockKernel("native", res[0]["id"], res[0]["name"], 3.9), rep

    def softmax_run(self, kernel, x_ptr, y_ptr, stream):
        pass

    def softmax_destroy(self, kernel):
        pass

    def close(self):
        pass
