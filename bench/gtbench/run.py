"""One GEMM run of bench/h200.py: its device, engines, budget, output folder, and the results its
parts collect (raw results, rows); write() turns them into <stem>.json and .md after every part."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from . import T_START, warn
from .engine import bindings, compile_options
from .gpu import MockGpu, TorchGpu
from .inductor import MockInductor, TorchInductor
from .mock_engine import MockEngine, MockError
from .render import write_doc
from .summary import build_summary


class Budget:
    """--budget-s: seconds from the script's start (0 = unlimited)."""

    def __init__(self, total_s):
        self.total = total_s

    def unlimited(self):
        return self.total <= 0

    def at(self, seconds_from_start):
        return math.inf if self.unlimited() else T_START + seconds_from_start

    def end(self):
        return self.at(self.total)

    def fits(self, deadline, estimate_s):
        return time.monotonic() + estimate_s <= deadline


class Run:
    def __init__(self, args):
        self.args = args
        self.budget = Budget(args.budget_s)
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
        self.stem = (f"{self.date}-h200" + (f"-{args.tag}" if args.tag else "")
                     + (f"-shard{args.shard_index}of{args.shard_count}" if args.shard else ""))
        self.tmp = Path(tempfile.mkdtemp(prefix="gemmtune-h200-"))
        self.cache1 = self.tmp / "pass1.sqlite"
        self.cache2 = self.tmp / "stability.sqlite"
        self.rows = []
        self.problems = []       # per-problem summaries (suite)
        self.stability = []
        self.cachehit = {}
        self.coldtune = {}
        self.n_inductor_dirs = 0
        self.ceilings = {}
        self.ceilings_end = {}
        self.stream = {}         # the stream ceiling (parts/stream.py), measured with the ceilings
        self.decoder = []        # per-chain summaries (decoder)
        self.part_seconds = {}
        self.errors = []         # part-level crashes
        self.mismatches = []     # correctness failures (exit 1)
        self.skipped = {"suite": [], "decoder": [], "stability": []}
        self.env = {}
        self.done = []           # (Problem, pick id, pick backend, report) of finished suite problems
        self.problems_total = 0  # suite problems planned over all shards (--shard: this shard's are a part)
        self.partial = self.out / "h200-rows.partial.jsonl"
        if self.partial.exists():
            self.partial.unlink()

        # Every engine of the run gets these options (the cold tune's child its own store): an
        # artifact store of the run's own, empty at the start (so compile times are cold), and
        # Triton compile workers on this interpreter and checkout (engine.compile_options).
        self.artifacts = Path(args.artifacts) if args.artifacts else self.tmp / "artifacts"
        self.engine_options = {"backends": args.backend_list, "tune": args.tune, "log_to_stderr": not args.quiet_engine,
                               "compile": compile_options(self.artifacts)}
        self.env["engine_options"] = self.engine_options
        self.env["cpu_count"] = os.cpu_count()
        self.env["input_sets_cap"] = args.input_sets  # 0: automatic (gpu.input_set_count)
        # The options build_summary() reads from the doc (so that --merge rebuilds the same summary).
        self.env["bench_options"] = {"inductor_triton_mode": args.inductor_triton_mode,
                                     "inductor_triton_options": args.itriton_options,
                                     "compile_hit_s": args.compile_hit_s}
        if args.mock:
            self.gpu = MockGpu(args.seed)
            self.inductor = MockInductor(self.gpu)
            self.Engine = MockEngine
            self.GemmtuneError = MockError
        else:
            # Inductor's and Triton's caches (Inductor's compile workers start with them): never a
            # warm ~/.triton; each compile then gets a fresh folder (inductor_dir).
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", args.inductor_cache_dir or str(self.tmp / "inductor"))
            os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) / "triton"))
            # torch first: gemmtune then shares the libcublasLt that torch loaded (one copy).
            self.gpu = TorchGpu(args.flush_mb)
            self.inductor = TorchInductor(self.gpu, args.inductor_mode)
            gemmtune = bindings(args.lib)
            self.Engine = gemmtune.Engine
            self.GemmtuneError = gemmtune.GemmtuneError

    def engine(self, cache_path):
        return self.Engine(cache_path=str(cache_path), **self.engine_options)

    def inductor_dir(self, tag):
        """A fresh, empty Inductor + Triton cache folder for one compile."""
        self.n_inductor_dirs += 1
        return self.tmp / f"inductor-{self.n_inductor_dirs:03d}-{tag}"

    def add_rows(self, rows):
        """Rows (rows.result_row) into the doc and, as they come, into the partial JSON Lines file."""
        self.rows.extend(rows)
        with open(self.partial, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def raw(self, planned):
        """What build_summary() aggregates: this run's own results (see merge.raw_results())."""
        return {"planned": len(planned), "problems": self.problems, "skipped": self.skipped,
                "coldtune": self.coldtune, "decoder": self.decoder, "stability": self.stability, "cachehit": self.cachehit,
                "mismatches": self.mismatches, "part_seconds": self.part_seconds, "part_errors": self.errors}

    def write(self, planned, final=False):
        a = self.args
        doc = {"device": self.env.get("device_str", ""), "date": self.date, "command": self.env.get("command", ""),
               "environment": self.env, "ceilings": self.ceilings, "ceilings_end": self.ceilings_end,
               "stream": self.stream, "rows": self.rows, "summary": None, "final": final}
        if a.shard:
            doc["shard"] = {"index": a.shard_index, "count": a.shard_count, "tag": a.tag,
                            "problems_total": self.problems_total, "gpu": self.env.get("gpu")}
        doc["summary"] = build_summary(self.raw(planned), doc)
        write_doc(self.out, self.stem, doc)
        return doc

    def finish(self):
        if self.args.keep_cache and self.cache1.exists():
            try:
                shutil.copy(self.cache1, self.out / f"{self.stem}-cache.sqlite")
            except OSError as e:
                warn(f"keep-cache: {e}")
        shutil.rmtree(self.tmp, ignore_errors=True)
