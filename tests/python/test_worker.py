"""The compile worker's JSON-lines protocol (docs/compile-worker.md), end to end through a
real `python -m gemmtune.worker` process."""

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import COMPILE_TIMES, REPO, base_params

TIMEOUT_S = 120


class WorkerProcess:
    """A worker with stdout read on a thread (so a test can time out instead of hanging)."""

    def __init__(self, extra_env=None, pythonpath=None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join((pythonpath or []) + [os.path.join(REPO, "python")])
        env.update(extra_env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "gemmtune.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
        self.lines = queue.Queue()
        self.stdout_raw = []
        self.stderr_chunks = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self):
        for raw in self.proc.stdout:
            self.stdout_raw.append(raw)
            self.lines.put(raw)
        self.lines.put(None)

    def _pump_stderr(self):
        for raw in self.proc.stderr:
            self.stderr_chunks.append(raw)

    def read(self):
        raw = self.lines.get(timeout=TIMEOUT_S)
        assert raw is not None, "worker closed stdout; stderr:\n" + self.stderr()
        return json.loads(raw)

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, obj):
        self.send_raw((json.dumps(obj) + "\n").encode())
        return self.read()

    def stderr(self):
        return b"".join(self.stderr_chunks).decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def worker():
    w = WorkerProcess()
    ready = w.read()
    assert ready.get("ready") is True, ready
    yield w
    w.close()


def compile_request(rid, out_dir, **overrides):
    params = base_params(**overrides)
    kernel = params.pop("kernel")
    return {"id": rid, "op": "compile", "backend": "triton", "kernel": kernel, "params": params, "out_dir": out_dir}


def test_ready_line():
    triton = pytest.importorskip("triton")
    w = WorkerProcess()
    try:
        ready = w.read()
        assert ready["ready"] is True
        assert ready["worker"] == 1
        assert ready["python"] == ".".join(map(str, sys.version_info[:3]))
        assert ready["versions"]["triton"] == triton.__version__
        assert "missing" not in ready
    finally:
        assert w.close() == 0


def test_ping(worker):
    assert worker.request({"id": 8, "op": "ping"}) == {"id": 8, "ok": True, "op": "ping"}
    assert worker.request({"id": "str-id", "op": "ping"})["id"] == "str-id"


def test_malformed_lines_are_answered_and_the_worker_goes_on(worker):
    worker.send_raw(b"this is not json\n")
    r = worker.read()
    assert r["ok"] is False and r["kind"] == "bad_request" and r["id"] is None
    worker.send_raw(b"[1, 2, 3]\n")
    r = worker.read()
    assert r["ok"] is False and r["kind"] == "bad_request"
    worker.send_raw(b"\xff\xfe\n")
    r = worker.read()
    assert r["ok"] is False and r["kind"] == "bad_request"
    worker.send_raw(b"\n   \n")  # blank lines are not requests: no answer
    assert worker.request({"id": 1, "op": "ping"})["ok"] is True


@pytest.mark.parametrize("line", [
    b'{"id": NaN, "op": "ping"}\n',
    b'{"id": Infinity, "op": "ping"}\n',
    b'{"id": [1], "op": "ping"}\n',
    b'{"id": true, "op": "ping"}\n',
    b"[" * 100000 + b"]" * 100000 + b"\n",
], ids=["nan-id", "infinity-id", "list-id", "bool-id", "nested-100k"])
def test_unanswerable_ids_and_deep_nesting_are_bad_requests(worker, line):
    # Reliability audit D16: these ended the worker (a NaN id could not be answered back; a
    # RecursionError escaped). Each is answered with id null, and the worker goes on.
    worker.send_raw(line)
    r = worker.read()
    assert r["ok"] is False and r["kind"] == "bad_request" and r["id"] is None, r
    assert worker.request({"id": 2, "op": "ping"})["ok"] is True


def test_unknown_op(worker):
    r = worker.request({"id": 3, "op": "frobnicate"})
    assert r == {"id": 3, "ok": False, "kind": "bad_request", "error": r["error"]}
    assert "frobnicate" in r["error"]
    r = worker.request({"id": 4})
    assert r["ok"] is False and r["kind"] == "bad_request"


@pytest.mark.parametrize("missing", ["backend", "params", "out_dir"])
def test_missing_request_fields(worker, tmp_path, missing):
    req = compile_request(5, str(tmp_path))
    del req[missing]
    r = worker.request(req)
    assert r["id"] == 5 and r["ok"] is False and r["kind"] == "bad_request"
    assert missing in r["error"]


def test_bad_params_and_fields(worker, tmp_path):
    req = compile_request(6, str(tmp_path))
    del req["params"]["a_dtype"]
    r = worker.request(req)
    assert r["ok"] is False and r["kind"] == "bad_request" and "a_dtype" in r["error"]
    r = worker.request(dict(compile_request(7, str(tmp_path)), backend="cutlass"))
    assert r["ok"] is False and r["kind"] == "bad_request" and "backend" in r["error"]
    r = worker.request(compile_request(8, "relative/dir"))
    assert r["ok"] is False and r["kind"] == "bad_request" and "out_dir" in r["error"]
    r = worker.request(dict(compile_request(9, str(tmp_path)), params="nope"))
    assert r["ok"] is False and r["kind"] == "bad_request"
    req = compile_request(10, str(tmp_path))
    req["params"]["kernel"] = "gemm_persistent"  # the request says gemm_tiled
    r = worker.request(req)
    assert r["ok"] is False and r["kind"] == "bad_request" and "kernel" in r["error"]
    assert worker.request({"id": 11, "op": "ping"})["ok"] is True


def test_compile_ok(worker, tmp_path):
    out = str(tmp_path / "out")
    r = worker.request(compile_request(12, out, kernel="gemm_persistent", has_bias=True, act="gelu_tanh"))
    assert r["ok"] is True, r
    assert r["id"] == 12
    assert r["name"] == "gemm_persistent"
    assert os.path.dirname(r["artifact"]) == out
    with open(r["artifact"], "rb") as f:
        assert f.read(4) == b"\x7fELF"
    meta = r["meta"]
    assert meta["num_warps"] == 8 and meta["num_ctas"] == 1 and meta["shared"] > 0
    assert meta["global_scratch_size"] > 0 and meta["global_scratch_align"] >= 1
    assert meta["profile_scratch_size"] == 0 and meta["profile_scratch_align"] >= 1
    assert r["compile_s"] > 0
    COMPILE_TIMES.append(r["compile_s"])


def test_failures_then_the_worker_keeps_answering(worker, tmp_path):
    out = str(tmp_path)
    r = worker.request(compile_request(20, out, block_m=48))
    assert r["ok"] is False and r["kind"] == "compile" and r["id"] == 20
    assert "power of 2" in r["error"]
    r = worker.request(compile_request(21, out, block_m=256, block_n=256, block_k=256, num_stages=4))
    assert r["ok"] is False and r["kind"] == "resource"
    r = worker.request(compile_request(22, out, block_m=256, block_n=128, block_k=64, num_stages=5))
    assert r["ok"] is False and r["kind"] == "resource"
    r = worker.request(compile_request(23, out))
    assert r["ok"] is True, r
    assert worker.request({"id": 24, "op": "ping"})["ok"] is True


def test_stdout_carries_only_protocol_lines(tmp_path):
    # NVPTX_ENABLE_DUMP makes Triton print the whole PTX with print(); the worker also asks
    # ptxas for its -v log (printed the same way). None of it may reach stdout.
    w = WorkerProcess(extra_env={"NVPTX_ENABLE_DUMP": "1"})
    try:
        assert w.read()["ready"] is True
        r = w.request(compile_request(30, str(tmp_path)))
        assert r["ok"] is True, r
        r = w.request(compile_request(31, str(tmp_path), block_m=48))
        assert r["ok"] is False
        assert w.request({"id": 32, "op": "exit"}) == {"id": 32, "ok": True, "op": "exit"}
        assert w.proc.wait(timeout=30) == 0
    finally:
        w.close()
    w.lines.get(timeout=10)  # wait for the reader thread to reach EOF
    assert len(w.stdout_raw) == 4
    for raw in w.stdout_raw:
        obj = json.loads(raw)
        assert "ready" in obj or "id" in obj
    assert "NVPTX Dump" in w.stderr()


def test_end_of_input_exits_cleanly(worker):
    worker.proc.stdin.close()
    assert worker.proc.wait(timeout=30) == 0


def test_without_triton(tmp_path):
    fake = tmp_path / "fake"
    (fake / "triton").mkdir(parents=True)
    (fake / "triton" / "__init__.py").write_text("raise ImportError('no triton here (test)')\n")
    w = WorkerProcess(pythonpath=[str(fake)])
    try:
        ready = w.read()
        assert ready["ready"] is True
        assert "triton" not in ready["versions"]
        assert "no triton here" in ready["missing"]["triton"]
        r = w.request(compile_request(40, str(tmp_path / "out")))
        assert r["ok"] is False and r["kind"] == "bad_request" and "not available" in r["error"]
        assert w.request({"id": 41, "op": "ping"})["ok"] is True
    finally:
        assert w.close() == 0


# ---- fork server (docs/compile-worker.md) ------------------------------------------------------

class ForkServer:
    """A worker whose stdin is a Unix socket (as the C++ pool makes it), so that fork requests
    can carry descriptors; children are talked to over the channels made here."""

    def __init__(self, extra_env=None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(REPO, "python")
        env["GEMMTUNE_WORKER_WARMUP"] = "1"
        env.update(extra_env or {})
        self.sock, theirs = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-m", "gemmtune.worker"], stdin=theirs, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=REPO)
        theirs.close()
        self.out = self.proc.stdout

    def read(self, stream=None):
        line = (stream or self.out).readline()
        assert line, "stream closed"
        return json.loads(line)

    def request(self, obj, fds=None):
        data = (json.dumps(obj) + "\n").encode()
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.sendall(data)
        return self.read()

    def fork(self, rid):
        """Returns (answer, child's stdin socket, child's stdout file)."""
        ours, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            r = self.request({"id": rid, "op": "fork"}, fds=[theirs.fileno(), out_w, err_w])
        finally:
            theirs.close()
            os.close(out_w)
            os.close(err_w)
        threading.Thread(target=lambda: os.read(err_r, 1 << 20) and None, daemon=True).start()
        return r, ours, os.fdopen(out_r, "rb")

    def close(self):
        self.sock.close()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def child_request(stdin_sock, stdout, obj):
    stdin_sock.sendall((json.dumps(obj) + "\n").encode())
    line = stdout.readline()
    assert line, "forked worker closed its stdout"
    return json.loads(line)


def test_fork_server_forks_ready_workers(tmp_path):
    triton = pytest.importorskip("triton")
    server = ForkServer()
    try:
        ready = server.read()
        assert ready["ready"] is True and "forked" not in ready
        r, stdin_sock, stdout = server.fork(50)
        assert r["ok"] is True and r["op"] == "fork" and r["id"] == 50, r
        pid = r["pid"]
        assert pid != ready["pid"]
        child_ready = json.loads(stdout.readline())
        assert child_ready["ready"] is True and child_ready["forked"] is True
        assert child_ready["pid"] == pid and child_ready["versions"]["triton"] == triton.__version__
        # The child compiles with the inherited Triton; its stdout carries only its protocol lines.
        r = child_request(stdin_sock, stdout, compile_request(51, str(tmp_path / "out")))
        assert r["ok"] is True and r["id"] == 51, r
        COMPILE_TIMES.append(r["compile_s"])
        # A second child, left running: reap with no grace kills it.
        r2, stdin2, stdout2 = server.fork(52)
        assert r2["ok"] is True and r2["pid"] not in (pid, ready["pid"])
        assert json.loads(stdout2.readline())["pid"] == r2["pid"]
        assert child_request(stdin2, stdout2, {"id": 53, "op": "ping"})["ok"] is True
        r = server.request({"id": 54, "op": "reap", "pid": r2["pid"], "grace_s": 0})
        assert r == {"id": 54, "ok": True, "op": "reap", "pid": r2["pid"], "status": "died (signal 9)", "killed": True}
        assert stdout2.readline() == b""
        # The first one exits at the end of its input: reaped with its status.
        stdin_sock.close()
        assert stdout.readline() == b""
        r = server.request({"id": 55, "op": "reap", "pid": pid, "grace_s": 10})
        assert r["status"] == "exited with status 0" and r["killed"] is False
        # Reaped children are no longer its children.
        r = server.request({"id": 56, "op": "reap", "pid": pid})
        assert r["ok"] is False and r["kind"] == "bad_request"
        stdin2.close()
    finally:
        assert server.close() == 0


def test_fork_needs_three_descriptors_over_a_socket(worker, tmp_path):
    r = worker.request({"id": 60, "op": "fork"})  # stdin is a pipe here: no descriptors can come
    assert r["ok"] is False and r["kind"] == "bad_request" and "3 descriptors" in r["error"]
    r = worker.request({"id": 61, "op": "reap", "pid": os.getpid()})
    assert r["ok"] is False and r["kind"] == "bad_request"
    server = ForkServer(extra_env={"GEMMTUNE_WORKER_BACKENDS": "none"})
    try:
        server.read()
        a, b = socket.socketpair()
        r = server.request({"id": 62, "op": "fork"}, fds=[b.fileno()])  # one descriptor: refused, closed
        b.close()
        assert r["ok"] is False and r["kind"] == "bad_request" and "3 descriptors" in r["error"]
        assert a.recv(1) == b""  # the server closed what it was sent
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            r = server.request({"id": 63, "op": "ping"}, fds=[null])
        finally:
            os.close(null)
        assert r["ok"] is True  # descriptors with another request are dropped, the request answered
        assert server.request({"id": 64, "op": "reap", "pid": 1, "grace_s": "x"})["kind"] == "bad_request"
    finally:
        assert server.close() == 0


def test_fork_server_exit_kills_its_children():
    server = ForkServer(extra_env={"GEMMTUNE_WORKER_BACKENDS": "none"})
    try:
        server.read()
        r, stdin_sock, stdout = server.fork(70)
        assert r["ok"] is True
        assert json.loads(stdout.readline())["forked"] is True
        # The child's input stays open; the server's closes: it kills and reaps the child.
        t0 = time.monotonic()
        assert server.close() == 0
        assert time.monotonic() - t0 < 10
        assert stdout.readline() == b""
        stdin_sock.close()
    finally:
        server.close()


def test_private_triton_key_only_for_the_private_cache():
    """The worker's cheap triton_key() (no hash of the installation) holds only while Triton's
    cache directory is the worker's private one; elsewhere Triton's own key is computed."""
    pytest.importorskip("triton")
    code = (
        "import triton\n"
        "from triton.runtime import cache\n"
        "from gemmtune import worker, triton_compile as tc\n"
        "real = cache.triton_key()\n"
        "worker._private_triton_key(triton.__version__)\n"
        "assert cache.triton_key() == real, 'outside the private cache: the real key'\n"
        "triton.knobs.cache.dir = tc._private_cache_dir()\n"
        "assert cache.triton_key() == 'gemmtune-worker-private ' + triton.__version__\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
