"""gemmtune's benchmarks on the H200, as a package: the entry points bench/h200.py (GEMM) and
bench/softmax.py (softmax) parse their flags and call into it.

    gpu.py          the GPU layer (TorchGpu) and its CPU stand-in (MockGpu): inputs, contenders,
                    output checks, the interleaved timing loop, ceilings; one for both ops
    inductor.py     torch.compile of the GEMM (TorchInductor, MockInductor) and what its code runs
    plain_softmax.py  the plain Triton softmax baseline
    engine.py       gemmtune's engines for the bench: their options, the softmax C API calls
    mock_engine.py  a fake engine (GEMM and softmax) for --mock
    stats.py        sample statistics
    problems.py     the suites' problems, their ordering and sharding
    rows.py         the result row: one schema for every op (bench/README.md "rows[]")
    args.py         the two command lines
    run.py          one GEMM run's state, budget and output
    parts/          ceilings, coldtune, suite, stability, cachehit (GEMM); softmax
    summary.py      summary{} from the raw results (one run, or the shards of one merged)
    merge.py        --merge: the shards of one run as that run
    render.py       the JSON and markdown files
    console.py      the per-problem log line and the summary printed last on stdout
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

T_START = time.monotonic()   # the budget and the log's clock count from here
REPO = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.1f}s] {msg}", flush=True)


def warn(msg: str) -> None:
    """A loud line on stdout (the log) and the same on stderr, prefixed by the script's name."""
    print(f"[{time.monotonic() - T_START:6.1f}s] !!! {msg}", flush=True)
    print(f"{Path(sys.argv[0]).name}: {msg}", file=sys.stderr, flush=True)
