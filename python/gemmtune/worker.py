"""gemmtune's long-lived compile worker: `python -m gemmtune.worker` (docs/compile-worker.md).

stdin: one JSON request per line; stdout: one JSON response per line, in request order, the
first line being the ready line. stdout carries nothing else: at start the worker moves the
protocol onto a private copy of fd 1 and points fd 1 (and sys.stdout) at stderr for good, so
whatever a compiler prints, from Python or from C, lands on stderr. A bad request gets an
{"ok": false, "kind": "bad_request"} answer; the worker never exits on one. It exits 0 at
end of input or on {"op": "exit"}.

Ops: ping, compile (backend "triton" or "cutedsl"; cutedsl params with "op": "softmax" go to
cutedsl/softmax_compile.py, with "op": "grouped" to cutedsl/compile.py's compile_grouped), exit; fork and reap (fork server).
Backends probed at start (imported, versions in the ready line): $GEMMTUNE_WORKER_BACKENDS, a
comma list, default "triton"; the CuTe DSL backend's pool sets "cutedsl".

Fork server ("zygote", docs/compile-worker.md): when stdin is a Unix socket, a {"op": "fork"}
request carries three descriptors (SCM_RIGHTS: the new worker's stdin socket, stdout and stderr
pipes); the worker forks a child that takes them as fds 0-2 and serves requests with the
parent's imported (and, with $GEMMTUNE_WORKER_WARMUP=1, warmed-up) state, sending its own ready
line first. The answer is {"id", "ok": true, "op": "fork", "pid"}. {"op": "reap", "pid", "grace_s"}
waits up to grace_s for that child to exit, kills it (SIGKILL) if it has not, and answers its
wait status ({"status": "exited with status 0" | "died (signal 9)", "killed": bool}); the
children are reaped only there (so a child's pid is never reused while the engine may still
kill it through this op), and killed at the server's exit.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import stat
import sys
import threading
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

    def close(self) -> None:  # a forked child drops its parent's protocol stream
        try:
            self._out.close()
        except OSError:
            pass


_MAX_FDS = 8  # descriptors accepted with one message (a fork request sends 3)


class _LineReader:
    """Lines from fd 0, and the descriptors that arrive with them when fd 0 is a Unix socket
    (SCM_RIGHTS; a stream socket delivers them with the first byte sent alongside)."""

    def __init__(self, fd: int = 0):
        self.fd = fd
        self.buf = b""
        self.fds: list = []  # received, not yet taken by a fork request (in arrival order)
        self.sock = None
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                self.sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            self.sock = None

    def readline(self) -> bytes:
        """The next line with its newline; what is left at end of input; b"" at end of input."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl + 1], self.buf[nl + 1:]
                return line
            if self.sock is not None:
                try:
                    data, fds, _flags, _addr = socket.recv_fds(self.sock, 65536, _MAX_FDS)
                except ConnectionResetError:  # the engine went away: end of input
                    data, fds = b"", []
                if fds:
                    self.fds.append(list(fds))
            else:
                data = os.read(self.fd, 65536)
            if not data:
                line, self.buf = self.buf, b""
                return line
            self.buf += data

    def take_fds(self) -> Optional[list]:
        return self.fds.pop(0) if self.fds else None

    def drop_fds(self) -> None:  # descriptors that came with a request other than fork
        for group in self.fds:
            for fd in group:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fds = []

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.drop_fds()


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"died (signal {os.WTERMSIG(status)})"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"stopped (wait status {status})"


_libc = None  # loaded by a fork server before its first fork (children inherit it)


def _load_libc() -> None:
    global _libc
    if _libc is None:
        try:
            import ctypes
            _libc = ctypes.CDLL(None, use_errno=True)
        except Exception:  # noqa: BLE001
            _libc = False


def _die_with_parent() -> None:
    """A forked child dies (SIGKILL) when its fork server does: no orphan compiles on."""
    _load_libc()
    if _libc:
        try:
            _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001 - not Linux: the child still exits at the end of its input
            pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _fail(rid: Any, kind: str, error: str) -> dict:
    return {"id": rid, "ok": False, "kind": kind, "error": error}


def _probe_cutedsl(versions: dict, missing: dict) -> None:
    try:
        from .cutedsl import compile as cutedsl_compile
        versions["cutedsl_toolchain"] = cutedsl_compile.toolchain_text()
        versions["cutedsl"] = cutedsl_compile.toolchain()["dsl"]
        from .cutedsl import gemm_sm90  # noqa: F401  (import the kernel now, not at the first compile)
    except Exception as exc:  # noqa: BLE001
        versions.pop("cutedsl_toolchain", None)
        versions.pop("cutedsl", None)
        missing["cutedsl"] = f"{type(exc).__name__}: {exc}"


def _probe_backends() -> tuple[dict, dict]:
    versions: dict = {}
    missing: dict = {}
    wanted = [b.strip() for b in os.environ.get("GEMMTUNE_WORKER_BACKENDS", "triton").split(",") if b.strip()]
    if "cutedsl" in wanted:
        _probe_cutedsl(versions, missing)
    if "triton" not in wanted:
        return versions, missing
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
        _private_triton_key(versions["triton"])
    except Exception as exc:  # noqa: BLE001
        versions.pop("triton", None)
        versions.pop("ptxas", None)
        missing["triton"] = f"{type(exc).__name__}: {exc}"
    return versions, missing


def _private_triton_key(version: str) -> None:
    """Triton keys its file cache with a hash of its whole installation (triton_key(): every
    source file and libtriton.so, hundreds of MB), computed once per process at the first
    compile: ~0.6 s. This worker compiles with a Triton file cache private to the process and
    emptied after each compile (triton_compile._private_cache_dir), where the installation
    cannot change under it: there the version suffices to keep keys unique. With any other
    cache directory (not ours) the real key is computed as before."""
    try:
        import triton
        from triton.runtime import cache
        real = getattr(cache, "triton_key", None)
        if not callable(real):
            return
        from . import triton_compile
        private = f"gemmtune-worker-private {version}"

        def key():
            ours = triton_compile._cache_dir
            return private if ours and triton.knobs.cache.dir == ours else real()

        cache.triton_key = key
    except Exception:  # noqa: BLE001 - an optimisation only
        pass


def _warm_up(versions: dict) -> None:
    """A fork server's warm-up (after its ready line; its children inherit the result): the
    modules Triton imports only at the first compile (the code generator and Gluon, ~40 ms) and
    ptxas' version (a subprocess, cached). A whole warm-up compile would cost more (~0.3 s on
    the critical path) than the first compile's remaining one-time work once triton_key() is
    private (_private_triton_key)."""
    if "triton" not in versions:
        return
    t0 = time.perf_counter()
    done = []
    for name in ("triton.compiler.code_generator", "triton.language.semantic"):
        try:
            __import__(name)
            done.append(name)
        except Exception:  # noqa: BLE001 - another Triton version: the first compile imports what it needs
            pass
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version
        get_ptxas_version(90)
        done.append("ptxas --version")
    except Exception:  # noqa: BLE001
        pass
    print(f"gemmtune.worker: warm-up ({', '.join(done) or 'nothing'}) in {time.perf_counter() - t0:.2f}s",
          file=sys.stderr)


class Worker:
    def __init__(self, probe: bool = True):
        self.versions, self.missing = _probe_backends() if probe else ({}, {})
        self.reader: Optional[_LineReader] = None
        self.children: dict = {}  # pid -> None (running) or its wait status text (reaped)
        self.forked = False  # this process is a fork server's child

    def ready_line(self) -> dict:
        line = {"ready": True, "worker": PROTOCOL_VERSION, "python": platform.python_version(),
                "pid": os.getpid(), "versions": self.versions}
        if self.missing:
            line["missing"] = self.missing
        if self.forked:
            line["forked"] = True
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
            # NaN and Infinity are not JSON (they could not be answered back: send() refuses them);
            # a deeply nested line is a bad request, not a RecursionError that ends the worker.
            req = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            return _fail(None, "bad_request", f"request is not valid JSON: {str(exc)[:200]}")
        if not isinstance(req, dict):
            return _fail(None, "bad_request", "request is not a JSON object")
        rid = req.get("id")
        if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (int, str))):
            return _fail(None, "bad_request", "request id must be an integer or a string")
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
        if op == "fork":
            return self.fork(rid)
        if op == "reap":
            return self.reap(rid, req)
        return _fail(rid, "bad_request", f"unknown op {op!r} (ping, compile, exit, fork, reap)")

    # ---- fork server ----------------------------------------------------------------------

    def fork(self, rid: Any) -> dict:
        fds = self.reader.take_fds() if self.reader else None
        if fds is None or len(fds) != 3:
            for fd in fds or []:
                os.close(fd)
            return _fail(rid, "bad_request", "fork: the request must carry 3 descriptors (stdin, stdout, "
                         "stderr) over a Unix-socket stdin")
        # Forking copies only this thread: refuse when others run (they may hold locks).
        threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
        if threads > 1:
            for fd in fds:
                os.close(fd)
            return _fail(rid, "bad_request", f"fork: this process runs {threads} threads")
        _load_libc()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os._exit(self._child_main(fds, parent))
        for fd in fds:
            os.close(fd)
        self.children[pid] = None
        return {"id": rid, "ok": True, "op": "fork", "pid": pid}

    def _child_main(self, fds: list, parent: int) -> int:
        """The forked child: takes fds as 0-2 (they are >= 3 here: the server's own 0-2 are
        open), drops the server's channels, serves its own. Returns the exit status."""
        code = 0
        compiler = sys.modules.get(__package__ + ".triton_compile")
        try:
            _die_with_parent()
            if os.getppid() != parent:  # the server died before prctl took effect
                return 71
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            self.reader.close()
            self._proto.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            self.children = {}
            self.forked = True
            if compiler is not None:
                compiler._cache_dir = None  # the server's dir (and its atexit) stays the server's
            code = serve(self, _Protocol())
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a child must never return into its server's loop
            code = 70
        finally:
            compiler = sys.modules.get(__package__ + ".triton_compile")
            if compiler is not None and compiler._cache_dir:  # os._exit skips its atexit removal
                import shutil
                shutil.rmtree(compiler._cache_dir, True)
        return code

    def reap(self, rid: Any, req: dict) -> dict:
        pid = req.get("pid")
        grace = req.get("grace_s", 0)
        if not isinstance(pid, int) or pid not in self.children:
            return _fail(rid, "bad_request", f"reap: {pid!r} is not a child of this worker")
        if not isinstance(grace, (int, float)) or isinstance(grace, bool) or not 0 <= grace <= 60:
            return _fail(rid, "bad_request", "reap: grace_s must be a number of seconds in [0, 60]")
        killed = False
        status = None
        deadline = time.monotonic() + grace
        while True:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
            if time.monotonic() >= deadline:
                os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this child's
                killed = True
                status = os.waitpid(pid, 0)[1]
                break
            time.sleep(0.005)
        del self.children[pid]
        return {"id": rid, "ok": True, "op": "reap", "pid": pid, "status": _status_text(status), "killed": killed}

    def kill_children(self) -> None:
        """At exit: children still running get a short grace (their input is closing too), then
        SIGKILL; every one is reaped."""
        deadline = time.monotonic() + 2.0
        for pid in list(self.children):
            while True:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    break
                if done:
                    break
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.005)
            del self.children[pid]

    def compile(self, rid: Any, req: dict) -> dict:
        for key in ("backend", "params", "out_dir"):
            if key not in req:
                return _fail(rid, "bad_request", f"compile: missing field {key!r}")
        backend = req["backend"]
        if backend == "cutedsl":
            return self.compile_cutedsl(rid, req)
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
        compile_fn = compile_gemm
        if isinstance(kernel, str) and kernel.startswith("softmax_"):  # kernels/triton_softmax.py
            from .kernels.triton_softmax import compile_softmax as compile_fn
        elif kernel == "grouped_gemm":  # kernels/triton_grouped.py
            from .kernels.triton_grouped import compile_grouped as compile_fn
        try:
            result = compile_fn(req["params"], out_dir, kernel=kernel)
        except CompileFailure as exc:
            return _fail(rid, exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001
            return _fail(rid, "compile", f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
        return {"id": rid, "ok": True, **result}

    def compile_cutedsl(self, rid: Any, req: dict) -> dict:
        if "cutedsl" not in self.versions:
            why = self.missing.get("cutedsl", "not probed (GEMMTUNE_WORKER_BACKENDS lacks cutedsl)")
            return _fail(rid, "bad_request", f"compile: cutedsl is not available: {why}")
        out_dir = req["out_dir"]
        if not isinstance(out_dir, str) or not os.path.isabs(out_dir):
            return _fail(rid, "bad_request", "compile: out_dir must be an absolute path")
        from .cutedsl.compile import CompileFailure, compile_gemm, compile_grouped
        compile_fn = compile_gemm
        op = req["params"].get("op") if isinstance(req["params"], dict) else None
        if op == "softmax":  # cutedsl/softmax_compile.py
            from .cutedsl.softmax_compile import compile_softmax as compile_fn
        elif op == "grouped":
            compile_fn = compile_grouped
        try:
            result = compile_fn(req["params"], out_dir)
        except CompileFailure as exc:
            return _fail(rid, exc.kind, exc.message)
        except Exception as exc:  # noqa: BLE001
            return _fail(rid, "compile", f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
        return {"id": rid, "ok": True, **result}


def serve(worker: Worker, proto: _Protocol) -> int:
    """Sends the ready line, then answers requests until end of input or exit; returns 0."""
    worker._proto = proto
    worker.reader = _LineReader(0)
    try:
        proto.send(worker.ready_line())
        if not worker.forked and os.environ.get("GEMMTUNE_WORKER_WARMUP") == "1":
            _warm_up(worker.versions)  # requests (fork ones too) queue meanwhile
        while True:
            raw = worker.reader.readline()
            worker_fds_pending = bool(worker.reader.fds)
            if not raw:
                return 0
            t0 = time.perf_counter()
            response = worker.handle_line(raw)
            if response is None:
                continue
            if not response.get("ok") and os.environ.get("GEMMTUNE_WORKER_VERBOSE"):
                print(f"gemmtune.worker: request {response.get('id')!r} failed after "
                      f"{time.perf_counter() - t0:.2f}s: {response.get('error')}", file=sys.stderr)
            if worker_fds_pending:
                worker.reader.drop_fds()  # came with a request that did not take them
            try:
                proto.send(response)
            except (TypeError, ValueError, RecursionError):  # never expected; still answer
                rid = response.get("id")
                proto.send(_fail(rid if isinstance(rid, (int, str)) and not isinstance(rid, bool) else None,
                                 "bad_request", "internal error: response not serializable"))
            if response.get("op") == "exit":
                return 0
    except BrokenPipeError:
        return 0
    finally:
        worker.kill_children()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    proto = _Protocol()
    worker = Worker()
    return serve(worker, proto)


if __name__ == "__main__":
    sys.exit(main())
