"""gemmtune's long-lived compile worker: `python -m gemmtune.worker` (docs/compile-worker.md).

stdin: one JSON request per line; stdout: one JSON response per line, in request order, the
first line being the ready line. stdout carries nothing else: at start the worker moves the
protocol onto a private copy of fd 1 and points fd 1 (and sys.stdout) at stderr for good, so
whatever a compiler prints, from Python or from C, lands on stderr. A bad request gets an
{"ok": false, "kind": "bad_request"} answer; the worker never exits on one. It exits 0 at
end of input or on {"op": "exit"}.

Ops: ping, compile (backend "triton"), exit.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
from typing import Any, Optional

PROTOCOL_VERSION = 1


class _Protocol:
    def __init__(self):
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        self._out = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        sys.stdout = sys.stderr

    def send(self, obj: dict) -> None:
        self._out.write(json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n")
        self._out.flush()


def _fail(rid: Any, kind: str, error: str) -> dict:
    return {"id": rid, "ok": False, "kind": kind, "error": error}


def _probe_backends() -> tuple[dict, dict]:
    versions: dict = {}
    missing: dict = {}
    try:
        import triton
        from triton.compiler import ASTSource  # noqa: F401  (the API the worker uses)
        from triton.backends.compiler import GPUTarget  # noqa: F401
        versions["triton"] = triton.__version__
        try:
            versions["ptxas"] = str(triton.knobs.nvidia.ptxas.version)
        except Exception:  # noqa: BLE001 - informative only
            pass
        # Import the templates now: the first compile should not pay for it.
        from .kernels import triton_gemm  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        versions.pop("triton", None)
        versions.pop("ptxas", None)
        missing["triton"] = f"{type(exc).__name__}: {exc}"
    return versions, missing


class Worker:
    def __init__(self):
        self.versions, self.missing = _probe_backends()

    def ready_line(self) -> dict:
        line = {"ready": True, "worker": PROTOCOL_VERSION, "python": platform.python_version(),
                "pid": os.getpid(), "versions": self.versions}
        if self.missing:
            line["missing"] = self.missing
        return line

    def handle_line(self, raw: bytes) -> Optional[dict]:
        """The response to one input line (None for a blank line)."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _fail(None, "bad_request", f"request is not UTF-8: {exc}")
        if not text.strip():
            return None
        try:
            req = json.loads(text)
        except ValueError as exc:
            return _fail(None, "bad_request", f"request is not valid JSON: {exc}")
        if not isinstance(req, dict):
            return _fail(None, "bad_request", "request is not a JSON object")
        rid = req.get("id")
        try:
            return self.handle(rid, req)
        except Exception as exc:  # noqa: BLE001 - a bug here must not kill the worker
            return _fail(rid, "bad_request", f"internal error: {type(exc).__name__}: {exc}")

    def handle(self, rid: Any, req: dict) -> dict:
        op = req.get("op")
        if op == "ping":
            return {"id": rid, "ok": True, "op": "ping"}
        if op == "exit":
            return {"id": rid, "ok": True, "op": "exit"}
        if op == "compile":
            return self.compile(rid, req)
        return _fail(rid, "bad_request", f"unknown op {op!r} (ping, compile, exit)")

    def compile(self, rid: Any, req: dict) -> dict:
        for key in ("backend", "params", "out_dir"):
            if key not in req:
                return _fail(rid, "bad_request", f"compile: missing field {key!r}")
        backend = req["backend"]
        if backend != "triton":
            return _fail(rid, "bad_request", f"compile: unknown backend {backend!r}")
        if "triton" in self.missing:
            return _fail(rid, "bad_request", f"compile: triton is not available: {self.missing['triton']}")
        out_dir = req["out_dir"]
        if not isinstance(out_dir, str) or not os.path.isabs(out_dir):
            return _fail(rid, "bad_request", "compile: out_dir must be an absolute path")
        kernel = req.get("kernel")
        if kernel is not None and not isinstance(kernel, str):
            return _fail(rid, "bad_request", "compile: kernel must be a string")
        from .triton_compile import CompileFailure, compile_gemm
        try:
            result = compile_gemm(req["params"], out_dir, kernel=kernel)
        except CompileFailure as exc:
            return _fail(rid, exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001
            return _fail(rid, "compile", f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
        return {"id": rid, "ok": True, **result}


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    proto = _Protocol()
    worker = Worker()
    try:
        proto.send(worker.ready_line())
        stdin = sys.stdin.buffer
        while True:
            raw = stdin.readline()
            if not raw:
                return 0
            t0 = time.perf_counter()
            response = worker.handle_line(raw)
            if response is None:
                continue
            if not response.get("ok") and os.environ.get("GEMMTUNE_WORKER_VERBOSE"):
                print(f"gemmtune.worker: request {response.get('id')!r} failed after "
                      f"{time.perf_counter() - t0:.2f}s: {response.get('error')}", file=sys.stderr)
            try:
                proto.send(response)
            except (TypeError, ValueError):  # never expected; still answer
                proto.send(_fail(response.get("id"), "bad_request", "internal error: response not serializable"))
            if response.get("op") == "exit":
                return 0
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
