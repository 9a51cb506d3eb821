"""The compile worker's JSON-lines protocol (docs/compile-worker.md), end to end through a
real `python -m gemmtune.worker` process."""

import json
import os
import queue
import subprocess
import sys
import threading

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
