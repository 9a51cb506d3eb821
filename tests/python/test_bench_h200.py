"""bench/h200.py --shard I/N and --merge (what bench/device.sh GPUS=N runs), on the CPU with --mock
(a fake GPU and engine): which problems each shard takes, and a merge of two shards against one run
over the same problems (same problems, rows and counts; the timings are the mock's noise); the
engine options the bench passes; the input sets and the timing loop of bench/gtbench."""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "bench" / "h200.py"
sys.path.insert(0, str(REPO / "bench"))
from gtbench.args import gemm_args  # noqa: E402
from gtbench.gpu import Rotation, first_fn, input_set_count, time_interleaved  # noqa: E402
from gtbench.merge import raw_results  # noqa: E402
from gtbench.problems import cold_tune_problem, cold_tune_shard, load_problems, shard_problems  # noqa: E402
from gtbench.stats import geomean, summarize  # noqa: E402
from gtbench.summary import build_summary  # noqa: E402

# A small mock run with every part; no CLI for the cachehit part (the mock has no GPU for it).
MOCK = ["--mock", "--limit", "12", "--budget-s", "0", "--gemmtune-cli", "/nonexistent", "--tag", "t"]


def h200(args, rc=0, env=None):
    r = subprocess.run([sys.executable, str(H200), *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    assert r.returncode == rc, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def read_doc(folder, pattern):
    files = sorted(Path(folder).glob(pattern))
    assert len(files) == 1, f"{folder}/{pattern}: {files}"
    return json.loads(files[0].read_text())


def test_shard_selection():
    base = ["--mock", "--dtypes", "bf16,fp8"]
    ordered = load_problems(gemm_args(base))
    shards = []
    for i in range(3):
        a = gemm_args(base + ["--shard", f"{i}/3"])
        shards.append(shard_problems(load_problems(a), a))
    # round-robin over the one ordering; each problem keeps its index (its inputs' seed)
    for i, sh in enumerate(shards):
        assert [p.index for p in sh] == list(range(i, len(ordered), 3))
    keys = [p.key for sh in shards for p in sh]
    assert len(set(keys)) == len(keys) and set(keys) == {p.key for p in ordered}
    # the Inductor subsets (first in the ordering) are spread over the shards, each run by its owner only
    assert all(any(p.inductor or p.inductor_triton for p in sh) for sh in shards)
    assert sum(p.inductor_triton for sh in shards for p in sh) == sum(p.inductor_triton for p in ordered)
    # one shard runs the cold tune: the owner of its problem
    owner = cold_tune_shard(gemm_args(base + ["--shard", "2/3"]), ordered)
    cold = cold_tune_problem(gemm_args(base))
    assert any((p.m, p.n, p.k, p.dname) == (cold.m, cold.n, cold.k, cold.dname) for p in shards[owner])
    # --limit applies before the sharding
    a = gemm_args(base + ["--limit", "7", "--shard", "1/2"])
    assert [p.index for p in shard_problems(load_problems(a), a)] == [1, 3, 5]
    for bad in ("2/2", "1", "a/2", "-1/2", "1/0"):
        with pytest.raises(SystemExit):
            gemm_args(["--shard", bad])


def counts(doc):
    """What one run and the merge of its shards must agree on (everything but timings)."""
    s = doc["summary"]
    cov = s["coverage"]
    return {
        "coverage": (cov["planned"], cov["finished"], len(cov["errors"]), len(cov["skipped_not_supported"]),
                     {k: len(v) for k, v in cov["skipped_for_budget"].items()}),
        "rows": collections.Counter((r["timing"], r["backend"], r["role"]) for r in doc["rows"]),
        "row_order": [(r["m"], r["n"], r["k"], r["dtype_name"], r["timing"], r["candidate_id"]) for r in doc["rows"]],
        "problems": [p["label"] for p in s["problems"]],
        "geomean_n": {k: g["n"] for k, g in {**s["geomean"], **s["by_dtype_m"]}.items()},
        "pick_backends": s["geomean"]["all"]["pick_backends"],
        "inductor": [e["label"] for e in s["inductor"]],
        "inductor_triton": [e["label"] for e in s["inductor_triton"]["problems"]],
        "triton_candidates": s["triton"]["candidates"],
        "coldtune": s["coldtune"]["label"],
        "stability": (s["stability"]["n"], s["stability"]["same_pick"]),
        "cachehit": s["cachehit"]["in_process"]["n"],
        "mismatches": s["mismatches"], "part_errors": s["part_errors"],
    }


def test_merge_matches_one_run(tmp_path):
    h200(MOCK + ["--out", str(tmp_path / "one")])
    for i in (0, 1):
        h200(MOCK + ["--out", str(tmp_path / f"shard-{i}"), "--shard", f"{i}/2"], env={"CUDA_VISIBLE_DEVICES": str(i)})
    shard_files = [str(next((tmp_path / f"shard-{i}").glob(f"*-h200-t-shard{i}of2.json"))) for i in (0, 1)]
    h200(["--merge", *shard_files, "--out", str(tmp_path / "merged")])
    one = read_doc(tmp_path / "one", "*-h200-t.json")
    merged = read_doc(tmp_path / "merged", "*-h200-t.json")
    shard0 = json.loads(Path(shard_files[0]).read_text())

    assert counts(merged) == counts(one)
    # the library is configured through engine options (recorded), never through the environment
    opts = one["environment"]["engine_options"]
    assert "gemmtune_env" not in one["environment"] and opts["backends"] is None
    assert set(opts["compile"]) == {"artifacts", "python", "python_dir"}
    assert opts["compile"]["python_dir"] == str(REPO / "python") and opts["compile"]["artifacts"]
    assert merged["final"] and "shard" not in merged
    assert [(e["index"], e["gpu"]["cuda_visible_devices"]) for e in merged["shards"]] == [(0, "0"), (1, "1")]
    assert sum(e["coverage"]["planned"] for e in merged["shards"]) == one["summary"]["coverage"]["planned"]
    assert merged["ceilings"] == shard0["ceilings"] and all(e["ceilings"] for e in merged["shards"])
    assert merged["command"].splitlines()[1].startswith("CUDA_VISIBLE_DEVICES=1 python3 bench/h200.py")
    # one function builds the summary: rebuilt from the raw results, it is what was written
    for doc in (one, merged, shard0):
        rebuilt = json.loads(json.dumps(build_summary(raw_results(doc["summary"]), doc)))
        assert rebuilt == doc["summary"]
    md = next((tmp_path / "merged").glob("*-h200-t.md")).read_text()
    assert "Ran as 2 shards on 2 GPUs of one host" in md
    one_md = next((tmp_path / "one").glob("*-h200-t.md")).read_text()
    sections = lambda text: [line.split(",")[0] for line in text.splitlines() if line.startswith("## ")]  # noqa: E731
    assert sections(md) == sections(one_md)

    # A shard without a result: merged anyway, its problems planned but not finished, exit 2.
    h200(["--merge", shard_files[0], "--out", str(tmp_path / "half")], rc=2)
    half = read_doc(tmp_path / "half", "*-h200-t.json")
    assert half["summary"]["coverage"]["planned"] == one["summary"]["coverage"]["planned"]
    assert half["summary"]["coverage"]["finished"] == shard0["summary"]["coverage"]["finished"]
    assert any("shard 1 of 2: no result" in e for e in half["summary"]["part_errors"]) and not half["final"]
    # Not the shards of one run: refused.
    h200(["--merge", shard_files[0], shard_files[0], "--out", str(tmp_path / "bad")], rc=2)


def test_input_sets_rotate_like_the_race(tmp_path):
    l2, mem = 60 << 20, 140 << 30
    # the llama3-70b qkv m=512 fp8 pair: 88 MB of inputs -> 3 sets (over 3x L2), never fewer than 3
    assert input_set_count(88 << 20, 10 << 20, l2, mem) == 3
    assert input_set_count(1 << 20, 1 << 20, l2, mem) == 64 and input_set_count(40 << 20, 0, l2, mem) == 5
    # within 1/4 of device memory, at least one; --input-sets caps it
    assert input_set_count(20 << 30, 10 << 30, l2, mem) == 1
    assert input_set_count(88 << 20, 0, l2, mem, cap=1) == 1 and input_set_count(1 << 20, 0, l2, mem, cap=5) == 5
    calls = []
    r = Rotation([lambda j=j: calls.append(j) or j for j in range(3)])
    assert [r() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0] and calls == [0, 1, 2, 0, 1, 2, 0]
    assert first_fn(r)() == 0 and first_fn(len) is len
    # the suite rows say how many sets each contender rotated over
    h200(MOCK + ["--part", "suite", "--limit", "3", "--out", str(tmp_path)])
    side = [r for r in read_doc(tmp_path, "*-h200-t.json")["rows"] if r.get("timing") == "side_by_side"]
    # (Inductor's max-autotune mode uses CUDA graphs: set 0 only; max-autotune-no-cudagraphs rotates)
    assert {r["backend"] for r in side} >= {"cublaslt", "torch.mm", "inductor", "inductor-triton"}
    assert all(r["input_sets"] == (1 if r["backend"] == "inductor" else 3) for r in side)


def test_time_interleaved_rotates_the_order_and_flushes_before_every_sample():
    log = []

    class FakeEvent:  # a fake CUDA event: its time is the position of its record() in the log
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = len(log)

        def synchronize(self):
            pass

        def elapsed_time(self, end):  # ms, as torch: start.elapsed_time(end)
            return (end.at - self.at) / 1000.0

    class Cuda:
        Event = FakeEvent

        @staticmethod
        def synchronize():
            log.append("sync")

    class FakeTorch:
        cuda = Cuda

    fns = {"a": lambda: log.append("a"), "b": lambda: log.append("b") or log.append("b2")}
    samples, host = time_interleaved(FakeTorch, fns, rounds=4, warmup_ms=0, before_sample=lambda: log.append("F"))
    timed = log[log.index("sync", log.index("sync") + 1) + 1:]  # after two warm-up rounds
    assert timed == ["F", "a", "F", "b", "b2", "F", "b", "b2", "F", "a"] * 2
    assert samples == {"a": [1.0] * 4, "b": [2.0] * 4} and set(host) == {"a", "b"}
    st = summarize([3.0, float("nan"), 1.0, 2.0, None])
    assert st["median_us"] == 2.0 and st["samples"] == 3 and st["min_us"] == 1.0
    assert summarize([])["median_us"] is None and geomean([4.0, 1.0, 0, None]) == 2.0
