"""bench/softmax.py on the CPU with --mock (a fake GPU and engine): the files it writes, its summary,
and the one result-row schema it shares with bench/h200.py (bench/gtbench/rows.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from gtbench.mock_engine import MockEngine, MockError  # noqa: E402


def bench(script, args, tmp):
    r = subprocess.run([sys.executable, str(REPO / "bench" / script), "--mock", "--out", str(tmp), *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = list(Path(tmp).glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text()), files[0].with_suffix(".md").read_text()


def test_softmax_mock(tmp_path):
    doc, md = bench("softmax.py", ["--dtypes", "bf16,fp32", "--limit", "3", "--tag", "t"], tmp_path)
    s = doc["summary"]
    assert [p["label"] for p in s["problems"]] == [f"{r}x{c} {d}" for d in ("bf16", "fp32")
                                                   for r, c in ((524288, 1024), (131072, 4096), (32768, 16384))]
    assert set(s["by_dtype"]) == {"bf16", "fp32"} and s["by_dtype"]["bf16"]["rows"] == 3
    assert s["criteria"]["outputs_correct"] and not s["failures"]
    p = s["problems"][0]
    assert p["pick"]["backend"] == "native" and p["pick"]["tbps"] > p["torch"]["tbps"] > 0
    assert p["speedup_vs_torch"] == p["torch"]["median_us"] / p["pick"]["median_us"]
    # rows: the report's candidates (tune) and the three contenders (side by side) of every problem
    side = [r for r in doc["rows"] if r["timing"] == "side_by_side"]
    assert len(side) == 3 * 6 and {r["contender"] for r in side} == {"pick", "torch", "triton_plain"}
    assert all(r["tbps"] and r["pct_copy"] and r["correct"] for r in side)
    tune = [r for r in doc["rows"] if r["timing"] == "tune"]
    assert len(tune) == 2 * 6 and all(r["rel_err"] is None and r["role"] == "candidate" for r in tune)
    assert doc["environment"]["engine_options"]["compile"]["python_dir"] == str(REPO / "python")
    assert "| 524288x1024 | bf16 | native cluster_v8_e32_t512_c8 |" in md and "bf16_every_row_ge_1_3x_torch" in md


def test_one_row_schema(tmp_path):
    """GEMM and softmax rows have the same fields, but for each op's problem fields and its throughput
    (tflops, tbps), per kind of row (tune, side by side)."""
    gemm, _ = bench("h200.py", ["--part", "suite", "--limit", "2", "--inductor-subset", "none",
                                "--inductor-triton-subset", "none"], tmp_path / "gemm")
    soft, _ = bench("softmax.py", ["--dtypes", "bf16", "--limit", "1"], tmp_path / "softmax")
    op_fields = {"gemm": {"model", "layer", "phase", "m", "n", "k", "dtype", "dtype_name", "scale", "out_dtype",
                          "layout", "epilogue", "tflops"},
                 "softmax": {"rows", "cols", "dtype", "scale", "bytes", "tbps", "pct_copy", "worst_ratio"}}

    def schema(doc, timing):
        keys = [set(r) - op_fields[r["op"]] for r in doc["rows"] if r["timing"] == timing]
        assert keys and all(k == keys[0] for k in keys)
        return keys[0]
    for timing in ("tune", "side_by_side"):
        assert schema(gemm, timing) == schema(soft, timing)
    assert {"op", "backend", "candidate", "candidate_id", "role", "timing", "median_us", "p20_us", "p80_us", "samples",
            "spread", "rel_err", "correct", "status", "winner", "compile_s"} <= schema(soft, "tune")


def test_mock_engine_takes_the_engine_options():
    MockEngine(cache_path="c", backends=["triton"], compile={"artifacts": "a", "workers": 2, "python": "p"},
               max_configs=4, log_level="debug")
    with pytest.raises(MockError):
        MockEngine(compile={"artifact": "a"})
    with pytest.raises(MockError):
        MockEngine(log_level="loud")
    with pytest.raises(TypeError):
        MockEngine(artifacts="a")
