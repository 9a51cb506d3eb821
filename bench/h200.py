#!/usr/bin/env python3
"""gemmtune on the H200: ceilings, the LLM-layer suite against cuBLASLt's default, Triton's
best candidate, torch and TorchInductor (max-autotune, and max-autotune restricted to its Triton
backend), a cold tune against Inductor's compile time, tuning stability, and cache-hit select
times. One process, one script.

    python3 bench/h200.py                                  # everything, within --budget-s
    python3 bench/h200.py --part suite --dtypes bf16 --limit 4 --inductor-subset none \
        --inductor-triton-subset none                      # smoke

Writes $OUT/<YYYY-MM-DD>-h200.json and .md (bench/README.md documents the JSON), plus
h200-rows.partial.jsonl while the suite runs. The summary table is printed LAST on stdout.

Method: random inputs (never zeros), several input sets that each contender's calls rotate over
(as the engine's race); an L2 flush (a 256 MB fill)
before every timed sample, outside the timed region; warm-up; CUDA events; medians with p20 /
p80; everything compared INTERLEAVED in rounds in one process (the H200's clocks drift by up to
22% minutes apart); correctness against a float32 reference of the same inputs, and against
torch's output; NaN or mismatch fails the run (exit 1) after everything is written.

Parts (--part, comma-separated; default all):
  ceilings   copy TB/s, bf16 and fp8 TFLOP/s measured now (also re-measured at the end)
  coldtune   one problem (--cold-tune-problem): wall time of a cold gemmtune tune (a separate
             process, empty tuning cache AND empty artifact store, --cold-tune-backends) vs
             Inductor max-autotune (default gemm backends) of the same problem from a cold cache
  suite      bench/suites/llm_layers.csv x m_values.csv x --dtypes: gemmtune select (tunes from an
             empty cache) vs cuBLASLt's default (the report's is_default candidate) vs Triton's
             best correct candidate vs torch.mm / torch._scaled_mm (+ TorchInductor max-autotune on
             --inductor-subset, + max-autotune restricted to Triton on --inductor-triton-subset)
  stability  re-tune every finished suite problem from an EMPTY cache (a second engine) and
             compare picks; different picks are timed head to head
  cachehit   in a separate process (the gemmtune CLI's `suite --cache`), answer every finished
             problem from pass 1's cache; select_ms per problem (target < 1 ms)
A time budget (--budget-s) keeps the run inside one device call: problems are ordered (the
Inductor subset first, then a fixed shuffle) and a part stops taking new problems when the next
one would not fit; the JSON says what was covered and what was skipped.
--mock runs the whole flow on the CPU with a fake GPU and a fake engine (no torch, no library):
a self-test of the bench's own logic.

Several GPUs of one host (bench/device.sh GPUS=N): N processes, --shard I/N each on its own GPU
(every Nth problem of the ordering), then --merge of their JSON files writes the one run's .json and
.md; the summary is built by one function (build_summary) from the raw results in both cases.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

T_START = time.monotonic()
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from benchlib import geomean, quantile, summarize, time_interleaved  # noqa: E402

PARTS = ("ceilings", "coldtune", "suite", "stability", "cachehit")
DTYPES = {
    # name -> (gemmtune dtype, scale mode, baseline name)
    "bf16": ("bf16", "none", "torch.mm"),
    "fp8": ("e4m3", "tensorwise", "torch._scaled_mm"),
    "fp8-rowwise": ("e4m3", "rowwise", "torch._scaled_mm"),
}
DEFAULT_INDUCTOR_SUBSET = ("16:llama3-70b:qkv,128:llama3-70b:down,2048:llama3-70b:gate_up,"
                           "8192:llama3-70b:o,8192:llama3-70b:down")
# The Triton-only Inductor comparison: the same five bf16 problems, and three of them in fp8 with
# tensorwise and with rowwise scales (Inductor's Triton scaled-mm templates take both). Entries whose
# dtype is not in --dtypes are ignored.
DEFAULT_INDUCTOR_TRITON_SUBSET = (DEFAULT_INDUCTOR_SUBSET + ","
                                  "128:llama3-70b:down:fp8,2048:llama3-70b:gate_up:fp8,8192:llama3-70b:o:fp8,"
                                  "128:llama3-70b:down:fp8-rowwise,2048:llama3-70b:gate_up:fp8-rowwise,"
                                  "8192:llama3-70b:o:fp8-rowwise")
DEFAULT_COLD_TUNE_PROBLEM = "2048:llama3-70b:gate_up"
INDUCTOR_TRITON_TARGET = 0.98   # the issue's bar: Triton's best >= 0.98x Inductor-Triton's pick (geomean)


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.1f}s] {msg}", flush=True)


def warn(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.1f}s] !!! {msg}", flush=True)
    print(f"h200.py: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# arguments

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="gemmtune H200 benchmark: ceilings, suite vs cuBLASLt default / torch / Inductor, "
                    "stability, cache-hit times. Writes $OUT/<date>-h200.json and .md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python3 bench/h200.py                                  # all parts, default budget\n"
               "  python3 bench/h200.py --dtypes bf16 --budget-s 0        # bf16 only, no time limit\n"
               "  python3 bench/h200.py --part suite --limit 4 --inductor-subset none --inductor-triton-subset none   # smoke\n"
               "  python3 bench/h200.py --backends cublaslt,triton --dtypes bf16,fp8,fp8-rowwise --part ceilings,coldtune,suite\n"
               "  python3 bench/h200.py --mock --out /tmp/h200-mock      # CPU self-test of this script\n"
               "  CUDA_VISIBLE_DEVICES=1 python3 bench/h200.py --shard 1/2 --out OUT/shard-1   # one shard of two\n"
               "  python3 bench/h200.py --merge OUT/shard-*/*.json --out OUT                    # the run's report\n")
    ap.add_argument("--part", default=",".join(PARTS), help=f"comma-separated parts to run: {','.join(PARTS)} (default: all)")
    ap.add_argument("--dtypes", default="bf16,fp8", help="comma-separated: bf16, fp8 (e4m3, tensorwise scales, bf16 out), "
                    "fp8-rowwise (rowwise scales; kept only where gemmtune has a correct candidate). Default bf16,fp8")
    ap.add_argument("--layers", default=str(REPO / "bench/suites/llm_layers.csv"), help="comma-separated CSVs: model,layer,n,k (crossed with the m values) or m,n,k")
    ap.add_argument("--m-file", default=str(REPO / "bench/suites/m_values.csv"), help="CSV phase,m")
    ap.add_argument("--m-values", default="", help="comma-separated m values to keep (default: all of --m-file)")
    ap.add_argument("--models", default="", help="comma-separated model names (or model/layer) to keep (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="at most N suite problems (after ordering; 0 = all)")
    ap.add_argument("--inductor-subset", default=DEFAULT_INDUCTOR_SUBSET,
                    help="problems also run through torch.compile(mode='max-autotune'): comma-separated "
                         "m:model:layer[:dtype] (dtype bf16 unless given), or 'none' (default: %(default)s)")
    ap.add_argument("--inductor-mode", default="max-autotune",
                    help="torch.compile mode for the subset (default %(default)s; its CUDA graphs see A and W as "
                         "static inputs, as a model's weights are, so nothing is copied per call)")
    ap.add_argument("--inductor-triton-subset", default=DEFAULT_INDUCTOR_TRITON_SUBSET,
                    help="problems also run through torch.compile max-autotune RESTRICTED TO ITS TRITON BACKEND "
                         "(max_autotune_gemm_backends='TRITON'; rows with backend inductor-triton), timed beside "
                         "gemmtune's pick and Triton's best: m:model:layer[:dtype], or 'none'; entries whose dtype "
                         "is not in --dtypes are ignored (default: %(default)s)")
    ap.add_argument("--inductor-triton-mode", default="max-autotune-no-cudagraphs",
                    help="mode whose options (torch._inductor.list_mode_options) the Triton-only compile uses, plus "
                         "max_autotune_gemm_backends='TRITON' (default %(default)s: kernels compared without CUDA graphs)")
    ap.add_argument("--inductor-triton-options", default="",
                    help="extra Inductor config for the Triton-only compile as JSON, e.g. "
                         "'{\"triton.enable_persistent_tma_matmul\": true}' (default: none)")
    ap.add_argument("--inductor-triton-estimate-s", type=float, default=20.0,
                    help="budget estimate of one Triton-only Inductor compile before one was measured (default %(default)s)")
    ap.add_argument("--cold-tune-problem", default=DEFAULT_COLD_TUNE_PROBLEM,
                    help="coldtune part: m:model:layer[:dtype] from --layers (default: %(default)s, bf16)")
    ap.add_argument("--cold-tune-backends", default="cublaslt,triton",
                    help="coldtune part: gemmtune backends of the cold tune (default %(default)s)")
    ap.add_argument("--cold-tune-pack", default="",
                    help="coldtune part: the child's artifact store starts as a copy of this kernel pack (e.g. the "
                         "CUTLASS instances of scripts/precompile-cutlass.sh: loaded, not compiled) instead of empty")
    ap.add_argument("--cold-tune-timeout-s", type=float, default=300.0,
                    help="coldtune part: kill the cold gemmtune tune after this (default %(default)s)")
    ap.add_argument("--artifacts", default="", help="GEMMTUNE_ARTIFACTS of the bench's engines (default: a fresh "
                    "temporary folder, so the suite's Triton compiles are cold)")
    ap.add_argument("--compile-hit-s", type=float, default=0.05,
                    help="Triton candidates prepared faster than this count as artifact-store hits in the compile-time "
                         "statistics (a real compile takes tenths of a second; default %(default)s)")
    ap.add_argument("--cold-tune-child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall-time budget of this script from its start (0 = unlimited); parts stop taking "
                         "new problems when the next would not fit (default %(default)s)")
    ap.add_argument("--reserve-s", type=float, default=40.0,
                    help="seconds of the budget kept for cachehit, the final ceilings and writing (default %(default)s)")
    ap.add_argument("--suite-share", type=float, default=0.6,
                    help="share of the budget (less a reserve) the suite may use when stability also runs")
    ap.add_argument("--rounds", type=int, default=30, help="interleaved rounds of side-by-side timing (one sample of "
                    "each contender per round; default %(default)s)")
    ap.add_argument("--warmup-ms", type=float, default=30.0, help="warm-up per problem before timing (default %(default)s)")
    ap.add_argument("--ceiling-rounds", type=int, default=20, help="interleaved rounds for the ceilings")
    ap.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer, MiB (default %(default)s)")
    ap.add_argument("--input-sets", type=int, default=0,
                    help="at most N input sets per problem, which every contender's timed calls rotate over "
                         "(default 0: as the engine's race, enough to exceed 3x L2, at least 3; 1 = one set)")
    ap.add_argument("--tol", type=float, default=1e-2, help="max relative error (Frobenius) vs the fp32 reference and "
                    "vs torch's output (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1234, help="inputs and problem order")
    ap.add_argument("--backends", default="", help="gemmtune backends (default: all available)")
    ap.add_argument("--tune-json", default="", help="gemmtune TuneOptions as JSON, e.g. '{\"max_rounds\": 10}' "
                    "(default: the engine's defaults)")
    ap.add_argument("--tag", default="", help="file name suffix: <date>-h200-<tag>.json (e.g. bf16, fp8: two calls, two files)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="output folder (default $OUT, else ./bench-out)")
    ap.add_argument("--lib", default="", help="libgemmtune_c.so or its folder (default $GEMMTUNE_LIB, else build/)")
    ap.add_argument("--gemmtune-cli", default=str(REPO / "build/gemmtune"), help="the gemmtune CLI for the cachehit part")
    ap.add_argument("--inductor-cache-dir", default="", help="TORCHINDUCTOR_CACHE_DIR (default: a fresh temporary "
                    "folder, so compile times are cold)")
    ap.add_argument("--quiet-engine", action="store_true", help="do not pass the engine's progress log to stderr")
    ap.add_argument("--keep-cache", action="store_true", help="also copy pass 1's tuning cache into the output folder")
    ap.add_argument("--mock", action="store_true", help="CPU self-test: fake GPU and engine, no torch, no library")
    ap.add_argument("--shard", default="", metavar="I/N",
                    help="run shard I of N (0 <= I < N; bench/device.sh GPUS=N runs one per GPU): after the ordering "
                         "and --limit, only the suite problems whose index %% N == I (their Inductor compiles and "
                         "stability / cachehit with them); coldtune only in the shard that owns its problem (else "
                         "shard 0); ceilings on every shard's own GPU. Writes <date>-h200[-tag]-shardIofN.json")
    ap.add_argument("--merge", nargs="+", default=None, metavar="SHARD.json",
                    help="merge the JSON files of the shards of one run (--shard I/N) into one "
                         "<date>-h200[-tag].json and .md in --out, as one run would have written them; nothing is run")
    args = ap.parse_args(argv)

    args.parts = [p.strip() for p in args.part.split(",") if p.strip()]
    for p in args.parts:
        if p not in PARTS:
            ap.error(f"--part: unknown part '{p}' (known: {', '.join(PARTS)})")
    args.dtype_list = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in args.dtype_list:
        if d not in DTYPES:
            ap.error(f"--dtypes: unknown dtype '{d}' (known: {', '.join(DTYPES)})")
    if ("stability" in args.parts or "cachehit" in args.parts) and "suite" not in args.parts:
        ap.error("--part: stability and cachehit work on the problems the suite part finished; add suite")
    try:
        args.m_keep = {int(x) for x in args.m_values.split(",") if x.strip()}
    except ValueError:
        ap.error(f"--m-values: '{args.m_values}' is not a comma-separated list of integers")
    args.model_keep = [x.strip() for x in args.models.split(",") if x.strip()]

    def subset(text, flag):
        out = set()
        if text.strip().lower() in ("", "none"):
            return out
        for item in text.split(","):
            if item.strip():
                out.add(parse_problem_ref(item, flag, ap))
        return out
    args.subset = subset(args.inductor_subset, "--inductor-subset")
    args.triton_subset = subset(args.inductor_triton_subset, "--inductor-triton-subset")
    args.cold_problem = parse_problem_ref(args.cold_tune_problem, "--cold-tune-problem", ap)
    args.cold_backends = [b.strip() for b in args.cold_tune_backends.split(",") if b.strip()]
    args.itriton_options = {}
    if args.inductor_triton_options:
        try:
            args.itriton_options = json.loads(args.inductor_triton_options)
        except json.JSONDecodeError as e:
            ap.error(f"--inductor-triton-options: {e}")
        if not isinstance(args.itriton_options, dict):
            ap.error("--inductor-triton-options: a JSON object")
    args.tune = None
    if args.tune_json:
        try:
            args.tune = json.loads(args.tune_json)
        except json.JSONDecodeError as e:
            ap.error(f"--tune-json: {e}")
    args.backend_list = [b.strip() for b in args.backends.split(",") if b.strip()] or None
    if args.rounds < 3:
        ap.error("--rounds: at least 3")
    if args.input_sets < 0:
        ap.error("--input-sets: 0 (automatic) or a positive count")
    args.shard_index, args.shard_count = 0, 1
    if args.shard:
        i, _, n = args.shard.partition("/")
        if not (i.isdigit() and n.isdigit() and int(i) < int(n)):
            ap.error(f"--shard: '{args.shard}' is not I/N with 0 <= I < N")
        args.shard_index, args.shard_count = int(i), int(n)
    if args.merge and args.shard:
        ap.error("--merge and --shard: one or the other")
    if not args.out:
        args.out = str(Path.cwd() / "bench-out")
    return args


def parse_problem_ref(item, flag, ap):
    """'m:model:layer[:dtype]' -> (m, model, layer, dtype name); dtype bf16 unless given."""
    parts = item.strip().split(":")
    if len(parts) not in (3, 4) or not parts[0].isdigit():
        ap.error(f"{flag}: '{item}' is not m:model:layer[:dtype]")
    dname = parts[3] if len(parts) == 4 else "bf16"
    if dname not in DTYPES:
        ap.error(f"{flag}: '{item}': unknown dtype '{dname}' (known: {', '.join(DTYPES)})")
    return (int(parts[0]), parts[1], parts[2], dname)


def input_set_count(in_bytes, out_bytes, l2_bytes, mem_bytes, cap=0):
    """How many input sets a problem's timed calls rotate over: like the engine's race (GpuBench),
    enough to exceed 3x L2, and at least 3 so that no single buffer placement decides a timing
    (a suite run once timed a pair 4-6% apart one way on one set; a fresh process, the other way);
    within 1/4 of device memory; cap > 0 caps it (1 = the bench of sessions 1-4)."""
    n = max(3, -(-3 * l2_bytes // max(in_bytes, 1)))
    n = min(n, 64, max(1, (mem_bytes // 4) // max(in_bytes + out_bytes, 1)))
    return max(1, min(n, cap) if cap > 0 else n)


def input_sets(gpu, p, seed: int, cap: int):
    """[x, ...]: input_set_count() sets of p on `gpu` (its l2_bytes, mem_bytes, make_inputs); set 0
    is make_inputs(p, seed), set j seed + j*1000003."""
    in_bytes = (p.m * p.k + p.n * p.k) * p.in_size
    n = input_set_count(in_bytes, p.m * p.n * 2, gpu.l2_bytes, gpu.mem_bytes, cap)
    return [gpu.make_inputs(p, seed + j * 1000003) for j in range(n)]


class Rotation:
    """One contender over several input sets: each call runs the next set's function (set 0's
    is `first`, which the correctness check calls)."""

    def __init__(self, fns):
        self.fns, self.i = list(fns), 0

    @property
    def first(self):
        return self.fns[0]

    def __call__(self):
        f = self.fns[self.i]
        self.i = (self.i + 1) % len(self.fns)
        return f()


def first_fn(fn):
    return fn.first if isinstance(fn, Rotation) else fn


def tflops(flops, us):
    return flops / us * 1e-6 if us else None


def fnum(x, digits=1, none="-"):
    if x is None:
        return none
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}f}"


def fratio(x):
    return "-" if x is None else f"{x:.3f}"


def duel_text(notes):
    """The race's duels (engine notes 'duel: A (champion) vs B: paired time ratio 1.0123 ->
    challenger'), shortened to 'ratio 1.0123 -> challenger' and joined by '; '."""
    if isinstance(notes, str):
        notes = [notes] if notes else []
    if not notes:
        return "-"
    return "; ".join(n.split(": paired time ", 1)[-1] if ": paired time " in n else n for n in notes)


def fpct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


# ---------------------------------------------------------------------------------------------
# problems

class Problem:
    def __init__(self, model, layer, phase, m, n, k, dname):
        self.model, self.layer, self.phase = model, layer, phase
        self.m, self.n, self.k = m, n, k
        self.dname = dname
        self.dtype, self.scale, self.baseline = DTYPES[dname]
        self.inductor = False          # also torch.compile max-autotune (default gemm backends)
        self.inductor_triton = False   # also torch.compile max-autotune restricted to Triton
        self.index = 0

    @property
    def label(self):
        return f"{self.model}/{self.layer} m={self.m} {self.dname}"

    @property
    def slug(self):
        return f"{self.m}x{self.n}x{self.k}-{self.dname}"

    @property
    def key(self):
        return (self.model, self.layer, self.m, self.n, self.k, self.dname)

    def gt(self):
        """The C API's problem JSON: D[m,n] = A[m,k] @ W[n,k]^T (layout rc), out bf16."""
        d = {"m": self.m, "n": self.n, "k": self.k, "dtype": self.dtype, "layout": "rc", "d_layout": "r"}
        if self.scale != "none":
            d["scale"] = self.scale
            d["out_dtype"] = "bf16"
        return d

    @property
    def flops(self):
        return 2.0 * self.m * self.n * self.k

    @property
    def in_size(self):
        return 2 if self.dtype == "bf16" else 1

    @property
    def min_bytes(self):
        return (self.m * self.k + self.n * self.k) * self.in_size + self.m * self.n * 2

    def fields(self):
        return {"op": "gemm", "model": self.model, "layer": self.layer, "phase": self.phase, "m": self.m,
                "n": self.n, "k": self.k, "dtype": self.dtype, "dtype_name": self.dname, "scale": self.scale,
                "out_dtype": "bf16", "layout": "rc", "epilogue": "none"}


def read_csv(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("#")]
    if not rows:
        raise SystemExit(f"{path}: empty")
    head = [h.strip().lower() for h in rows[0]]
    return [dict(zip(head, (c.strip() for c in r))) for r in rows[1:]]


def read_layers(args):
    # --layers: comma-separated CSVs, each either model,layer,n,k (crossed with the m values)
    # or m,n,k (e.g. squares.csv: model "square").
    layers = []
    for path in args.layers.split(","):
        for row in read_csv(path):
            if "m" in row:
                row = dict(row, model=row.get("model", "square"), layer=row.get("layer", f"{row['m']}x{row['n']}x{row['k']}"))
            layers.append(row)
    return layers


def cold_tune_problem(args):
    """The --cold-tune-problem as a Problem (looked up in --layers, whatever --models / --m-values say)."""
    m, model, layer, dname = args.cold_problem
    for lay in read_layers(args):
        if lay.get("model") == model and lay.get("layer") == layer:
            return Problem(model, layer, "cold", m, int(lay["n"]), int(lay["k"]), dname)
    raise RuntimeError(f"--cold-tune-problem: no layer {model}/{layer} in {args.layers}")


def load_problems(args):
    layers = read_layers(args)
    ms = read_csv(args.m_file)
    out = []
    seen = {}  # (m, n, k, dtype) -> problem: layers of the same shape are one problem, named by all
    matched = set()
    for dname in args.dtype_list:
        for lay in layers:
            model, layer = lay.get("model", ""), lay.get("layer", "")
            if args.model_keep and model not in args.model_keep and f"{model}/{layer}" not in args.model_keep:
                continue
            for mv in ([{"m": lay["m"], "phase": "square"}] if "m" in lay else ms):
                m = int(mv["m"])
                if args.m_keep and m not in args.m_keep:
                    continue
                key = (m, int(lay["n"]), int(lay["k"]), dname)
                inductor = (m, model, layer, dname) in args.subset
                inductor_triton = (m, model, layer, dname) in args.triton_subset
                if inductor or inductor_triton:
                    matched.add((m, model, layer, dname))
                if key in seen:
                    q = seen[key]
                    if layer == q.layer:
                        q.model += "+" + model
                    else:
                        q.layer += "+" + model + "/" + layer
                    q.inductor = q.inductor or inductor
                    q.inductor_triton = q.inductor_triton or inductor_triton
                    continue
                p = Problem(model, layer, mv.get("phase", ""), m, int(lay["n"]), int(lay["k"]), dname)
                p.inductor = inductor
                p.inductor_triton = inductor_triton
                seen[key] = p
                out.append(p)
    # The Inductor subsets first (their compile times must not be cut by the budget), then a
    # fixed shuffle, so that a budget-limited run still covers every model, m and dtype.
    # Subset entries that name no planned problem (a dtype not in --dtypes, a typo, --models ...).
    args.subset_unmatched = {"inductor": sorted(":".join(map(str, r)) for r in args.subset - matched),
                             "inductor_triton": sorted(":".join(map(str, r)) for r in args.triton_subset - matched)}
    first = [p for p in out if p.inductor or p.inductor_triton]
    rest = [p for p in out if not (p.inductor or p.inductor_triton)]
    random.Random(args.seed).shuffle(rest)
    ordered = first + rest
    if args.limit > 0:
        ordered = ordered[:args.limit]
    for i, p in enumerate(ordered):
        p.index = i
    return ordered


def shard_problems(ordered, args):
    """--shard I/N: the problems whose index % N == I, round-robin over the ordering so that every
    shard gets a similar mix (the Inductor subsets first, then the shuffle). A problem keeps its
    index in the whole ordering (its inputs' seed), so a shard times exactly what one run would."""
    return [p for p in ordered if p.index % args.shard_count == args.shard_index]


def cold_tune_shard(args, ordered):
    """The shard that runs the coldtune part: the one that owns its problem in the suite's ordering,
    else shard 0 (one cold tune per run, whatever the number of shards)."""
    try:
        c = cold_tune_problem(args)
    except RuntimeError:
        return 0
    owner = next((p for p in ordered if (p.m, p.n, p.k, p.dname) == (c.m, c.n, c.k, c.dname)), None)
    return owner.index % args.shard_count if owner else 0


# ---------------------------------------------------------------------------------------------
# the time budget

class Budget:
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


def estimate(durations, default):
    """A cautious guess for the next item: the larger of the median and the mean of the last 5."""
    if not durations:
        return default
    last = durations[-5:]
    return max(statistics.median(durations), sum(last) / len(last))


# ---------------------------------------------------------------------------------------------
# the GPU side (torch). Everything that touches the device is here.

class TorchGpu:
    def __init__(self, args):
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit("h200.py: torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.dev = torch.device("cuda")
        props = torch.cuda.get_device_properties(self.dev)
        self.l2_bytes, self.mem_bytes = props.L2_cache_size, props.total_memory
        self.flush_buf = torch.empty(args.flush_mb << 20, dtype=torch.int8, device=self.dev)
        self.flush_count = 0
        self.stream_ptr = torch.cuda.current_stream().cuda_stream
        self.inductor_init_s = None
        self.inductor_mode = args.inductor_mode
        try:
            torch.cuda._sleep(10)
            self.can_sleep = True
        except Exception:
            self.can_sleep = False
        self.mm_nt = lambda a, w: torch.mm(a, w.t())  # what torch.compile compiles
        # A spin of ~50 us after the flush: the host enqueues (event, kernel, event) while the
        # GPU is busy, so host-side launch overhead (Inductor's guards, ctypes) is never timed.
        self.sleep_cycles = 100_000

    def versions(self):
        t = self.torch
        v = {"torch": t.__version__, "torch_cuda": t.version.cuda, "device_name": t.cuda.get_device_name(0),
             "capability": ".".join(map(str, t.cuda.get_device_capability(0)))}
        try:
            import triton
            v["triton"] = triton.__version__
        except Exception as e:
            v["triton"] = f"unavailable: {e}"
        return v

    def empty_cache(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def sync(self):
        self.torch.cuda.synchronize()

    # -- inputs and contenders -----------------------------------------------------------------
    def make_inputs(self, p: Problem, seed: int):
        t = self.torch
        g = t.Generator(device=self.dev)
        g.manual_seed(seed)
        x = {"problem": p}
        if p.dtype == "bf16":
            x["a"] = t.randn(p.m, p.k, device=self.dev, dtype=t.bfloat16, generator=g)
            x["w"] = t.randn(p.n, p.k, device=self.dev, dtype=t.bfloat16, generator=g)
            x["sa"] = x["sb"] = None
        else:
            x["a"] = t.randn(p.m, p.k, device=self.dev, dtype=t.bfloat16, generator=g).to(t.float8_e4m3fn)
            x["w"] = t.randn(p.n, p.k, device=self.dev, dtype=t.bfloat16, generator=g).to(t.float8_e4m3fn)
            if p.scale == "tensorwise":
                x["sa"] = (t.rand((), device=self.dev, generator=g) + 0.5).float()
                x["sb"] = (t.rand((), device=self.dev, generator=g) + 0.5).float()
            else:  # rowwise: sa[m] (as [m,1]) and sb[n] (as [1,n]), contiguous
                x["sa"] = (t.rand(p.m, 1, device=self.dev, generator=g) + 0.5).float()
                x["sb"] = (t.rand(1, p.n, device=self.dev, generator=g) + 0.5).float()
        # gemmtune's output for this set, shared by its contenders (as the race's sets are);
        # the correctness check poisons it before each contender's call.
        x["d"] = t.empty(p.m, p.n, device=self.dev, dtype=t.bfloat16)
        return x

    def baseline_fn(self, p: Problem, x):
        t = self.torch
        a, wt, sa, sb = x["a"], x["w"].t(), x["sa"], x["sb"]
        if p.dtype == "bf16":
            return lambda: t.mm(a, wt)
        return lambda: t._scaled_mm(a, wt, scale_a=sa, scale_b=sb, out_dtype=t.bfloat16)

    def gemmtune_fn(self, kernel, p: Problem, x):
        """(fn, D): one call of the kernel on set x, into the set's D."""
        d = x["d"]
        a_ptr, w_ptr, d_ptr = x["a"].data_ptr(), x["w"].data_ptr(), d.data_ptr()
        sa_ptr = x["sa"].data_ptr() if x["sa"] is not None else 0
        sb_ptr = x["sb"].data_ptr() if x["sb"] is not None else 0
        run, sp = kernel.run, self.stream_ptr

        def fn():
            run(a_ptr, w_ptr, 0, d_ptr, 0, sa_ptr, sb_ptr, sp)
            return d
        return fn, d

    def inductor_init(self):
        """Inductor's one-time start-up (imports, compile worker pool), kept out of the per-problem
        compile times; its seconds in inductor_init_s."""
        if self.inductor_init_s is not None:
            return
        t = self.torch
        import torch._dynamo
        t0 = time.perf_counter()
        torch._dynamo.reset()
        a0 = t.randn(256, 256, device=self.dev, dtype=t.bfloat16)
        t.compile(self.mm_nt, mode=self.inductor_mode, dynamic=False)(a0, a0)
        self.sync()
        self.inductor_init_s = time.perf_counter() - t0

    def inductor_reset(self):
        """Drops every compiled function (and CUDA graph pools) of earlier problems. Never between
        two compiles of one problem: a reset clears the caches of every compiled function, and the
        first would compile again when called."""
        import torch._dynamo
        torch._dynamo.reset()

    def _gemm_fn(self, p: Problem, tag: str):
        """A new function (its own code object, so its own Dynamo cache) computing the problem as
        torch does: a @ w.t(), or torch._scaled_mm(a, w.t(), sa, sb, out_dtype=bf16)."""
        self.n_fns = getattr(self, "n_fns", 0) + 1
        name = f"gemm_{tag.replace('-', '_')}_{self.n_fns}"
        if p.dtype == "bf16":
            src = f"def {name}(a, w):\n    return torch.mm(a, w.t())\n"
        else:
            src = (f"def {name}(a, w, sa, sb):\n"
                   f"    return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)\n")
        ns = {"torch": self.torch}
        exec(compile(src, f"<h200 {name}>", "exec"), ns)
        return ns[name]

    def _first_call_with_code(self, f, args):
        """Calls f (compiling it) and returns the wrapper code Inductor generated, captured as
        torch._inductor.utils.run_and_get_code does but without its Dynamo reset (which would drop
        the other compiled function of the problem). [] when the hook is not there."""
        codes = []
        try:
            from unittest import mock
            from torch._inductor.graph import GraphLowering
            hook = hasattr(GraphLowering, "save_output_code")
        except Exception:
            hook = False
        if hook:
            with mock.patch.object(GraphLowering, "save_output_code", lambda *a: codes.append(a[-1])):
                f(*args)
        else:
            f(*args)
        return codes

    def inductor_defaults(self):
        """Inductor's gemm backends as configured in this process (what plain max-autotune uses)."""
        try:
            import torch._inductor.config as ic
            return {"max_autotune_gemm_backends": ic.max_autotune_gemm_backends,
                    "enable_persistent_tma_matmul": getattr(ic.triton, "enable_persistent_tma_matmul", None)}
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}

    def _fresh_inductor_cache(self, d):
        """What torch._inductor.utils.fresh_cache does, without deleting the folder at the end (the
        compiled module and kernels are used after the compile): empty cache folders for Inductor
        and Triton, and Inductor's in-memory caches cleared."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(d)
        os.environ["TRITON_CACHE_DIR"] = str(d / "triton")
        try:
            import torch._inductor.utils as iu
            clear = getattr(iu, "clear_caches", None) or getattr(iu, "clear_inductor_caches", None)
            if clear is not None:
                clear()
        except Exception as e:
            warn(f"inductor: clearing its in-memory caches failed ({type(e).__name__}: {e})")

    def inductor_fn(self, p: Problem, xs, mode, backends=None, extra_options=None, fresh_dir=None, code_path=None):
        """(fn, compile_s, info): torch.compile of a @ w.t() (fp8: torch._scaled_mm with the problem's
        scales, bf16 out), compiled now from a cold cache (fresh_dir) on input set xs[0]. fn rotates
        over the sets xs (a Rotation) unless the mode uses CUDA graphs, whose static input
        addresses would re-record per set: then it runs on xs[0]. backends=None: the mode as is
        (Inductor's default gemm backends); else the mode's options plus max_autotune_gemm_backends
        = backends (e.g. "TRITON") and extra_options. info: options, the generated code's kernels and
        whether it calls an ATen/extern GEMM (kind 'triton', 'aten', 'mixed' or 'unknown')."""
        t = self.torch
        import torch._dynamo
        import torch._inductor
        self.inductor_init()
        if fresh_dir is not None:
            self._fresh_inductor_cache(fresh_dir)
        fn = self._gemm_fn(p, backends or "default")
        args_of = (lambda x: (x["a"], x["w"])) if p.dtype == "bf16" else (lambda x: (x["a"], x["w"], x["sa"], x["sb"]))
        args = args_of(xs[0])
        if backends is None and not extra_options:
            options = dict(torch._inductor.list_mode_options(mode))
            f = t.compile(fn, mode=mode, dynamic=False)
        else:
            # torch.compile takes a mode or options, not both: the mode's options, then ours.
            options = dict(torch._inductor.list_mode_options(mode))
            if backends is not None:
                options["max_autotune_gemm_backends"] = backends
            options.update(extra_options or {})
            f = t.compile(fn, options=options, dynamic=False)
        if options.get("triton.cudagraphs"):
            # Without this, CUDA graphs copy every non-static input into the graph's own buffers
            # before each replay: a copy of W per call, which a model (whose weights are
            # parameters) never pays.
            try:
                for a in args:
                    torch._dynamo.mark_static_address(a)
            except Exception as e:
                warn(f"inductor: mark_static_address failed ({e}); inputs may be copied per call")
        t0 = time.perf_counter()
        codes = self._first_call_with_code(f, args)
        self.sync()
        compile_s = time.perf_counter() - t0
        info = {"mode": mode, "options": {k: v for k, v in options.items()}, **analyze_inductor_code(codes)}
        if code_path is not None and codes:
            try:
                Path(code_path).parent.mkdir(parents=True, exist_ok=True)
                Path(code_path).write_text("\n\n# ---- next module ----\n\n".join(codes))
                info["code_file"] = str(Path(code_path).name)
            except OSError as e:
                info["code_file_error"] = str(e)
        if options.get("triton.cudagraphs"):
            return (lambda: f(*args)), compile_s, info
        return Rotation([(lambda xa=args_of(x): f(*xa)) for x in xs]), compile_s, info

    # -- correctness -------------------------------------------------------------------------------
    def reference(self, p: Problem, x):
        a32, w32 = x["a"].float(), x["w"].float()
        ref = a32 @ w32.t()
        del a32, w32
        if x["sa"] is not None:
            ref.mul_(x["sa"]).mul_(x["sb"])
        return ref

    def poison(self, out):
        out.fill_(float("nan"))

    def check(self, out, ref):
        """(relative Frobenius error vs ref, all finite)."""
        t = self.torch
        o = out.float()
        finite = bool(t.isfinite(o).all().item())
        rel = (t.linalg.vector_norm(o - ref) / t.linalg.vector_norm(ref)).item()
        return rel, finite

    def rel_diff(self, out, other):
        t = self.torch
        o, r = out.float(), other.float()
        return (t.linalg.vector_norm(o - r) / t.linalg.vector_norm(r)).item()

    # -- timing --------------------------------------------------------------------------------
    def _flush(self, spin_scale=1):
        self.flush_count += 1
        self.flush_buf.fill_(self.flush_count & 0x7F)
        if self.can_sleep:
            self.torch.cuda._sleep(self.sleep_cycles * spin_scale)

    def time_interleaved(self, fns, rounds, warmup_ms, spin_scale=1):
        """{name: [us, ...]}: benchlib.time_interleaved with an L2 flush and a GPU spin before each
        sample. spin_scale lengthens the spin (contenders with a heavy host side: Inductor's
        wrapper). The host time of each call is kept in last_host_us (median per name) with the
        spin's length (last_spin_us, at most; at 2 GHz)."""
        self.last_spin_us = (self.sleep_cycles * spin_scale / 2000.0) if self.can_sleep else 0.0
        out, self.last_host_us = time_interleaved(self.torch, fns, rounds, warmup_ms, lambda: self._flush(spin_scale))
        return out

    def ceilings(self, rounds):
        t = self.torch
        src = t.randint(-128, 127, (1 << 30,), dtype=t.int8, device=self.dev)
        dst = t.empty_like(src)
        nb = 8192
        a = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
        b = t.randn(nb, nb, device=self.dev, dtype=t.bfloat16)
        a8, b8 = a.to(t.float8_e4m3fn), b.to(t.float8_e4m3fn)
        one = t.ones((), device=self.dev, dtype=t.float32)
        bt, b8t = b.t(), b8.t()
        fns = {"copy": lambda: dst.copy_(src), "bf16": lambda: t.mm(a, bt),
               "fp8": lambda: t._scaled_mm(a8, b8t, scale_a=one, scale_b=one, out_dtype=t.bfloat16)}
        s = self.time_interleaved(fns, rounds, warmup_ms=300)
        st = {k: summarize(v) for k, v in s.items()}
        flops = 2.0 * nb ** 3
        copy_bytes = 2.0 * src.numel()
        res = {"copy_TBps": copy_bytes / st["copy"]["median_us"] * 1e-6,
               "bf16_tflops": flops / st["bf16"]["median_us"] * 1e-6,
               "fp8_tflops": flops / st["fp8"]["median_us"] * 1e-6,
               "copy_TBps_best": copy_bytes / st["copy"]["min_us"] * 1e-6,
               "bf16_tflops_best": flops / st["bf16"]["min_us"] * 1e-6,
               "fp8_tflops_best": flops / st["fp8"]["min_us"] * 1e-6,
               "spread": {k: v["spread"] for k, v in st.items()},
               "what": "copy: 1 GiB device-to-device, bytes read+written; bf16: torch.mm 8192^3; "
                       "fp8: torch._scaled_mm e4m3 8192^3 tensorwise, bf16 out; random data; medians "
                       f"of {rounds} interleaved rounds (best = fastest sample)"}
        return res

    def loaded_cublaslt(self):
        """Path of the libcublasLt this process loaded (what gemmtune and torch use here)."""
        try:
            with open("/proc/self/maps") as f:
                for line in f:
                    if "libcublasLt.so" in line:
                        return line.split()[-1]
        except OSError:
            pass
        return None

    def release(self, *objs):
        pass


_MM_EXTERNS = {"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_int_mm", "_scaled_mm_v2"}


def analyze_inductor_code(codes):
    """What Inductor's generated wrapper code runs: {kernels: Triton kernels it defines, extern:
    ATen/extern GEMMs it calls, kind: 'triton' (template kernels only), 'aten' (an extern GEMM only),
    'mixed', or 'unknown' (no code captured), config: the first template's tile and launch
    parameters as far as the source shows them}."""
    import re
    if not codes:
        return {"kernels": [], "extern": [], "kind": "unknown", "config": ""}
    text = "\n".join(codes)
    kernels = list(dict.fromkeys(re.findall(r"async_compile\.triton\(\s*['\"](\w+)['\"]", text)))
    extern = re.findall(r"extern_kernels\.(\w+)\(", text)
    extern += re.findall(r"(?:torch\.ops\.)?aten\.(\w+)\.(?:default|out)\(", text)
    extern = sorted({e for e in extern if e in _MM_EXTERNS})
    templates = [k for k in kernels if "_tem_" in k]
    if templates and not extern:
        kind = "triton"
    elif extern and not templates:
        kind = "aten"
    elif extern and templates:
        kind = "mixed"
    else:
        kind = "triton" if kernels else "unknown"
    cfg = []
    blocks = [re.search(rf"\b{nm}\s*:\s*tl\.constexpr\s*=\s*(\d+)", text) for nm in ("BLOCK_M", "BLOCK_N", "BLOCK_K")]
    if all(blocks):
        cfg.append("x".join(b.group(1) for b in blocks))
    for nm, short in (("num_warps", "w"), ("num_stages", "s")):
        mt = re.search(rf"\b{nm}\s*=\s*(\d+)", text)
        if mt:
            cfg.append(f"{short}{mt.group(1)}")
    for nm in ("GROUP_M", "NUM_SMS"):
        mt = re.search(rf"\b{nm}\s*:\s*tl\.constexpr\s*=\s*(\d+)", text)
        if mt:
            cfg.append(f"{nm}={mt.group(1)}")
    return {"kernels": kernels, "extern": extern, "kind": kind, "config": " ".join(cfg)}


def nvsmi_query(q):
    """Read-only nvidia-smi query of this process's GPU: {field: value}, or {"error": ...}. nvidia-smi
    ignores CUDA_VISIBLE_DEVICES, so its first entry (an index in nvidia-smi's PCI order, as
    device.sh sets it with CUDA_DEVICE_ORDER=PCI_BUS_ID, or a UUID) is passed as -i."""
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    try:
        r = subprocess.run(["nvidia-smi", *(["-i", dev] if dev else []), f"--query-gpu={q}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            return dict(zip(q.split(","), (x.strip() for x in r.stdout.strip().splitlines()[0].split(","))))
        return {"error": (r.stderr or r.stdout).strip()[:300]}
    except Exception as e:
        return {"error": str(e)[:300]}


def gpu_state():
    """Clocks, power, temperature of this process's GPU (nvidia-smi)."""
    return nvsmi_query("clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,pstate")


def gpu_identity(mock):
    """Which GPU this process runs on: CUDA_VISIBLE_DEVICES and nvidia-smi's index, uuid, bus id."""
    out = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if not mock:
        out.update(nvsmi_query("index,uuid,name,pci.bus_id"))
    return out


# ---------------------------------------------------------------------------------------------
# --mock: a fake GPU and a fake engine with the same interfaces, for a CPU self-test

class MockGpu:
    def __init__(self, args):
        self.rng = random.Random(args.seed)
        self.inductor_init_s = 0.01
        self.l2_bytes, self.mem_bytes = 50 << 20, 140 << 30

    def versions(self):
        return {"torch": "mock", "torch_cuda": "mock", "device_name": "Mock H200", "capability": "9.0",
                "triton": "mock"}

    def empty_cache(self):
        pass

    def sync(self):
        pass

    def _base_us(self, p):
        return max(p.flops / 650e12, p.min_bytes / 4.0e12) * 1e6 + 3

    def make_inputs(self, p, seed):
        return {"problem": p}

    def baseline_fn(self, p, x):
        base = self._base_us(p) * 1.06
        return lambda: ("out", base)

    def gemmtune_fn(self, kernel, p, x):
        out = {"v": "poisoned"}
        base = self._base_us(p) * kernel.speed

        def fn():
            out["v"] = "ok"
            return ("out", base)
        return fn, out

    def inductor_init(self):
        pass

    def inductor_reset(self):
        pass

    def inductor_defaults(self):
        return {"max_autotune_gemm_backends": "ATEN,TRITON", "enable_persistent_tma_matmul": False}

    def inductor_fn(self, p, xs, mode, backends=None, extra_options=None, fresh_dir=None, code_path=None):
        time.sleep(0.01)
        base = self._base_us(p) * (1.02 if backends is None else 1.04)
        name = "triton_tem_fused__scaled_mm_0" if p.dtype != "bf16" else "triton_tem_fused_mm_0"
        code = (f"{name} = async_compile.triton('{name}', \'\'\'\n    BLOCK_M : tl.constexpr = 128\n"
                f"    BLOCK_N : tl.constexpr = 128\n    BLOCK_K : tl.constexpr = 64\n    GROUP_M : tl.constexpr = 8\n"
                f"\'\'\', device_str='cuda')\n@triton_heuristics.template(num_stages=3, num_warps=8)\n")
        if backends is None and p.m <= 16:
            code += "extern_kernels.mm(arg0_1, reinterpret_tensor(arg1_1, (8192, 10240), (1, 8192), 0), out=buf0)\n"
        info = {"mode": mode, "options": {"max_autotune": True, **({"max_autotune_gemm_backends": backends} if backends else {}),
                                          **(extra_options or {})}, **analyze_inductor_code([code])}
        if code_path is not None:
            Path(code_path).parent.mkdir(parents=True, exist_ok=True)
            Path(code_path).write_text(code)
            info["code_file"] = Path(code_path).name
        call = lambda: ("out", base)  # noqa: E731
        return (call if mode == "max-autotune" else Rotation([call] * len(xs))), 0.01, info

    def reference(self, p, x):
        return "ref"

    def poison(self, out):
        if isinstance(out, dict):
            out["v"] = "poisoned"

    def check(self, out, ref):
        if isinstance(out, dict):
            return (1.2e-3, True) if out["v"] == "ok" else (float("nan"), False)
        return 1.1e-3, True

    def rel_diff(self, out, other):
        return 4e-4

    def time_interleaved(self, fns, rounds, warmup_ms, spin_scale=1):
        res = {}
        for nm, fn in fns.items():
            base = fn()[1]
            res[nm] = [base * (1 + 0.03 * self.rng.random()) for _ in range(rounds)]
        self.last_spin_us = 50.0 * spin_scale
        self.last_host_us = {nm: (25.0 if nm.startswith("inductor") else 6.0) for nm in fns}
        return res

    def ceilings(self, rounds):
        return {"copy_TBps": 4.2, "bf16_tflops": 690.0, "fp8_tflops": 1240.0, "copy_TBps_best": 4.3,
                "bf16_tflops_best": 720.0, "fp8_tflops_best": 1290.0, "spread": {}, "what": "mock"}

    def loaded_cublaslt(self):
        return None

    def release(self, *objs):
        pass


class MockKernel:
    def __init__(self, backend, id_, name, speed):
        self.backend, self.id, self.name, self.speed = backend, id_, name, speed

    def run(self, *a):
        pass

    def close(self):
        pass


class MockEngine:
    """Tunes fake cuBLASLt (4) and Triton (6) candidates; the pick differs between engines now and
    then; rowwise problems get Triton candidates only. A Triton config compiles (0.3-0.9 s) the
    first time this process sees it (the artifact store), later it is a store hit."""
    count = 0
    compiled = set()

    def __init__(self, cache_path=None, backends=None, tune=None, **kw):
        MockEngine.count += 1
        self.salt = MockEngine.count
        self.cache_path = cache_path
        self.backends = list(backends) if backends else ["cublaslt", "triton"]

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
                if key not in MockEngine.compiled:
                    MockEngine.compiled.add(key)
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

    def close(self):
        pass


class MockError(RuntimeError):
    pass


def cold_tune_child(args):
    """--cold-tune-child SPEC: runs in a new process; creates an engine and tunes one problem (the
    parent gives an empty cache and artifact store), prints COLDTUNE_RESULT {json}."""
    spec = json.loads(args.cold_tune_child)
    out = {}
    try:
        t0 = time.perf_counter()
        if spec.get("mock"):
            Engine = MockEngine
        else:
            sys.path.insert(0, str(REPO / "python"))
            import gemmtune
            Engine = gemmtune.Engine
        out["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        eng = Engine(cache_path=spec["cache"], backends=spec["backends"], tune=spec.get("tune"), log_to_stderr=True)
        out["engine_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        kernel, rep = eng.select(spec["problem"])
        out["select_s"] = time.perf_counter() - t0
        out["report"] = rep
        try:
            out["engine_backends"] = eng.info().get("backends")
        except Exception:
            pass
        kernel.close()
        eng.close()
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    print("COLDTUNE_RESULT " + json.dumps(out), flush=True)
    return 0 if "error" not in out else 1


def backend_stats(results):
    """{backend: {n, ok, pruned, wrong, failed}} over a report's results."""
    out = {}
    for r in results:
        b = out.setdefault(r.get("backend", "?"), {"n": 0, "ok": 0, "pruned": 0, "wrong": 0, "failed": 0})
        b["n"] += 1
        if r.get("status") in b:
            b[r["status"]] += 1
    return out


def compile_stats(values, hit_s):
    """Compile times (s) of Triton candidates: all, and those over hit_s (compiled now, not
    artifact-store hits)."""
    vals = sorted(v for v in values if v is not None)
    comp = [v for v in vals if v >= hit_s]
    out = {"n": len(vals), "median_s": quantile(vals, 0.5) if vals else None, "max_s": vals[-1] if vals else None,
           "n_compiled": len(comp), "store_hit_below_s": hit_s}
    if comp:
        out.update({"compiled_median_s": quantile(comp, 0.5), "compiled_p90_s": quantile(comp, 0.9),
                    "compiled_max_s": comp[-1], "compiled_total_s": sum(comp)})
    return out


def select_stats(per):
    """Cache-hit select times: per = [{label, select_ms, from_cache, same_pick} or {label, error}]."""
    ok = [e for e in per if "select_ms" in e]
    ms = sorted(e["select_ms"] for e in ok)
    out = {"n": len(ok), "n_errors": len(per) - len(ok), "n_from_cache": sum(bool(e.get("from_cache")) for e in ok),
           "n_under_1ms": sum(x < 1.0 for x in ms),
           "n_same_pick": sum(e.get("same_pick") is True for e in ok),
           "n_different_pick": sum(e.get("same_pick") is False for e in ok)}
    if ms:
        out.update({"median_ms": quantile(ms, 0.5), "p90_ms": quantile(ms, 0.9), "max_ms": ms[-1],
                    "max_ms_after_first": max((e["select_ms"] for e in ok[1:]), default=None)})
    return out


def cli_select_stats(per, runs, lt):
    """The cachehit part's `cli` entry: select_stats of the CLI's answers, its runs, and why it answered
    nothing or not from the cache."""
    out = select_stats(per)
    out.update({"problems": per, "runs": runs, "cublaslt_preload": lt})
    if out["n"] and out["n_from_cache"] < out["n"]:
        out["warning"] = ("some problems were not answered from the cache: environment mismatch between "
                          "this process and the CLI (cuBLASLt, driver or gemmtune version)?")
    if not out["n"]:
        out["error"] = "the CLI answered nothing: " + "; ".join(f"rc={r['rc']}: {r['stderr_tail'][-400:]}" for r in runs)
    return out


# ---------------------------------------------------------------------------------------------
# the run

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
        self.part_seconds = {}
        self.errors = []         # part-level crashes
        self.mismatches = []     # correctness failures (exit 1)
        self.skipped = {"suite": [], "stability": []}
        self.env = {}
        self.done = []           # (Problem, pick id, pick backend, report) of finished suite problems
        self.problems_total = 0  # suite problems planned over all shards (--shard: this shard's are a part)
        self.partial = self.out / "h200-rows.partial.jsonl"
        if self.partial.exists():
            self.partial.unlink()

        # The engines' Triton compile workers: this interpreter (the GPU machine's python, with its
        # triton), the repository's python/ (the build's compiled-in path is the build machine's),
        # and an artifact store of our own, empty at the start (so compile times are cold). Read
        # once, when the first engine of the process starts its compiler.
        self.artifacts = Path(args.artifacts) if args.artifacts else self.tmp / "artifacts"
        os.environ["GEMMTUNE_ARTIFACTS"] = str(self.artifacts)
        os.environ.setdefault("GEMMTUNE_PYTHON", sys.executable)
        os.environ.setdefault("GEMMTUNE_PYTHON_DIR", str(REPO / "python"))
        self.env["gemmtune_env"] = {k: os.environ.get(k) for k in (
            "GEMMTUNE_ARTIFACTS", "GEMMTUNE_PYTHON", "GEMMTUNE_PYTHON_DIR", "GEMMTUNE_COMPILE_WORKERS",
            "GEMMTUNE_COMPILE_TIMEOUT")}
        self.env["cpu_count"] = os.cpu_count()
        self.env["input_sets_cap"] = args.input_sets  # 0: automatic (input_set_count)
        # The options build_summary() reads from the doc (so that --merge rebuilds the same summary).
        self.env["bench_options"] = {"inductor_triton_mode": args.inductor_triton_mode,
                                     "inductor_triton_options": args.itriton_options,
                                     "compile_hit_s": args.compile_hit_s}
        if args.mock:
            self.gpu = MockGpu(args)
            self.Engine = MockEngine
            self.GemmtuneError = MockError
        else:
            if args.lib:
                os.environ["GEMMTUNE_LIB"] = args.lib
            elif "GEMMTUNE_LIB" not in os.environ:
                os.environ["GEMMTUNE_LIB"] = str(REPO / "build")
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", args.inductor_cache_dir or str(self.tmp / "inductor"))
            # Triton's cache too (Inductor's compile workers start with it): never a warm ~/.triton.
            os.environ.setdefault("TRITON_CACHE_DIR", str(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) / "triton"))
            # torch first: gemmtune then shares the libcublasLt that torch loaded (one copy).
            self.gpu = TorchGpu(args)
            sys.path.insert(0, str(REPO / "python"))
            import gemmtune
            self.gemmtune = gemmtune
            self.Engine = gemmtune.Engine
            self.GemmtuneError = gemmtune.GemmtuneError

    def engine(self, cache_path):
        a = self.args
        return self.Engine(cache_path=str(cache_path), backends=a.backend_list, tune=a.tune,
                           log_to_stderr=not a.quiet_engine)

    def inductor_dir(self, tag):
        """A fresh, empty Inductor + Triton cache folder for one compile."""
        self.n_inductor_dirs += 1
        return self.tmp / f"inductor-{self.n_inductor_dirs:03d}-{tag}"

    def add_rows(self, rows):
        self.rows.extend(rows)
        with open(self.partial, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    # -- ceilings -------------------------------------------------------------------------------
    def part_ceilings(self, end=False):
        c = self.gpu.ceilings(self.args.ceiling_rounds)
        self.gpu.empty_cache()  # the ceilings' buffers are gone once ceilings() returned
        c["gpu_state"] = gpu_state() if not self.args.mock else None
        if end:
            self.ceilings_end = c
        else:
            self.ceilings = c
        log(f"ceilings{' (end)' if end else ''}: copy {c['copy_TBps']:.2f} TB/s, bf16 {c['bf16_tflops']:.0f} TFLOP/s, "
            f"fp8 {c['fp8_tflops']:.0f} TFLOP/s")

    def roof_us(self, p: Problem):
        c = self.ceilings
        if not c:
            return None
        peak = c["bf16_tflops"] if p.dtype == "bf16" else c["fp8_tflops"]
        return max(p.flops / (peak * 1e12), p.min_bytes / (c["copy_TBps"] * 1e12)) * 1e6

    # -- cold tune vs Inductor -----------------------------------------------------------------------
    def part_coldtune(self):
        """One problem: a cold gemmtune tune (a separate process with an empty tuning cache and an
        empty artifact store, so every Triton candidate is compiled now; compile workers started on
        demand) against Inductor max-autotune with its default gemm backends from a cold cache, in
        this process (after Inductor's one-time start-up, which is reported apart)."""
        a, gpu = self.args, self.gpu
        p = cold_tune_problem(a)
        res = {"label": p.label, **p.fields(), "backends": a.cold_backends, "status": "ok", "errors": []}
        self.coldtune = res
        deadline = self.budget.end() - a.reserve_s
        est = 30.0 + 2 * a.inductor_triton_estimate_s
        if not self.budget.fits(deadline, est):
            res["status"] = "skipped"
            res["errors"].append(f"not enough budget left (estimate {est:.0f} s)")
            warn(f"coldtune: skipped, not enough budget left (estimate {est:.0f} s)")
            return

        # 1. gemmtune, cold, in a child process.
        d = self.tmp / "coldtune"
        d.mkdir(parents=True, exist_ok=True)
        spec = {"problem": p.gt(), "backends": a.cold_backends, "tune": a.tune, "cache": str(d / "tuning.sqlite"),
                "mock": bool(a.mock)}
        env = os.environ.copy()
        env["GEMMTUNE_ARTIFACTS"] = str(d / "artifacts")   # empty: does not exist yet
        if a.cold_tune_pack:  # a copy of a kernel pack (what a fresh machine with the pack has)
            shutil.copytree(a.cold_tune_pack, d / "artifacts", dirs_exist_ok=True)
            res["artifacts"] = f"a copy of the kernel pack {a.cold_tune_pack}"
        env["GEMMTUNE_CACHE"] = str(d / "tuning.sqlite")   # empty: does not exist yet
        env["GEMMTUNE_PYTHON"] = os.environ.get("GEMMTUNE_PYTHON") or sys.executable
        env["GEMMTUNE_PYTHON_DIR"] = os.environ.get("GEMMTUNE_PYTHON_DIR") or str(REPO / "python")
        lt = self.gpu.loaded_cublaslt()
        if lt:  # the same cuBLASLt as this process (and torch)
            env["LD_PRELOAD"] = lt + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--cold-tune-child", json.dumps(spec)]
        timeout = a.cold_tune_timeout_s
        if not self.budget.unlimited():
            timeout = max(30.0, min(timeout, deadline - time.monotonic() - a.inductor_triton_estimate_s))
        log(f"coldtune: {p.label}: gemmtune ({','.join(a.cold_backends)}) from an empty cache and artifact store, "
            f"in a new process")
        t0 = time.monotonic()
        log_path = self.out / "coldtune-gemmtune.log"
        child = None
        try:
            with open(log_path, "w") as errf:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=errf, text=True, timeout=timeout, env=env)
            rc = r.returncode
            for line in r.stdout.splitlines():
                if line.startswith("COLDTUNE_RESULT "):
                    child = json.loads(line[len("COLDTUNE_RESULT "):])
        except subprocess.TimeoutExpired:
            rc = "timeout"
        process_s = time.monotonic() - t0
        g = {"process_s": process_s, "rc": rc, "log": log_path.name}
        if child is None or child.get("error"):
            err = (child or {}).get("error") or f"rc={rc}, no result line"
            g["error"] = err
            try:
                g["log_tail"] = log_path.read_text()[-1500:]
            except OSError:
                pass
            res["errors"].append(f"gemmtune cold tune: {err}")
            warn(f"coldtune: gemmtune failed: {err}")
        else:
            rep = child.pop("report", {}) or {}
            results = rep.get("results", [])
            win = next((r for r in results if r.get("winner")), None)
            g.update(child)
            g["seconds"] = child["engine_s"] + child["select_s"]
            g["report_seconds"] = rep.get("seconds")
            g["from_cache"] = rep.get("from_cache")
            g["pick"] = {"backend": win["backend"], "candidate": win["name"], "candidate_id": win["id"],
                         "median_us": win.get("median_us")} if win else None
            g["backends_stats"] = backend_stats(results)
            g["triton_compile"] = compile_stats([r.get("compile_s") for r in results if r.get("backend") == "triton"],
                                                a.compile_hit_s)
            g["notes"] = rep.get("notes", [])
            if rep.get("from_cache"):
                res["errors"].append("the cold tune was answered from a cache: not cold")
            # Its candidates, as tune rows (timing "coldtune").
            rows = self.tune_rows(p, rep)
            for row in rows:
                row["timing"] = "coldtune"
            self.add_rows(rows)
            log(f"coldtune: gemmtune {g['seconds']:.2f} s (engine start {child['engine_s']:.2f} s + select "
                f"{child['select_s']:.2f} s; process {process_s:.2f} s); {len(results)} candidates; pick "
                f"{(g['pick'] or {}).get('backend')} {(g['pick'] or {}).get('candidate')}")
        res["gemmtune"] = g

        # 2. Inductor max-autotune (its default gemm backends), cold cache, this process.
        try:
            gpu.empty_cache()
            x = gpu.make_inputs(p, a.seed + 104729)
            gpu.inductor_init()
            gpu.inductor_reset()
            fn, compile_s, info = gpu.inductor_fn(p, [x], a.inductor_mode, fresh_dir=self.inductor_dir("coldtune"),
                                                  code_path=self.out / "inductor-code" / f"coldtune-inductor-{p.slug}.py")
            ref = gpu.reference(p, x)
            rel, finite = gpu.check(fn(), ref)
            res["inductor"] = {"seconds": compile_s, "mode": a.inductor_mode, "defaults": gpu.inductor_defaults(),
                               "init_s": gpu.inductor_init_s, "rel_err": rel, "finite": finite, **info}
            log(f"coldtune: inductor ({a.inductor_mode}, default gemm backends) {compile_s:.2f} s "
                f"(one-time start-up {fnum(gpu.inductor_init_s, 1)} s excluded), kernels {info.get('kind')}")
            fn = x = ref = None
        except Exception as e:
            res["errors"].append(f"inductor: {type(e).__name__}: {str(e)[:300]}")
            warn(f"coldtune: inductor failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        # Like for like: each side's one-time start-up (gemmtune: the engine with its compile
        # workers; Inductor: imports, its compile pool and a first small compile) counted on both
        # sides, or on neither. gemmtune is faster when it is in both comparisons. The mixed
        # figure of earlier runs (gemmtune with its engine start vs Inductor without its start-up)
        # is kept as inductor_over_gemmtune_mixed.
        g, ind = res.get("gemmtune") or {}, res.get("inductor") or {}
        gs, it = g.get("seconds"), ind.get("seconds")
        sel, init = g.get("select_s"), ind.get("init_s")
        if gs and it:
            res["inductor_over_gemmtune_mixed"] = it / gs
        if gs and it and sel and init is not None:
            res["with_startup"] = {"gemmtune_s": gs, "inductor_s": init + it}
            res["without_startup"] = {"gemmtune_s": sel, "inductor_s": it}
            res["inductor_over_gemmtune"] = (init + it) / gs
            res["inductor_over_gemmtune_without_startup"] = it / sel
            res["gemmtune_faster"] = gs < init + it and sel < it
        if res["errors"]:
            res["status"] = "error"
        self.gpu.empty_cache()

    # -- suite ----------------------------------------------------------------------------------
    def part_suite(self, problems):
        a = self.args
        deadline = self.budget.end() - a.reserve_s
        if "stability" in a.parts and not self.budget.unlimited():
            deadline = T_START + (a.budget_s - a.reserve_s) * a.suite_share
        eng = self.engine(self.cache1)
        self.env["engine"] = eng.info()
        log(f"suite: {len(problems)} problems planned ({sum(p.inductor for p in problems)} with Inductor, "
            f"{sum(p.inductor_triton for p in problems)} with Inductor-Triton); engine "
            f"{self.env['engine'].get('version')}, {self.env['engine']['device'].get('str')}; backends "
            + ", ".join(f"{b.get('name')}: {b.get('status')}" for b in self.env['engine'].get('backends', [])))
        um = getattr(a, "subset_unmatched", {})
        for k, v in um.items():
            if v:
                log(f"suite: {k} subset entries that name no planned problem (dtype not in --dtypes?): {', '.join(v)}")
        durations, extra_inductor, extra_itriton = [], [], []
        try:
            for p in problems:
                est = (estimate(durations, 1.5) + (estimate(extra_inductor, 10.0) if p.inductor else 0)
                       + (estimate(extra_itriton, a.inductor_triton_estimate_s) if p.inductor_triton else 0))
                if not self.budget.fits(deadline, est):
                    self.skipped["suite"].append(p.label)
                    continue
                t0 = time.monotonic()
                summary = self.suite_problem(eng, p)
                dt = time.monotonic() - t0
                summary["wall_s"] = dt
                extra = 0.0
                if p.inductor and summary.get("inductor"):
                    extra_inductor.append(summary["inductor"].get("compile_s") or 0)
                    extra += summary["inductor"].get("compile_s") or 0
                if p.inductor_triton and summary.get("inductor_triton"):
                    extra_itriton.append(summary["inductor_triton"].get("compile_s") or 0)
                    extra += summary["inductor_triton"].get("compile_s") or 0
                durations.append(max(dt - extra, 0.1) if extra else dt)
                self.problems.append(summary)
                self.print_problem(len(self.problems), len(problems), summary)
        finally:
            eng.close()
        if self.skipped["suite"]:
            warn(f"suite: budget reached, {len(self.skipped['suite'])} problems skipped (see summary.coverage)")

    def tune_rows(self, p: Problem, rep):
        rows = []
        for r in rep.get("results", []):
            timed = (r.get("median_us") or 0) > 0
            row = p.fields()
            row.update({
                "backend": r["backend"], "candidate": r["name"], "candidate_id": r["id"], "role": "candidate",
                "timing": "tune", "median_us": r["median_us"] if timed else None,
                "p20_us": r["p20_us"] if timed else None, "p80_us": r["p80_us"] if timed else None,
                "samples": r.get("samples"), "tflops": tflops(p.flops, r["median_us"]) if timed else None,
                "rel_err": r["rel_err"] if (r.get("rel_err") is not None and r["rel_err"] >= 0) else None,
                "rel_err_vs_torch": None, "compile_s": r.get("compile_s"),
                "correct": r["status"] in ("ok", "pruned"), "status": r["status"], "reason": r.get("reason", ""),
                "winner": bool(r.get("winner")), "default": bool(r.get("is_default")),
                "spread": ((r["p80_us"] - r["p20_us"]) / r["median_us"]) if timed else None})
            rows.append(row)
        return rows

    def suite_problem(self, eng, p: Problem):
        a, gpu = self.args, self.gpu
        s = {"label": p.label, "index": p.index, **p.fields(), "flops": p.flops, "min_bytes": p.min_bytes,
             "roof_us": self.roof_us(p), "inductor_subset": p.inductor, "inductor_triton_subset": p.inductor_triton,
             "status": "ok", "errors": [], "notes": []}
        kernel = dkernel = tkernel = None
        bests = {}  # backend -> (its best result, its kernel): CUTLASS's and cuBLASLt's best when CUTLASS raced
        x = xs = ref = None
        try:
            gpu.empty_cache()
            t0 = time.monotonic()
            try:
                kernel, rep = eng.select(p.gt())
            except self.GemmtuneError as e:
                if p.scale == "rowwise":
                    s["status"] = "skipped"
                    s["errors"].append(f"no correct rowwise candidate in gemmtune: {e}")
                    return s
                raise
            select_s = time.monotonic() - t0
            results = rep.get("results", [])
            win = next((r for r in results if r.get("winner")), None)
            dflt = next((r for r in results if r.get("is_default")), None)
            s["tune"] = {"select_s": select_s, "seconds": rep.get("seconds"), "spread": rep.get("spread"),
                         "from_cache": rep.get("from_cache"), "key": rep.get("key"), "notes": rep.get("notes", []),
                         "n_candidates": len(results),
                         **{f"n_{st}": sum(r["status"] == st for r in results) for st in ("ok", "pruned", "wrong", "failed")},
                         "compile_s_total": sum(r.get("compile_s") or 0 for r in results),
                         "backends": backend_stats(results),
                         "triton_compile_s_total": sum(r.get("compile_s") or 0 for r in results if r.get("backend") == "triton")}
            if rep.get("from_cache"):
                s["errors"].append("pass 1 answered from the cache: nothing was tuned (stale cache file?)")
            self.add_rows(self.tune_rows(p, rep))
            if win is None:
                raise RuntimeError("the report has no winner")
            s["pick_backend"] = win["backend"]
            if dflt is not None and dflt["status"] in ("ok", "pruned"):
                dkernel = eng.load(p.gt(), dflt["backend"], dflt["id"])
            elif dflt is not None:
                s["errors"].append(f"cuBLASLt's default candidate is {dflt['status']}: {dflt.get('reason', '')}")
            elif not any(r.get("backend") == "cublaslt" for r in results):
                s["notes"].append("cuBLASLt has no candidate for this problem: no default to compare with")
            else:
                s["errors"].append("the report has no default candidate")
            # Triton's best: its correct (status ok) candidate with the lowest tune median.
            # Pruned candidates were verified and timed too (only dropped from later rounds): on
            # problems where cuBLASLt leads by > prune_ratio, Triton's best is one of them.
            tri = min((r for r in results if r.get("backend") == "triton" and r.get("status") in ("ok", "pruned")
                       and (r.get("median_us") or 0) > 0), key=lambda r: r["median_us"], default=None)
            if tri is not None:
                tkernel = eng.load(p.gt(), "triton", tri["id"])
            elif any(r.get("backend") == "triton" for r in results):
                s["errors"].append("Triton has candidates but none is correct and timed")
            # When CUTLASS raced: its best and cuBLASLt's best (lowest tune median of a correct
            # candidate), timed side by side like the rest (issue 4 compares the two).
            # Likewise CuTe DSL's best when it raced (issue 5 compares it with CUTLASS's best).
            if any(r.get("backend") in ("cutlass", "cutedsl") for r in results):
                for b in ("cutlass", "cublaslt", "cutedsl"):
                    if not any(r.get("backend") == b for r in results):
                        continue
                    bb = min((r for r in results if r.get("backend") == b and r.get("status") in ("ok", "pruned")
                              and (r.get("median_us") or 0) > 0), key=lambda r: r["median_us"], default=None)
                    if bb is not None:
                        bests[b] = (bb, eng.load(p.gt(), b, bb["id"]))
                    elif any(r.get("backend") == b for r in results):
                        s["errors"].append(f"{b} has candidates but none is correct and timed")

            # Every contender rotates over the input sets (as the race does), except Inductor in
            # a mode with CUDA graphs (set 0 only: see inductor_fn). Correctness: on set 0.
            xs = input_sets(gpu, p, a.seed + 7919 * p.index, a.input_sets)
            x = xs[0]
            s["input_sets"] = len(xs)

            def rotation(kern):  # (fn over every set, set 0's output)
                pairs = [gpu.gemmtune_fn(kern, p, xj) for xj in xs]
                return Rotation([f for f, _ in pairs]), pairs[0][1]

            fns, meta = {}, {}
            fn, d_pick = rotation(kernel)
            fns["pick"] = fn
            meta["pick"] = {"backend": win["backend"], "candidate": win["name"], "candidate_id": win["id"],
                            "role": "pick", "winner": True, "default": bool(win.get("is_default")), "out": d_pick,
                            "compile_s": win.get("compile_s")}
            if dkernel is not None:
                fn, d_def = rotation(dkernel)
                fns["default"] = fn
                meta["default"] = {"backend": dflt["backend"], "candidate": dflt["name"], "candidate_id": dflt["id"],
                                   "role": "default", "winner": bool(dflt.get("winner")), "default": True,
                                   "out": d_def, "compile_s": dflt.get("compile_s")}
            if tkernel is not None:
                fn, d_tri = rotation(tkernel)
                fns["triton_best"] = fn
                meta["triton_best"] = {"backend": "triton", "candidate": tri["name"], "candidate_id": tri["id"],
                                       "role": "backend_best", "winner": bool(tri.get("winner")),
                                       "default": bool(tri.get("is_default")), "out": d_tri,
                                       "compile_s": tri.get("compile_s"), "backend_best": True}
            for b, (bb, bk) in bests.items():
                fn, d_b = rotation(bk)
                fns[f"{b}_best"] = fn
                meta[f"{b}_best"] = {"backend": b, "candidate": bb["name"], "candidate_id": bb["id"],
                                     "role": "backend_best", "winner": bool(bb.get("winner")),
                                     "default": bool(bb.get("is_default")), "out": d_b,
                                     "compile_s": bb.get("compile_s"), "backend_best": True}
            fns["torch"] = Rotation([gpu.baseline_fn(p, xj) for xj in xs])
            meta["torch"] = {"backend": p.baseline, "candidate": p.baseline, "candidate_id": "", "role": "baseline",
                             "winner": False, "default": False, "out": None, "compile_s": None}
            if p.inductor or p.inductor_triton:
                gpu.inductor_reset()  # the previous problem's compiled functions and graph pools
            if p.inductor:
                try:
                    ifn, compile_s, info = gpu.inductor_fn(
                        p, xs, a.inductor_mode, fresh_dir=self.inductor_dir("max-autotune"),
                        code_path=self.out / "inductor-code" / f"inductor-{p.slug}.py")
                    fns["inductor"] = ifn
                    meta["inductor"] = {"backend": "inductor", "candidate": a.inductor_mode, "candidate_id": "",
                                        "role": "baseline", "winner": False, "default": False, "out": None,
                                        "compile_s": compile_s, "inductor": info}
                except Exception as e:
                    s["errors"].append(f"inductor: {type(e).__name__}: {str(e)[:300]}")
                    warn(f"{p.label}: inductor: {type(e).__name__}: {str(e)[:300]}")
            if p.inductor_triton:
                try:
                    ifn, compile_s, info = gpu.inductor_fn(
                        p, xs, a.inductor_triton_mode, backends="TRITON", extra_options=a.itriton_options,
                        fresh_dir=self.inductor_dir("triton"),
                        code_path=self.out / "inductor-code" / f"inductor-triton-{p.slug}.py")
                    fns["inductor_triton"] = ifn
                    desc = info.get("config") or ",".join(info.get("kernels", [])[:3])
                    meta["inductor_triton"] = {"backend": "inductor-triton",
                                               "candidate": f"{a.inductor_triton_mode} TRITON: {desc}".strip(),
                                               "candidate_id": "", "role": "baseline", "winner": False, "default": False,
                                               "out": None, "compile_s": compile_s, "inductor": info}
                    if info.get("kind") in ("aten", "mixed"):
                        msg = (f"inductor-triton: the generated code calls an ATen GEMM ({', '.join(info.get('extern', []))}): "
                               f"not Triton only")
                        s["errors"].append(msg)
                        warn(f"{p.label}: {msg}")
                except Exception as e:
                    s["errors"].append(f"inductor-triton: {type(e).__name__}: {str(e)[:300]}")
                    warn(f"{p.label}: inductor-triton: {type(e).__name__}: {str(e)[:300]}")

            # Correctness: every contender vs the fp32 reference; gemmtune's also vs torch's output.
            ref = gpu.reference(p, x)
            try:
                torch_out = first_fn(fns["torch"])()
            except Exception as e:
                s["errors"].append(f"{p.baseline}: {type(e).__name__}: {str(e)[:300]}")
                del fns["torch"]
                torch_out = None
            checks = {}
            for nm in list(fns):
                m = meta[nm]
                try:
                    if m["out"] is not None:
                        gpu.poison(m["out"])
                    out = torch_out if nm == "torch" else first_fn(fns[nm])()
                    rel, finite = gpu.check(out, ref)
                    vs = gpu.rel_diff(out, torch_out) if (torch_out is not None and nm != "torch") else None
                    del out
                except Exception as e:
                    s["errors"].append(f"{nm}: {type(e).__name__}: {str(e)[:300]}")
                    del fns[nm]
                    continue
                ok = finite and rel <= a.tol and (vs is None or vs <= a.tol)
                checks[nm] = {"rel_err": rel, "rel_err_vs_torch": vs, "finite": finite, "correct": ok}
                if not ok:
                    msg = (f"MISMATCH {p.label} {nm} ({m['candidate']}): rel_err {rel:.3g} vs fp32 reference, "
                           f"{'-' if vs is None else f'{vs:.3g}'} vs {p.baseline}, finite={finite} (tol {a.tol})")
                    self.mismatches.append(msg)
                    warn(msg)
            del torch_out
            ref = None

            # Inductor's Python wrapper (guards, launcher) costs more host time per call than a
            # ctypes launch: a longer spin keeps it outside the timed region (same for everyone).
            spin_scale = 3 if ("inductor" in fns or "inductor_triton" in fns) else 1
            samples = gpu.time_interleaved(fns, a.rounds, a.warmup_ms, spin_scale=spin_scale)
            host_us, spin_us = dict(getattr(gpu, "last_host_us", {})), getattr(gpu, "last_spin_us", None)
            s["spin_us"] = spin_us
            for nm, h in host_us.items():
                if spin_us and h > 0.8 * spin_us:
                    msg = (f"{nm}: host time per call {h:.0f} us vs a GPU spin of about {spin_us:.0f} us before each "
                           f"sample: its launch overhead may be inside its timing")
                    s["errors"].append(msg)
                    warn(f"{p.label}: {msg}")
            rows = []
            for nm, smp in samples.items():
                st = summarize(smp)
                m, c = meta[nm], checks.get(nm, {})
                row = p.fields()
                row.update({"backend": m["backend"], "candidate": m["candidate"], "candidate_id": m["candidate_id"],
                            "role": m["role"], "contender": nm, "timing": "side_by_side",
                            "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                            "samples": st["samples"], "tflops": tflops(p.flops, st["median_us"]),
                            "rel_err": c.get("rel_err"), "rel_err_vs_torch": c.get("rel_err_vs_torch"),
                            "compile_s": m["compile_s"], "correct": c.get("correct"), "status": "ok",
                            "reason": "", "winner": m["winner"], "default": m["default"], "spread": st["spread"],
                            "backend_best": bool(m.get("backend_best")), "host_us": host_us.get(nm),
                            "input_sets": len(xs) if isinstance(fns.get(nm), Rotation) else 1})
                if m.get("inductor"):
                    row["inductor"] = {k: m["inductor"].get(k) for k in ("kind", "kernels", "extern", "config", "code_file")}
                rows.append(row)
                s[nm] = {"backend": m["backend"], "candidate": m["candidate"], "candidate_id": m["candidate_id"],
                         "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                         "spread": st["spread"], "tflops": tflops(p.flops, st["median_us"]),
                         "rel_err": c.get("rel_err"), "rel_err_vs_torch": c.get("rel_err_vs_torch"),
                         "correct": c.get("correct"), "compile_s": m["compile_s"], "host_us": host_us.get(nm)}
                if m.get("inductor"):
                    s[nm]["inductor"] = m["inductor"]
            self.add_rows(rows)
            if "pick" not in s:
                raise RuntimeError("gemmtune's pick could not be checked or timed: " + "; ".join(s["errors"]))
            s["pick"]["tune_median_us"] = win.get("median_us")
            if "default" in s:
                s["default"]["tune_median_us"] = dflt.get("median_us")
            if "triton_best" in s:
                s["triton_best"]["tune_median_us"] = tri.get("median_us")
            for b, (bb, _) in bests.items():
                if f"{b}_best" in s:
                    s[f"{b}_best"]["tune_median_us"] = bb.get("median_us")
            s["same_kernel"] = dflt is not None and dflt["id"] == win["id"]
            self.ratios(s)
            self.done.append((p, win["id"], win["backend"], rep))
            if any(not c["correct"] for c in checks.values()):
                s["status"] = "mismatch"
        except Exception as e:
            s["status"] = "error"
            s["errors"].append(f"{type(e).__name__}: {e}")
            warn(f"{p.label}: {type(e).__name__}: {e}")
            if not isinstance(e, self.GemmtuneError):
                traceback.print_exc()
        finally:
            for k in (kernel, dkernel, tkernel, *(bk for _, bk in bests.values())):
                if k is not None:
                    try:
                        k.close()
                    except Exception:
                        pass
            x = xs = ref = None
        return s

    def ratios(self, s):
        pick = s.get("pick") or {}
        pm = pick.get("median_us")

        def sp(other):
            o = s.get(other) or {}
            om = o.get("median_us")
            return om / pm if (pm and om) else None
        s["speedup_vs_default"] = sp("default")
        s["speedup_vs_torch"] = sp("torch")
        s["speedup_vs_inductor"] = sp("inductor")
        s["speedup_vs_triton_best"] = sp("triton_best")
        s["speedup_vs_inductor_triton"] = sp("inductor_triton")
        # Triton's best against the others (other's median / Triton best's median: > 1 = Triton faster).
        tb = (s.get("triton_best") or {}).get("median_us")
        for other in ("inductor_triton", "torch", "default"):
            om = (s.get(other) or {}).get("median_us")
            s[f"triton_best_vs_{other}"] = om / tb if (tb and om) else None
        # CUTLASS's best against cuBLASLt's best (> 1 = CUTLASS faster; issue 4: >= 1/1.05 on 70% at m >= 2048).
        cu, lt = (s.get("cutlass_best") or {}).get("median_us"), (s.get("cublaslt_best") or {}).get("median_us")
        s["cutlass_best_vs_cublaslt_best"] = lt / cu if (cu and lt) else None
        # CuTe DSL's best against CUTLASS's best (> 1 = CuTe DSL faster; issue 5: >= 1/1.05 on 70% at m >= 2048).
        cd = (s.get("cutedsl_best") or {}).get("median_us")
        s["cutedsl_best_vs_cutlass_best"] = cu / cd if (cu and cd) else None
        if tb and (s.get("inductor_triton") or {}).get("median_us"):
            s["triton_noise"] = max(s["triton_best"].get("spread") or 0, s["inductor_triton"].get("spread") or 0)
        d = s.get("default")
        if pm and d and d.get("median_us"):
            noise = max(pick.get("spread") or 0, d.get("spread") or 0)
            s["noise"] = noise
            s["pick_within_noise_of_default"] = pm <= d["median_us"] * (1 + noise)
            s["pick_faster_beyond_noise"] = pm * (1 + noise) < d["median_us"]
        if pm and s.get("roof_us"):
            s["fraction_of_roof"] = s["roof_us"] / pm

    def print_problem(self, i, total, s):
        if s["status"] == "skipped":
            log(f"[{i}/{total}] {s['label']}: skipped ({'; '.join(s['errors'])[:120]})")
            return
        if s["status"] == "error":
            log(f"[{i}/{total}] {s['label']}: ERROR {'; '.join(s['errors'])[:200]}")
            return
        pk = s.get("pick", {})
        line = (f"[{i}/{total}] {s['label']}: pick ({s.get('pick_backend', '?')}) {fnum(pk.get('median_us'), 1)} us "
                f"{fnum(pk.get('tflops'), 0)} TF | vs default {fratio(s.get('speedup_vs_default'))} vs torch "
                f"{fratio(s.get('speedup_vs_torch'))} vs triton-best {fratio(s.get('speedup_vs_triton_best'))}")
        if s.get("inductor"):
            line += f" vs inductor {fratio(s.get('speedup_vs_inductor'))} (compile {fnum(s['inductor'].get('compile_s'), 1)} s)"
        if s.get("inductor_triton"):
            line += (f" | triton-best vs inductor-triton {fratio(s.get('triton_best_vs_inductor_triton'))} (compile "
                     f"{fnum(s['inductor_triton'].get('compile_s'), 1)} s, {s['inductor_triton'].get('inductor', {}).get('kind')})")
        if s.get("cutlass_best_vs_cublaslt_best"):
            line += f" | cutlass-best vs cublaslt-best {fratio(s['cutlass_best_vs_cublaslt_best'])}"
        line += f" | tune {fnum(s.get('tune', {}).get('select_s'), 2)} s, {s.get('tune', {}).get('n_candidates')} cands"
        if s["status"] != "ok":
            line += f" [{s['status'].upper()}]"
        log(line)

    # -- stability ------------------------------------------------------------------------------
    def part_stability(self):
        a, gpu = self.args, self.gpu
        deadline = self.budget.end() - a.reserve_s
        eng = self.engine(self.cache2)
        log(f"stability: re-tuning {len(self.done)} problems from an empty cache")
        durations = []
        try:
            for p, id1, backend1, rep1 in self.done:
                est = estimate(durations, 1.0)
                if not self.budget.fits(deadline, est):
                    self.skipped["stability"].append(p.label)
                    continue
                t0 = time.monotonic()
                e = {"label": p.label, "index": p.index, **p.fields(), "first_id": id1}
                k1 = k2 = None
                try:
                    gpu.empty_cache()
                    k2, rep2 = eng.select(p.gt())
                    w2 = next((r for r in rep2.get("results", []) if r.get("winner")), None)
                    e["second_id"] = w2["id"] if w2 else None
                    e["first_name"] = next((r["name"] for r in rep1["results"] if r["id"] == id1), "")
                    e["second_name"] = w2["name"] if w2 else ""
                    e["same"] = e["second_id"] == id1
                    e["tune_s"] = rep2.get("seconds")
                    if not e["same"] and w2 is not None:
                        # Where each stood in the other's race (tune medians, same process, minutes apart).
                        m1 = {r["id"]: r.get("median_us") for r in rep1["results"]}
                        m2 = {r["id"]: r.get("median_us") for r in rep2["results"]}
                        e["ratio_in_first_tune"] = (m1.get(w2["id"]) / m1[id1]) if (m1.get(w2["id"]) and m1.get(id1)) else None
                        e["ratio_in_second_tune"] = (m2.get(id1) / m2[w2["id"]]) if (m2.get(id1) and m2.get(w2["id"])) else None
                        # The race's final duel in each tune (engine notes "duel: ..."), if it had one.
                        e["duel_first_tune"] = [n for n in rep1.get("notes", []) if n.startswith("duel:")]
                        e["duel_second_tune"] = [n for n in rep2.get("notes", []) if n.startswith("duel:")]
                        k1 = eng.load(p.gt(), backend1, id1)
                        xs = input_sets(gpu, p, a.seed + 7919 * p.index, a.input_sets)
                        e["input_sets"] = len(xs)
                        f1 = Rotation([gpu.gemmtune_fn(k1, p, xj)[0] for xj in xs])
                        f2 = Rotation([gpu.gemmtune_fn(k2, p, xj)[0] for xj in xs])
                        smp = gpu.time_interleaved({"first": f1, "second": f2}, a.rounds, a.warmup_ms)
                        s1, s2 = summarize(smp["first"]), summarize(smp["second"])
                        e["first"], e["second"] = s1, s2
                        e["ratio"] = s2["median_us"] / s1["median_us"]  # > 1: the second pick is slower
                        noise = max(s1["spread"] or 0, s2["spread"] or 0)
                        e["noise"] = noise
                        e["within_noise"] = abs(e["ratio"] - 1) <= noise
                        rows = []
                        for tag, st, rid, nm in (("first", s1, id1, e["first_name"]), ("second", s2, w2["id"], e["second_name"])):
                            row = p.fields()
                            row.update({"backend": backend1 if tag == "first" else w2["backend"], "candidate": nm,
                                        "candidate_id": rid, "role": f"stability_{tag}", "timing": "stability_h2h",
                                        "median_us": st["median_us"], "p20_us": st["p20_us"], "p80_us": st["p80_us"],
                                        "samples": st["samples"], "tflops": tflops(p.flops, st["median_us"]),
                                        "rel_err": None, "rel_err_vs_torch": None, "compile_s": None, "correct": None,
                                        "status": "ok", "reason": "", "winner": tag == "first", "default": False,
                                        "spread": st["spread"], "input_sets": len(xs)})
                            rows.append(row)
                        self.add_rows(rows)
                        xs = f1 = f2 = None
                    e["status"] = "ok"
                except Exception as ex:
                    e["status"] = "error"
                    e["error"] = f"{type(ex).__name__}: {ex}"
                    warn(f"stability {p.label}: {e['error']}")
                finally:
                    for k in (k1, k2):
                        if k is not None:
                            try:
                                k.close()
                            except Exception:
                                pass
                dt = time.monotonic() - t0
                e["wall_s"] = dt
                durations.append(dt)
                self.stability.append(e)
                if e["status"] == "ok" and not e["same"]:
                    log(f"stability {p.label}: different pick, second/first {fratio(e.get('ratio'))} "
                        f"({'within' if e.get('within_noise') else 'OUTSIDE'} noise {fpct(e.get('noise'))})")
        finally:
            eng.close()
        if self.skipped["stability"]:
            warn(f"stability: budget reached, {len(self.skipped['stability'])} problems skipped")

    # -- cache hits -------------------------------------------------------------------------------
    def part_cachehit(self):
        res = {"in_process": {}, "cli": {}}
        # In this process: a fresh engine on pass 1's cache.
        eng = self.engine(self.cache1)
        per = []
        try:
            for p, id1, _, _ in self.done:
                t0 = time.perf_counter()
                try:
                    k, rep = eng.select(p.gt())
                    wall_ms = (time.perf_counter() - t0) * 1e3
                    # select_ms: the engine's own wall time of select() (as the CLI measures it);
                    # python_ms adds ctypes and the report's JSON.
                    ms = rep["seconds"] * 1e3 if rep.get("seconds") is not None else wall_ms
                    per.append({"label": p.label, "select_ms": ms, "python_ms": wall_ms,
                                "from_cache": bool(rep.get("from_cache")), "same_pick": k.id == id1})
                    k.close()
                except Exception as e:
                    per.append({"label": p.label, "error": f"{type(e).__name__}: {e}"})
        finally:
            eng.close()
        res["in_process"] = select_stats(per)
        res["in_process"]["problems"] = per

        # In a separate process: the gemmtune CLI.
        res["cli"] = self.cli_cachehit()
        self.cachehit = res
        for where in ("in_process", "cli"):
            r = res[where]
            if r.get("n"):
                log(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache, select median {fnum(r['median_ms'], 3)} ms, "
                    f"max {fnum(r['max_ms'], 3)} ms, {r['n_under_1ms']} under 1 ms")
            elif r.get("error"):
                warn(f"cachehit {where}: {r['error'][:300]}")

    def cli_cachehit(self):
        a = self.args
        cli = Path(a.gemmtune_cli)
        if a.mock and not cli.exists():
            return {"error": "mock run: no CLI"}
        if not cli.exists():
            return {"error": f"{cli}: not found (build the CLI, or pass --gemmtune-cli)"}
        env = os.environ.copy()
        lt = self.gpu.loaded_cublaslt()
        if lt:
            # The cache is keyed by the cuBLASLt version: the CLI must load the same library as this
            # process (torch may have brought its own copy).
            env["LD_PRELOAD"] = lt + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        groups = {}
        for p, id1, _, _ in self.done:
            groups.setdefault((p.dtype, p.scale), []).append((p, id1))
        per, runs = [], []
        for (dtype, scale), items in groups.items():
            shapes = self.tmp / f"cachehit-{dtype}-{scale}.csv"
            with open(shapes, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["model", "layer", "phase", "m", "n", "k"])
                for p, _ in items:
                    w.writerow([p.model, p.layer, p.phase, p.m, p.n, p.k])
            out_json = self.tmp / f"cachehit-{dtype}-{scale}.jsonl"
            cmd = [str(cli), "suite", str(shapes), "--dtype", dtype, "--cache", str(self.cache1), "--json", str(out_json)]
            if scale != "none":
                cmd += ["--scale", scale]
            if a.backend_list:
                cmd += ["--backends", ",".join(a.backend_list)]
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
                rc, err = r.returncode, r.stderr
            except subprocess.TimeoutExpired as e:
                rc, err = "timeout", str(e)
            wall = time.monotonic() - t0
            runs.append({"command": " ".join(cmd), "rc": rc, "wall_s": wall, "stderr_tail": (err or "")[-1500:]})
            by_key = {}
            if out_json.exists():
                for line in out_json.read_text().splitlines():
                    try:
                        j = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    key = (j.get("model"), j.get("layer"), j.get("m"), j.get("n"), j.get("k"))
                    e = by_key.setdefault(key, {"select_ms": j.get("select_ms"), "from_cache": j.get("from_cache"),
                                                "status": j.get("status"), "winner_id": None})
                    if j.get("winner"):
                        e["winner_id"] = j.get("candidate_id")
            for p, id1 in items:
                e = by_key.get((p.model, p.layer, p.m, p.n, p.k))
                if e is None or e.get("select_ms") is None:
                    per.append({"label": p.label, "error": "no row in the CLI's output" if e is None else f"status {e.get('status')}"})
                else:
                    per.append({"label": p.label, "select_ms": e["select_ms"], "from_cache": bool(e["from_cache"]),
                                "same_pick": (e["winner_id"] == id1) if e["winner_id"] else None})
        return cli_select_stats(per, runs, lt)

    # -- summary and output ---------------------------------------------------------------------
    def raw(self, planned):
        """What build_summary() aggregates: this run's own results (see raw_results())."""
        return {"planned": len(planned), "problems": self.problems, "skipped": self.skipped,
                "coldtune": self.coldtune, "stability": self.stability, "cachehit": self.cachehit,
                "mismatches": self.mismatches, "part_seconds": self.part_seconds, "part_errors": self.errors}

    def write(self, planned, final=False):
        a = self.args
        doc = {"device": self.env.get("device_str", ""), "date": self.date, "command": self.env.get("command", ""),
               "environment": self.env, "ceilings": self.ceilings, "ceilings_end": self.ceilings_end,
               "rows": self.rows, "summary": None, "final": final}
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


# ---------------------------------------------------------------------------------------------
# the summary: one function for one run and for the shards of one run merged

def build_summary(raw, doc):
    """summary{} of a run from its raw results (raw: Run.raw(), or raw_results() of the shards' summaries
    concatenated by merge_docs()) and doc's rows and environment: one run and a merge of shards
    compute every aggregate the same way."""
    probs = [s for s in raw["problems"] if s.get("status") in ("ok", "mismatch") and s.get("pick")]
    out = {"coverage": {"planned": raw["planned"], "finished": len(probs),
                        "errors": [f"{s['label']}: {'; '.join(s['errors'])}" for s in raw["problems"] if s["status"] == "error"],
                        "skipped_not_supported": [f"{s['label']}: {'; '.join(s['errors'])}" for s in raw["problems"] if s["status"] == "skipped"],
                        "skipped_for_budget": raw["skipped"]},
           "geomean": {}, "by_dtype_m": {}, "pick_vs_default": {}, "inductor": [], "tune": {},
           "problems": raw["problems"]}

    def agg(group):
        g = {"n": len(group),
             "speedup_vs_default": geomean([s.get("speedup_vs_default") for s in group]),
             "speedup_vs_torch": geomean([s.get("speedup_vs_torch") for s in group]),
             "pick_tflops_geomean": geomean([s["pick"].get("tflops") for s in group]),
             "fraction_of_roof_geomean": geomean([s.get("fraction_of_roof") for s in group])}
        ind = [s for s in group if s.get("speedup_vs_inductor")]
        if ind:
            g["speedup_vs_inductor"] = geomean([s["speedup_vs_inductor"] for s in ind])
            g["n_inductor"] = len(ind)
        tb = [s for s in group if s.get("speedup_vs_triton_best")]
        if tb:
            g["speedup_vs_triton_best"] = geomean([s["speedup_vs_triton_best"] for s in tb])
            g["triton_best_vs_torch"] = geomean([s.get("triton_best_vs_torch") for s in tb])
            g["n_triton_best"] = len(tb)
        it = [s for s in group if s.get("triton_best_vs_inductor_triton")]
        if it:
            g["triton_best_vs_inductor_triton"] = geomean([s["triton_best_vs_inductor_triton"] for s in it])
            g["speedup_vs_inductor_triton"] = geomean([s.get("speedup_vs_inductor_triton") for s in it])
            g["n_inductor_triton"] = len(it)
        cl = [s["cutlass_best_vs_cublaslt_best"] for s in group if s.get("cutlass_best_vs_cublaslt_best")]
        if cl:
            g["cutlass_best_vs_cublaslt_best"] = geomean(cl)
            g["cutlass_within_5pct_of_cublaslt"] = sum(r >= 1 / 1.05 for r in cl) / len(cl)
            g["n_cutlass_best"] = len(cl)
        cd = [s["cutedsl_best_vs_cutlass_best"] for s in group if s.get("cutedsl_best_vs_cutlass_best")]
        if cd:
            g["cutedsl_best_vs_cutlass_best"] = geomean(cd)
            g["cutedsl_within_5pct_of_cutlass"] = sum(r >= 1 / 1.05 for r in cd) / len(cd)
            g["n_cutedsl_best"] = len(cd)
        g["pick_backends"] = {b: sum(s.get("pick_backend") == b for s in group)
                              for b in sorted({s.get("pick_backend") for s in group if s.get("pick_backend")})}
        return g
    out["geomean"]["all"] = agg(probs)
    for d in sorted({s["dtype_name"] for s in probs}):
        out["geomean"][d] = agg([s for s in probs if s["dtype_name"] == d])
    for d in sorted({s["dtype_name"] for s in probs}):
        for m in sorted({s["m"] for s in probs if s["dtype_name"] == d}):
            out["by_dtype_m"][f"{d}/m={m}"] = agg([s for s in probs if s["dtype_name"] == d and s["m"] == m])
    with_def = [s for s in probs if s.get("pick_within_noise_of_default") is not None]
    out["pick_vs_default"] = {
        "n": len(with_def),
        "at_least_as_fast_within_noise": sum(s["pick_within_noise_of_default"] for s in with_def),
        "faster_beyond_noise": sum(bool(s.get("pick_faster_beyond_noise")) for s in with_def),
        "same_kernel": sum(bool(s.get("same_kernel")) for s in with_def),
        "slower_beyond_noise": [{"label": s["label"], "speedup_vs_default": s["speedup_vs_default"],
                                 "noise": s["noise"]} for s in with_def if not s["pick_within_noise_of_default"]],
        "rule": "pick_median <= default_median * (1 + max(spread_pick, spread_default)), spread = (p80-p20)/median "
                "of the side-by-side samples"}
    noise = [s.get("noise") for s in with_def if s.get("noise") is not None]
    if noise:
        out["noise"] = {"median": statistics.median(noise), "max": max(noise)}
    same = [s for s in with_def if s.get("same_kernel")]
    if same:
        out["noise"] = out.get("noise", {})
        out["noise"]["same_kernel_ratio_geomean"] = geomean([s["speedup_vs_default"] for s in same])
    for s in probs:
        if s.get("inductor"):
            out["inductor"].append({"label": s["label"], "m": s["m"], "n": s["n"], "k": s["k"],
                                    "compile_s": s["inductor"].get("compile_s"),
                                    "inductor_tflops": s["inductor"].get("tflops"),
                                    "pick_tflops": s["pick"].get("tflops"),
                                    "torch_tflops": (s.get("torch") or {}).get("tflops"),
                                    "speedup_vs_inductor": s.get("speedup_vs_inductor"),
                                    "gemmtune_tune_s": s.get("tune", {}).get("select_s")})
    out["inductor_triton"] = inductor_triton_summary(probs, doc["environment"])
    out["triton"] = triton_summary(probs, doc["rows"], doc["environment"])
    if raw["coldtune"]:
        out["coldtune"] = raw["coldtune"]
    tunes = [s["tune"]["select_s"] for s in probs if s.get("tune")]
    if tunes:
        out["tune"] = {"select_s_median": statistics.median(tunes), "select_s_max": max(tunes),
                       "select_s_total": sum(tunes),
                       "candidates_median": statistics.median([s["tune"]["n_candidates"] for s in probs]),
                       "wrong_total": sum(s["tune"]["n_wrong"] for s in probs),
                       "failed_total": sum(s["tune"]["n_failed"] for s in probs)}
    if raw["stability"]:
        ok = [e for e in raw["stability"] if e.get("status") == "ok"]
        diff = [e for e in ok if not e["same"]]
        out["stability"] = {"n": len(ok), "same_pick": len(ok) - len(diff), "different_pick": len(diff),
                            "different_within_noise": sum(bool(e.get("within_noise")) for e in diff),
                            "ratio_geomean_different": geomean([e.get("ratio") for e in diff]),
                            "worst_ratio": max((e.get("ratio") or 0 for e in diff), default=None),
                            "errors": [f"{e['label']}: {e.get('error')}" for e in raw["stability"] if e.get("status") != "ok"],
                            "problems": raw["stability"]}
    if raw["cachehit"]:
        out["cachehit"] = raw["cachehit"]
    out["mismatches"] = raw["mismatches"]
    out["part_seconds"] = raw["part_seconds"]
    out["part_errors"] = raw["part_errors"]
    return out


def inductor_triton_summary(probs, env):
    """Triton's best vs torch.compile max-autotune restricted to Triton, per subset problem."""
    opts = env.get("bench_options") or {}
    per = []
    for s in probs:
        it = s.get("inductor_triton")
        if not it:
            continue
        info = it.get("inductor") or {}
        per.append({"label": s["label"], "dtype_name": s["dtype_name"], "m": s["m"], "n": s["n"], "k": s["k"],
                    "compile_s": it.get("compile_s"), "kind": info.get("kind"), "config": info.get("config"),
                    "kernels": info.get("kernels"), "inductor_triton_us": it.get("median_us"),
                    "inductor_triton_tflops": it.get("tflops"), "inductor_triton_correct": it.get("correct"),
                    "triton_best_us": (s.get("triton_best") or {}).get("median_us"),
                    "triton_best_tflops": (s.get("triton_best") or {}).get("tflops"),
                    "triton_best": (s.get("triton_best") or {}).get("candidate"),
                    "pick_us": s["pick"].get("median_us"), "pick_tflops": s["pick"].get("tflops"),
                    "pick_backend": s.get("pick_backend"),
                    "default_tflops": (s.get("default") or {}).get("tflops"),
                    "torch_tflops": (s.get("torch") or {}).get("tflops"),
                    "triton_best_vs_inductor_triton": s.get("triton_best_vs_inductor_triton"),
                    "pick_vs_inductor_triton": s.get("speedup_vs_inductor_triton"),
                    "noise": s.get("triton_noise"), "gemmtune_tune_s": s.get("tune", {}).get("select_s")})
    out = {"problems": per, "target": INDUCTOR_TRITON_TARGET, "mode": opts.get("inductor_triton_mode"),
           "backends": "TRITON", "extra_options": opts.get("inductor_triton_options") or {}, "geomean": {},
           "what": "triton_best_vs_inductor_triton = inductor-triton median / Triton best median (> 1: Triton's "
                   "best faster); pick_vs_inductor_triton likewise for gemmtune's pick over all backends"}
    groups = {"all": per}
    for d in sorted({e["dtype_name"] for e in per}):
        groups[d] = [e for e in per if e["dtype_name"] == d]
    for name, grp in groups.items():
        ok = [e for e in grp if e["triton_best_vs_inductor_triton"]]
        gm = geomean([e["triton_best_vs_inductor_triton"] for e in ok])
        out["geomean"][name] = {"n": len(ok), "triton_best_vs_inductor_triton": gm,
                                "pick_vs_inductor_triton": geomean([e["pick_vs_inductor_triton"] for e in ok]),
                                "meets_target": (gm >= INDUCTOR_TRITON_TARGET) if gm else None,
                                "n_not_triton_only": sum(e["kind"] in ("aten", "mixed") for e in grp)}
    return out


def triton_summary(probs, rows, env):
    """The Triton backend over the suite: candidates by status (wrong ones listed), compile times
    (every tune row of backend triton), picks by backend, Triton's best against the pick."""
    hit_s = (env.get("bench_options") or {}).get("compile_hit_s", 0.05)
    workers = (env.get("gemmtune_env") or {}).get("GEMMTUNE_COMPILE_WORKERS")
    tr = [r for r in rows if r.get("timing") == "tune" and r.get("backend") == "triton"]
    counts = {st: sum(r["status"] == st for r in tr) for st in ("ok", "pruned", "wrong", "failed")}
    reasons = {}
    for r in tr:
        if r["status"] == "failed":
            key = (r.get("reason") or "?").split("\n")[0][:120]
            reasons[key] = reasons.get(key, 0) + 1
    with_tb = [s for s in probs if s.get("speedup_vs_triton_best")]
    return {
        "candidates": {"n": len(tr), **counts},
        "wrong": [{"label": f"{r['model']}/{r['layer']} m={r['m']} {r['dtype_name']}", "candidate": r["candidate"],
                   "candidate_id": r["candidate_id"], "rel_err": r.get("rel_err"), "reason": r.get("reason")}
                  for r in tr if r["status"] == "wrong"],
        "failed_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:15]),
        "problems_with_candidates": len({(r["m"], r["n"], r["k"], r["dtype_name"]) for r in tr}),
        "problems_without_correct_candidate": [s["label"] for s in probs
                                               if (s.get("tune", {}).get("backends", {}).get("triton") or {}).get("n")
                                               and not s.get("triton_best")],
        "compile_s": compile_stats([r.get("compile_s") for r in tr], hit_s),
        "compile_note": (f"compile_s of every Triton candidate of the suite's tunes, on the GPU machine "
                         f"({env.get('cpu_count')} cores, {f'{workers} ' if workers else ''}compile workers in parallel, artifact store empty at the start of "
                         f"the run: a config compiled for one problem is a store hit for the next); 'compiled' = "
                         f"compile_s >= {hit_s} s. The 2-core figure (<= 1 s median) comes from the "
                         f"CPU build machine's tests."),
        "pick_backends": {b: sum(s.get("pick_backend") == b for s in probs)
                          for b in sorted({s.get("pick_backend") for s in probs if s.get("pick_backend")})},
        "speedup_vs_triton_best_geomean": geomean([s["speedup_vs_triton_best"] for s in with_tb]),
        "triton_best_vs_torch_geomean": geomean([s.get("triton_best_vs_torch") for s in with_tb]),
        "triton_best_vs_default_geomean": geomean([s.get("triton_best_vs_default") for s in with_tb]),
        "n_triton_best": len(with_tb)}


# ---------------------------------------------------------------------------------------------
# --merge: the shards of one run (--shard I/N, one per GPU) as that one run

def raw_results(summary):
    """The raw results a written summary holds (the inverse of build_summary(), for merging)."""
    cov = summary["coverage"]
    return {"planned": cov["planned"], "problems": summary["problems"], "skipped": cov["skipped_for_budget"],
            "coldtune": summary.get("coldtune") or {},
            "stability": (summary.get("stability") or {}).get("problems", []),
            "cachehit": summary.get("cachehit") or {}, "mismatches": summary.get("mismatches", []),
            "part_seconds": summary.get("part_seconds", {}), "part_errors": summary.get("part_errors", [])}


def merge_cachehit(parts):
    """The shards' cachehit entries as one: problems concatenated, statistics recomputed;
    max_ms_after_first is the largest of the shards' (each shard's first select is its own cold start)."""
    parts = [c for c in parts if c]
    if not parts:
        return {}
    out = {}
    for where in ("in_process", "cli"):
        rs = [c.get(where) or {} for c in parts]
        if not any("problems" in r for r in rs):
            out[where] = rs[0]  # nothing ran (e.g. a mock run's "no CLI")
            continue
        per = [e for r in rs for e in r.get("problems", [])]
        if where == "cli":
            out[where] = cli_select_stats(per, [x for r in rs for x in r.get("runs", [])], rs[0].get("cublaslt_preload"))
        else:
            out[where] = {**select_stats(per), "problems": per}
        if "max_ms_after_first" in out[where]:
            out[where]["max_ms_after_first"] = max((r["max_ms_after_first"] for r in rs
                                                    if r.get("max_ms_after_first") is not None), default=None)
    return out


def merge_docs(docs, merge_command=""):
    """One run's doc from the docs of its shards (--shard I/N, any order; raises ValueError if they are
    not the shards of one run). Rows and raw results are concatenated in the order one run would have
    produced them (the ordering's index), and the summary is rebuilt by build_summary(), as one run
    computes it. ceilings, ceilings_end and environment are shard 0's (its GPU); shards[] holds every
    shard's GPU, ceilings, GPU state, part times and coverage counts (each problem's roof_us comes from
    its own shard's ceilings). Part times are the longest shard's (they ran in parallel). A missing
    shard is a part error and its problems count as planned but not finished."""
    if not docs or any("shard" not in d for d in docs):
        raise ValueError("not a shard's result (no 'shard' field: was it run with --shard I/N?)")
    docs = sorted(docs, key=lambda d: d["shard"]["index"])
    count = docs[0]["shard"]["count"]
    idx = [d["shard"]["index"] for d in docs]
    if any(d["shard"]["count"] != count for d in docs) or len(set(idx)) != len(idx):
        given = ", ".join(f"{d['shard']['index']}/{d['shard']['count']}" for d in docs)
        raise ValueError(f"shards {given}: not the shards of one run")
    first = docs[0]
    raws = [raw_results(d["summary"]) for d in docs]
    by_index = lambda e: e.get("index", 0)  # noqa: E731
    skipped = {}
    for r in raws:
        for k, v in r["skipped"].items():
            skipped.setdefault(k, []).extend(v)
    raw = {"planned": sum(r["planned"] for r in raws),
           "problems": sorted((p for r in raws for p in r["problems"]), key=by_index),
           "skipped": skipped,
           "coldtune": next((r["coldtune"] for r in raws if r["coldtune"]), {}),
           "stability": sorted((e for r in raws for e in r["stability"]), key=by_index),
           "cachehit": merge_cachehit([r["cachehit"] for r in raws]),
           "mismatches": [m for r in raws for m in r["mismatches"]],
           "part_seconds": {}, "part_errors": []}
    for i, r in zip(idx, raws):
        for k, v in r["part_seconds"].items():
            raw["part_seconds"][k] = max(raw["part_seconds"].get(k, 0.0), v)
        raw["part_errors"] += [f"shard {i}: {e}" for e in r["part_errors"]]
    missing = sorted(set(range(count)) - set(idx))
    if missing:
        raw["planned"] = max(raw["planned"], first["shard"].get("problems_total") or 0)
        raw["part_errors"] += [f"shard {i} of {count}: no result (see its log, bench-{i}.log)" for i in missing]

    # Rows in one run's order: the cold tune's, then each problem's (tune, then side by side) by
    # index, then the stability head-to-heads.
    index_of = {(p["m"], p["n"], p["k"], p["dtype_name"]): p.get("index", 0) for p in raw["problems"]}
    phase = {"coldtune": 0, "stability_h2h": 2}
    rows = sorted((r for d in docs for r in d["rows"]),
                  key=lambda r: (phase.get(r.get("timing"), 1),
                                 index_of.get((r["m"], r["n"], r["k"], r["dtype_name"]), 0)))

    def shard_entry(d):
        e, su = d["environment"], d["summary"]
        cov = su["coverage"]
        return {"index": d["shard"]["index"], "count": count, "gpu": d["shard"].get("gpu"), "device": d["device"],
                "command": d["command"], "final": d.get("final"), "ceilings": d.get("ceilings"),
                "ceilings_end": d.get("ceilings_end"),
                "gpu_state": {"start": e.get("gpu_state_start"), "end": e.get("gpu_state_end")},
                "part_times": su.get("part_seconds", {}),
                "coverage": {"planned": cov["planned"], "finished": cov["finished"], "errors": len(cov["errors"]),
                             "skipped_not_supported": len(cov["skipped_not_supported"]),
                             "skipped_for_budget": {k: len(v) for k, v in cov["skipped_for_budget"].items()}}}

    def shard_command(d):
        cvd = (d["shard"].get("gpu") or {}).get("cuda_visible_devices")
        return (f"CUDA_VISIBLE_DEVICES={cvd} " if cvd is not None else "") + d["command"]

    env = dict(first["environment"])
    env["merge_command"] = merge_command
    doc = {"device": first["device"], "date": first["date"], "command": "\n".join(shard_command(d) for d in docs),
           "environment": env, "ceilings": first.get("ceilings") or {}, "ceilings_end": first.get("ceilings_end") or {},
           "rows": rows, "summary": None, "final": all(d.get("final") for d in docs) and not missing,
           "shards": [shard_entry(d) for d in docs]}
    doc["summary"] = build_summary(raw, doc)
    return doc


def write_doc(out, stem, doc):
    """<stem>.json (replaced atomically: it is rewritten after every part) and <stem>.md in out."""
    jp = out / f"{stem}.json"
    tmp = jp.with_suffix(".json.tmp")
    tmp.write_text(dump_json(doc))
    tmp.replace(jp)
    (out / f"{stem}.md").write_text(render_markdown(doc))


def exit_code(doc):
    """1: a correctness failure; 2: a part crashed; else 0 (one run and a merge alike)."""
    s = doc["summary"]
    return 1 if s.get("mismatches") else 2 if s.get("part_errors") else 0


def merge_main(args, command):
    """--merge SHARD.json...: one run's <date>-h200[-tag].json and .md in --out (tag: --tag, else the
    shards'); the stdout summary; the exit code one run would have had."""
    try:
        docs = [json.loads(Path(f).read_text()) for f in args.merge]
        doc = merge_docs(docs, command)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"h200.py --merge: {e}", file=sys.stderr)
        return 2
    tag = args.tag or docs[0]["shard"].get("tag") or ""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{doc['date']}-h200" + (f"-{tag}" if tag else "")
    write_doc(out, stem, doc)
    print_summary(doc)
    print(f"merged {len(docs)} shards: wrote {out / (stem + '.json')} and .md")
    return exit_code(doc)


def dump_json(doc):
    """Indented JSON, except that each element of rows[] is one line (diff-friendly, compact)."""
    rows = doc.get("rows", [])
    head = dict(doc)
    head["rows"] = "__ROWS__"
    text = json.dumps(head, indent=1, default=str)
    body = ",\n".join("  " + json.dumps(r, default=str) for r in rows)
    return text.replace('"__ROWS__"', "[\n" + body + "\n ]" if rows else "[]", 1)


# ---------------------------------------------------------------------------------------------
# markdown and the stdout summary

def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(doc):
    s = doc["summary"]
    env = doc["environment"]
    L = [f"# gemmtune on the H200, {doc['date']}", ""]
    L.append(f"Device: {doc['device']}  ")
    v = env.get("versions", {})
    L.append(f"torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), triton {v.get('triton')}, gemmtune "
             f"{env.get('engine', {}).get('version')}, cuBLASLt loaded from `{env.get('cublaslt')}`  ")
    L.append(f"Environment key: `{env.get('engine', {}).get('environment')}`")
    L += ["", "Command:", "", "```", doc["command"], "```", ""]
    L += render_shards_markdown(doc)
    if not doc.get("final"):
        L += ["**Partial results: the run did not finish.**", ""]
    cov = s["coverage"]
    L.append(f"Coverage: {cov['finished']} of {cov['planned']} planned suite problems finished; "
             f"{len(cov['skipped_for_budget'].get('suite', []))} skipped for the time budget, "
             f"{len(cov['errors'])} errors, {len(cov['skipped_not_supported'])} not supported. Part times (s"
             + (", the longest shard's" if doc.get("shards") else "") + "): "
             + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items()))
    L.append("")
    L.append("Method: random inputs; 256 MB L2 flush before every timed sample (outside the timed region); warm-up; "
             "CUDA events around one call; gemmtune's contenders and torch rotate over several input sets "
             "(as the engine's race: over 3x L2, at least 3; Inductor on set 0); contenders interleaved in rounds with a rotating order in one process; "
             "medians with p20/p80; speedup = other's median / gemmtune pick's median (> 1: gemmtune faster); "
             "spread = (p80 - p20) / median. Correctness: relative Frobenius error vs a float32 reference of the same "
             "inputs and vs torch's output.")
    L.append("")
    for title, key in (("Ceilings (start of run)", "ceilings"), ("Ceilings (end of run)", "ceilings_end")):
        c = doc.get(key) or {}
        if c:
            if doc.get("shards"):
                title += ", shard 0's GPU"
            L += [f"## {title}", "", md_table(["what", "median", "best sample"], [
                ["copy, read+write, TB/s", fnum(c.get("copy_TBps"), 2), fnum(c.get("copy_TBps_best"), 2)],
                ["bf16 torch.mm 8192^3, TFLOP/s", fnum(c.get("bf16_tflops"), 0), fnum(c.get("bf16_tflops_best"), 0)],
                ["fp8 torch._scaled_mm 8192^3, TFLOP/s", fnum(c.get("fp8_tflops"), 0), fnum(c.get("fp8_tflops_best"), 0)]]), ""]
            if c.get("gpu_state"):
                L += [f"GPU state: {c['gpu_state']}", ""]
    L += ["## Summary (geomeans over finished problems)", ""]
    rows = []
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        rows.append([name, g["n"], fratio(g.get("speedup_vs_default")), fratio(g.get("speedup_vs_torch")),
                     fratio(g.get("speedup_vs_triton_best")), fratio(g.get("triton_best_vs_torch")),
                     fratio(g.get("speedup_vs_inductor")), fnum(g.get("pick_tflops_geomean"), 1),
                     fpct(g.get("fraction_of_roof_geomean")),
                     ", ".join(f"{b} {n}" for b, n in (g.get("pick_backends") or {}).items())])
    L += [md_table(["group", "n", "pick vs cuBLASLt default", "pick vs torch", "pick vs Triton best",
                    "Triton best vs torch", "pick vs inductor", "pick TFLOP/s", "of measured roof", "picks by backend"],
                   rows), ""]
    L.append("pick = gemmtune's tuned pick over all its backends; ratios are the other's median / the first's "
             "median (> 1: the first is faster).")
    L.append("")
    pv = s.get("pick_vs_default", {})
    if pv.get("n"):
        L.append(f"gemmtune's pick at least as fast as cuBLASLt's default within noise: **{pv['at_least_as_fast_within_noise']}"
                 f"/{pv['n']}** (faster beyond noise: {pv['faster_beyond_noise']}; same kernel as the default: "
                 f"{pv['same_kernel']}). Rule: {pv['rule']}.")
        if s.get("noise"):
            L.append(f"Noise (max spread of pick and default, per problem): median {fpct(s['noise'].get('median'))}, "
                     f"max {fpct(s['noise'].get('max'))}; where pick = default (same kernel), default/pick geomean "
                     f"{fratio(s['noise'].get('same_kernel_ratio_geomean'))}.")
        if pv.get("slower_beyond_noise"):
            L.append("Slower than the default beyond noise: " + ", ".join(
                f"{e['label']} ({fratio(e['speedup_vs_default'])}, noise {fpct(e['noise'])})" for e in pv["slower_beyond_noise"]))
        L.append("")
    t = s.get("tune") or {}
    if t:
        L += [f"Tuning (gemmtune select from an empty cache): median {fnum(t['select_s_median'], 2)} s, max "
              f"{fnum(t['select_s_max'], 2)} s, total {fnum(t['select_s_total'], 0)} s; median {t['candidates_median']} "
              f"candidates; {t['wrong_total']} wrong and {t['failed_total']} failed candidates in all (never selected).", ""]
    if s.get("inductor"):
        L += ["## TorchInductor max-autotune subset (its default gemm backends)", "", md_table(
            ["problem", "m", "n", "k", "compile+autotune s", "inductor TFLOP/s", "gemmtune TFLOP/s", "torch.mm TFLOP/s",
             "pick vs inductor", "gemmtune tune s"],
            [[e["label"], e["m"], e["n"], e["k"], fnum(e["compile_s"], 1), fnum(e["inductor_tflops"], 1),
              fnum(e["pick_tflops"], 1), fnum(e["torch_tflops"], 1), fratio(e["speedup_vs_inductor"]),
              fnum(e["gemmtune_tune_s"], 2)] for e in s["inductor"]]), ""]
        if doc["environment"].get("inductor_init_s") is not None:
            L += [f"(Inductor's one-time start-up, excluded above: {fnum(doc['environment']['inductor_init_s'], 1)} s.)", ""]
    L += render_triton_markdown(doc)
    L += render_best_pairs_markdown(doc)
    st = s.get("stability")
    if st:
        L += ["## Stability: re-tuned from an empty cache", "",
              f"{st['same_pick']}/{st['n']} same pick; {st['different_pick']} different, of which "
              f"{st['different_within_noise']} within noise when timed head to head (second/first geomean "
              f"{fratio(st['ratio_geomean_different'])}, worst {fratio(st['worst_ratio'])}).", ""]
        diff = [e for e in st["problems"] if e.get("status") == "ok" and not e["same"]]
        if diff:
            L += [md_table(["problem", "first pick", "second pick", "second/first h2h", "noise", "within noise",
                            "ratio in 1st tune", "ratio in 2nd tune", "duel in 1st tune", "duel in 2nd tune"],
                           [[e["label"], e.get("first_name", ""), e.get("second_name", ""), fratio(e.get("ratio")),
                             fpct(e.get("noise")), e.get("within_noise"), fratio(e.get("ratio_in_first_tune")),
                             fratio(e.get("ratio_in_second_tune")), duel_text(e.get("duel_first_tune")),
                             duel_text(e.get("duel_second_tune"))] for e in diff]), ""]
    ch = s.get("cachehit")
    if ch:
        L += ["## Cache hits: select() answered from pass 1's cache", ""]
        rows = []
        for where, label in (("cli", "separate process (gemmtune CLI suite --cache)"), ("in_process", "in process (new engine)")):
            r = ch.get(where) or {}
            rows.append([label, r.get("n", 0), r.get("n_from_cache", "-"), fnum(r.get("median_ms"), 3),
                         fnum(r.get("p90_ms"), 3), fnum(r.get("max_ms"), 3), fnum(r.get("max_ms_after_first"), 3),
                         r.get("n_under_1ms", "-"), r.get("n_same_pick", "-"),
                         (r.get("error") or r.get("warning") or "")[:200]])
        L += [md_table(["where", "n", "from cache", "median ms", "p90 ms", "max ms", "max ms after the first",
                        "under 1 ms", "same pick as pass 1", "note"], rows), ""]
        runs = (ch.get("cli") or {}).get("runs") or []
        for r in runs:
            L.append(f"- `{r['command']}`: rc {r['rc']}, {fnum(r['wall_s'], 1)} s")
        L.append("")
    if s.get("mismatches"):
        L += ["## CORRECTNESS FAILURES", ""] + [f"- {m}" for m in s["mismatches"]] + [""]
    if s.get("part_errors"):
        L += ["## Part errors", ""] + [f"- {m}" for m in s["part_errors"]] + [""]
    if cov["errors"] or cov["skipped_not_supported"]:
        L += ["## Problem errors / not supported", ""] + [f"- {m}" for m in cov["errors"] + cov["skipped_not_supported"]] + [""]
    L += ["## Per problem (side-by-side medians)", ""]
    rows = []
    for p in sorted(s["problems"], key=lambda p: (p["dtype_name"], p["model"], p["layer"], p["m"])):
        if not p.get("pick"):
            continue
        rows.append([p["model"], p["layer"], p["m"], p["n"], p["k"], p["dtype_name"],
                     fnum(p["pick"].get("tflops"), 1), fnum((p.get("default") or {}).get("tflops"), 1),
                     fnum((p.get("triton_best") or {}).get("tflops"), 1),
                     fnum((p.get("torch") or {}).get("tflops"), 1), fnum((p.get("inductor") or {}).get("tflops"), 1),
                     fnum((p.get("inductor_triton") or {}).get("tflops"), 1),
                     fratio(p.get("speedup_vs_default")), fratio(p.get("speedup_vs_triton_best")),
                     fratio(p.get("speedup_vs_torch")), fpct(p.get("noise")),
                     {True: "yes", False: "NO", None: "-"}[p.get("pick_within_noise_of_default")],
                     "=" if p.get("same_kernel") else "", fpct(p.get("fraction_of_roof")),
                     fnum(p.get("tune", {}).get("select_s"), 2), p.get("tune", {}).get("n_candidates", ""),
                     f"{p['pick'].get('rel_err', 0) or 0:.1e}", p.get("pick_backend", ""), p["pick"].get("candidate", "")])
    L += [md_table(["model", "layer", "m", "n", "k", "dtype", "gemmtune TFLOP/s", "cuBLASLt default", "Triton best",
                    "torch", "inductor", "inductor-triton", "pick vs default", "pick vs Triton best", "pick vs torch",
                    "noise", "within noise", "same", "of roof", "tune s", "cands", "rel err", "pick backend",
                    "gemmtune pick"], rows), ""]
    skipped = cov["skipped_for_budget"]
    if skipped.get("suite") or skipped.get("stability"):
        L += ["## Skipped for the time budget", ""]
        for part, labels in skipped.items():
            if labels:
                L.append(f"- {part}: {len(labels)}: " + ", ".join(labels))
        L.append("")
    L += ["JSON: rows[] (one per problem and candidate/baseline; `timing` = tune | coldtune | side_by_side | stability_h2h) "
          "and summary{} as documented in bench/README.md.", ""]
    return "\n".join(L)


def gpu_name(g):
    """A shard's GPU in a few words: nvidia-smi's index and bus id, else CUDA_VISIBLE_DEVICES."""
    g = g or {}
    if g.get("index") is not None:
        return f"GPU {g['index']} ({g.get('pci.bus_id', '?')})"
    return f"CUDA_VISIBLE_DEVICES={g.get('cuda_visible_devices')}"


def render_shards_markdown(doc):
    """A shard's own report says which part it is; a merged one says how it ran and lists its shards."""
    if doc.get("shard"):
        sh = doc["shard"]
        return [f"Shard {sh['index']} of {sh['count']} ({gpu_name(sh.get('gpu'))}): only the suite problems whose index "
                f"in the ordering % {sh['count']} == {sh['index']}; `h200.py --merge` makes the run's report.", ""]
    shards = doc.get("shards")
    if not shards:
        return []
    n = shards[0]["count"]
    L = [f"Ran as {n} shards on {n} GPUs of one host (`GPUS={n} bench/device.sh`, merged with "
         f"`{doc['environment'].get('merge_command', 'h200.py --merge')}`): the suite's problems were dealt round-robin "
         f"over the ordering, each shard's problems timed side by side on its own GPU, the shards in parallel (their "
         f"compiles share the host's CPUs). The summary below covers every shard's problems; each problem's share of "
         f"the roof uses its own GPU's ceilings.", "",
         md_table(["shard", "GPU", "problems finished / planned", "skipped for budget (suite, stability)",
                   "copy TB/s start / end", "bf16 TFLOP/s start / end", "fp8 TFLOP/s start / end", "part times (s)"],
                  [[e["index"], gpu_name(e.get("gpu")),
                    f"{e['coverage']['finished']} / {e['coverage']['planned']}",
                    f"{e['coverage']['skipped_for_budget'].get('suite', 0)}, "
                    f"{e['coverage']['skipped_for_budget'].get('stability', 0)}"]
                   + [f"{fnum((e.get('ceilings') or {}).get(k), d)} / {fnum((e.get('ceilings_end') or {}).get(k), d)}"
                      for k, d in (("copy_TBps", 2), ("bf16_tflops", 0), ("fp8_tflops", 0))]
                   + [", ".join(f"{k} {v:.0f}" for k, v in e.get("part_times", {}).items())] for e in shards]), ""]
    return L


# (backend, its name, the backend it is measured against, that one's name): issue 4 compares CUTLASS's
# best with cuBLASLt's, issue 5 CuTe DSL's with CUTLASS's (target: within 5% or faster on >= 70% of the
# problems with m >= 2048). Suite problems carry <a>_best_vs_<b>_best where both raced.
BEST_PAIRS = (("cutlass", "CUTLASS", "cublaslt", "cuBLASLt"), ("cutedsl", "CuTe DSL", "cutlass", "CUTLASS"))


def render_best_pairs_markdown(doc):
    """Each BEST_PAIRS backend's best beside the other's, per problem where both raced."""
    L = []
    for a, an, b, bn in BEST_PAIRS:
        key = f"{a}_best_vs_{b}_best"
        probs = [p for p in doc["summary"]["problems"] if p.get(key)]
        if not probs:
            continue
        big = [p[key] for p in probs if p["m"] >= 2048]
        L += [f"## {an} best vs {bn} best (timed side by side)", ""]
        if big:
            ok = sum(r >= 1 / 1.05 for r in big)
            L += [f"m >= 2048: {an}'s best within 5% of {bn}'s best or faster on {ok}/{len(big)} "
                  f"({ok / len(big):.0%}; target 70%), geomean {fratio(geomean(big))}.", ""]
        L += [md_table(["problem", "dtype", "m", "n", "k", f"{an} best TFLOP/s", f"{bn} best TFLOP/s",
                        f"{bn}/{an} time", f"{an} config", f"{bn} config", "tune s", "pick backend"],
                       [[p["label"], p["dtype_name"], p["m"], p["n"], p["k"], fnum(p[f"{a}_best"].get("tflops"), 1),
                         fnum((p.get(f"{b}_best") or {}).get("tflops"), 1), fratio(p[key]),
                         p[f"{a}_best"].get("candidate", ""), (p.get(f"{b}_best") or {}).get("candidate", ""),
                         fnum(p.get("tune", {}).get("select_s"), 2), p.get("pick_backend", "")] for p in probs]), ""]
    return L


def render_triton_markdown(doc):
    """The Triton backend's sections: candidates and compile times, Triton's best vs Inductor
    restricted to Triton, the cold tune vs Inductor."""
    s = doc["summary"]
    L = []
    tr = s.get("triton") or {}
    c = tr.get("candidates") or {}
    if c.get("n"):
        L += ["## Triton backend", ""]
        L.append(f"Triton candidates in the suite's tunes: {c['n']} over {tr.get('problems_with_candidates')} problems: "
                 f"{c.get('ok', 0)} ok, {c.get('pruned', 0)} pruned, **{c.get('wrong', 0)} wrong**, {c.get('failed', 0)} "
                 f"failed (wrong and failed ones are never selected).")
        if tr.get("wrong"):
            L += ["", "Wrong Triton candidates:", ""] + [
                f"- {e['label']}: {e['candidate']} (`{e['candidate_id']}`), rel_err {fnum(e.get('rel_err'), 4)}: "
                f"{(e.get('reason') or '')[:200]}" for e in tr["wrong"][:40]]
        if tr.get("failed_reasons"):
            L += ["", "Failed Triton candidates by reason:", ""] + [f"- {n} x {r}" for r, n in tr["failed_reasons"].items()]
        if tr.get("problems_without_correct_candidate"):
            L += ["", "Problems where Triton had no correct timed candidate: "
                  + ", ".join(tr["problems_without_correct_candidate"])]
        cs = tr.get("compile_s") or {}
        L += ["", md_table(["compile time per Triton candidate", "n", "median s", "p90 s", "max s"], [
            ["every candidate (store hits included)", cs.get("n"), fnum(cs.get("median_s"), 3), "-", fnum(cs.get("max_s"), 2)],
            ["compiled in this run (not store hits)", cs.get("n_compiled"), fnum(cs.get("compiled_median_s"), 3),
             fnum(cs.get("compiled_p90_s"), 2), fnum(cs.get("compiled_max_s"), 2)]]
            + ([["cold tune (empty store: every candidate compiled)", ctc.get("n"), fnum(ctc.get("median_s"), 3),
                 fnum(ctc.get("compiled_p90_s"), 2), fnum(ctc.get("max_s"), 2)]]
               if (ctc := ((s.get("coldtune") or {}).get("gemmtune") or {}).get("triton_compile")) else [])), ""]
        L.append(f"{tr.get('compile_note', '')}")
        L.append("")
        pb = tr.get("pick_backends") or {}
        L.append(f"Picks by backend: {', '.join(f'{b} {n}' for b, n in pb.items()) or '-'}; pick vs Triton's best "
                 f"(geomean, > 1: the pick is faster): {fratio(tr.get('speedup_vs_triton_best_geomean'))} over "
                 f"{tr.get('n_triton_best')} problems; Triton's best vs torch: {fratio(tr.get('triton_best_vs_torch_geomean'))}, "
                 f"vs cuBLASLt's default: {fratio(tr.get('triton_best_vs_default_geomean'))}.")
        L.append("")
    it = s.get("inductor_triton") or {}
    if it.get("problems"):
        L += ["## Triton's best vs torch.compile max-autotune restricted to Triton (`inductor-triton`)", ""]
        L.append(f"`torch.compile(options=list_mode_options('{it.get('mode')}') + max_autotune_gemm_backends='TRITON'"
                 + (f" + {json.dumps(it.get('extra_options'))}" if it.get("extra_options") else "")
                 + ")`, cold cache per problem; timed interleaved with gemmtune's pick, Triton's best, cuBLASLt's "
                   "default and torch in the same rounds. Ratio = inductor-triton median / Triton best median (> 1: "
                   f"Triton's best faster). Target: geomean >= {it.get('target')}.")
        L += ["", md_table(["problem", "m", "n", "k", "Triton best TFLOP/s", "inductor-triton TFLOP/s",
                            "Triton best vs inductor-triton", "noise", "pick TFLOP/s (backend)", "pick vs inductor-triton",
                            "torch TFLOP/s", "compile s", "Inductor kernels", "Inductor config", "Triton best config"],
                           [[e["label"], e["m"], e["n"], e["k"], fnum(e["triton_best_tflops"], 1),
                             fnum(e["inductor_triton_tflops"], 1), fratio(e["triton_best_vs_inductor_triton"]),
                             fpct(e.get("noise")), f"{fnum(e['pick_tflops'], 1)} ({e.get('pick_backend')})",
                             fratio(e["pick_vs_inductor_triton"]), fnum(e["torch_tflops"], 1), fnum(e["compile_s"], 1),
                             e.get("kind") or "-", e.get("config") or "-", e.get("triton_best") or "-"]
                            for e in it["problems"]]), ""]
        L += [md_table(["group", "n", "Triton best vs inductor-triton (geomean)", "pick vs inductor-triton",
                        f"meets {it.get('target')}", "compiles not Triton-only"],
                       [[name, g["n"], fratio(g.get("triton_best_vs_inductor_triton")), fratio(g.get("pick_vs_inductor_triton")),
                         {True: "yes", False: "**NO**", None: "-"}[g.get("meets_target")], g.get("n_not_triton_only")]
                        for name, g in it.get("geomean", {}).items()]), ""]
    ct = s.get("coldtune") or {}
    if ct:
        L += [f"## Cold tune vs Inductor: {ct.get('label')}", ""]
        g, ind = ct.get("gemmtune") or {}, ct.get("inductor") or {}
        rows = []
        if g:
            bs = g.get("backends_stats") or {}
            rows.append([f"gemmtune ({', '.join(ct.get('backends', []))}), new process, empty tuning cache and artifact store",
                         fnum(g.get("seconds"), 2),
                         f"engine start {fnum(g.get('engine_s'), 2)} s + select {fnum(g.get('select_s'), 2)} s; whole process "
                         f"{fnum(g.get('process_s'), 2)} s; candidates " + ", ".join(f"{b} {v.get('n')}" for b, v in bs.items())
                         + (f"; pick {g['pick']['backend']} {g['pick']['candidate']}" if g.get("pick") else "")
                         + (f"; ERROR {g['error']}" if g.get("error") else "")])
        if ind:
            rows.append([f"Inductor {ind.get('mode')} (gemm backends "
                         f"{(ind.get('defaults') or {}).get('max_autotune_gemm_backends')}), cold cache, in process",
                         fnum(ind.get("seconds"), 2),
                         f"compile + autotune of the first call; Inductor's one-time start-up ({fnum(ind.get('init_s'), 1)} s) "
                         f"excluded; kernels: {ind.get('kind')} {ind.get('config') or ''}"])
        L += [md_table(["what", "wall s", "detail"], rows), ""]
        ws, wo = ct.get("with_startup"), ct.get("without_startup")
        if ws and wo:
            L.append(f"Like for like, one-time start-ups counted on both sides: gemmtune {fnum(ws['gemmtune_s'], 2)} s "
                     f"(engine start + select) vs Inductor {fnum(ws['inductor_s'], 2)} s (start-up + compile and "
                     f"autotune), Inductor / gemmtune {fratio(ct.get('inductor_over_gemmtune'))}; on neither side: "
                     f"gemmtune select {fnum(wo['gemmtune_s'], 2)} s vs Inductor compile and autotune "
                     f"{fnum(wo['inductor_s'], 2)} s, {fratio(ct.get('inductor_over_gemmtune_without_startup'))}. "
                     f"gemmtune faster in both: **{'yes' if ct.get('gemmtune_faster') else 'NO'}**. (Mixed, as "
                     f"reported before: gemmtune with its engine start vs Inductor without its start-up, "
                     f"{fratio(ct.get('inductor_over_gemmtune_mixed'))}.)")
        elif ct.get("inductor_over_gemmtune_mixed"):
            L.append(f"Inductor / gemmtune (gemmtune with its engine start, Inductor without its start-up): "
                     f"{fratio(ct['inductor_over_gemmtune_mixed'])}; no like-for-like figure (a start-up time is missing).")
        for e in ct.get("errors", []):
            L.append(f"- error: {e}")
        L.append("")
    return L


def print_summary(doc):
    s = doc["summary"]
    P = print
    P("")
    P("=" * 100)
    P(f"gemmtune H200 bench {doc['date']} on {doc['device']}")
    P(f"command: {doc['command']}")
    c = doc.get("ceilings") or {}
    ce = doc.get("ceilings_end") or {}
    if c:
        P(f"ceilings: copy {fnum(c.get('copy_TBps'), 2)} TB/s, bf16 {fnum(c.get('bf16_tflops'), 0)}, fp8 "
          f"{fnum(c.get('fp8_tflops'), 0)} TFLOP/s" + (f"  (end: {fnum(ce.get('copy_TBps'), 2)}, "
                                                       f"{fnum(ce.get('bf16_tflops'), 0)}, {fnum(ce.get('fp8_tflops'), 0)})" if ce else ""))
    for e in doc.get("shards") or []:
        c, ce, ec = e.get("ceilings") or {}, e.get("ceilings_end") or {}, e["coverage"]
        P(f"shard {e['index']} of {e['count']} on {gpu_name(e.get('gpu'))}: {ec['finished']}/{ec['planned']} problems; "
          f"ceilings copy {fnum(c.get('copy_TBps'), 2)} TB/s, bf16 {fnum(c.get('bf16_tflops'), 0)}, fp8 "
          f"{fnum(c.get('fp8_tflops'), 0)} (end {fnum(ce.get('copy_TBps'), 2)}, {fnum(ce.get('bf16_tflops'), 0)}, "
          f"{fnum(ce.get('fp8_tflops'), 0)}); parts " + ", ".join(f"{k} {v:.0f}" for k, v in e.get("part_times", {}).items()))
    cov = s["coverage"]
    P(f"coverage: {cov['finished']}/{cov['planned']} suite problems; skipped for budget: suite "
      f"{len(cov['skipped_for_budget'].get('suite', []))}, stability {len(cov['skipped_for_budget'].get('stability', []))}; "
      f"errors {len(cov['errors'])}; not supported {len(cov['skipped_not_supported'])}")
    P("")
    P(f"{'group':<22}{'n':>4}{'vs default':>12}{'vs torch':>10}{'vs trit.best':>13}{'vs induct':>11}{'pick TF':>9}"
      f"{'of roof':>9}  picks")
    for name, g in list(s["geomean"].items()) + list(s["by_dtype_m"].items()):
        P(f"{name:<22}{g['n']:>4}{fratio(g.get('speedup_vs_default')):>12}{fratio(g.get('speedup_vs_torch')):>10}"
          f"{fratio(g.get('speedup_vs_triton_best')):>13}"
          f"{fratio(g.get('speedup_vs_inductor')):>11}{fnum(g.get('pick_tflops_geomean'), 1):>9}"
          f"{fpct(g.get('fraction_of_roof_geomean')):>9}  "
          + ",".join(f"{b} {n}" for b, n in (g.get("pick_backends") or {}).items()))
    pv = s.get("pick_vs_default") or {}
    if pv.get("n"):
        P(f"pick >= default within noise: {pv['at_least_as_fast_within_noise']}/{pv['n']} (faster beyond noise "
          f"{pv['faster_beyond_noise']}, same kernel {pv['same_kernel']}); noise median "
          f"{fpct((s.get('noise') or {}).get('median'))} max {fpct((s.get('noise') or {}).get('max'))}")
        for e in pv.get("slower_beyond_noise", [])[:12]:
            P(f"  slower: {e['label']}: {fratio(e['speedup_vs_default'])} (noise {fpct(e['noise'])})")
    probs = [p for p in s["problems"] if p.get("speedup_vs_default")]
    if probs:
        worst = sorted(probs, key=lambda p: p["speedup_vs_default"])[:6]
        best = sorted(probs, key=lambda p: -p["speedup_vs_default"])[:6]
        P("worst vs default: " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in worst))
        P("best vs default:  " + "; ".join(f"{p['label']} {fratio(p['speedup_vs_default'])}" for p in best))
    t = s.get("tune") or {}
    if t:
        P(f"tune: median {fnum(t['select_s_median'], 2)} s, max {fnum(t['select_s_max'], 2)} s, total "
          f"{fnum(t['select_s_total'], 0)} s; {t['candidates_median']} candidates median; wrong {t['wrong_total']}, "
          f"failed {t['failed_total']}")
    for e in s.get("inductor", []):
        P(f"inductor {e['label']}: compile {fnum(e['compile_s'], 1)} s, {fnum(e['inductor_tflops'], 1)} TF vs gemmtune "
          f"{fnum(e['pick_tflops'], 1)} TF (pick/inductor {fratio(e['speedup_vs_inductor'])}), torch {fnum(e['torch_tflops'], 1)}")
    tr = s.get("triton") or {}
    c = tr.get("candidates") or {}
    if c.get("n"):
        cs = tr.get("compile_s") or {}
        P(f"triton candidates: {c['n']} ({c.get('ok')} ok, {c.get('pruned')} pruned, {c.get('wrong')} WRONG, "
          f"{c.get('failed')} failed); compile_s median {fnum(cs.get('median_s'), 3)} max {fnum(cs.get('max_s'), 2)} "
          f"(compiled in this run: n {cs.get('n_compiled')}, median {fnum(cs.get('compiled_median_s'), 3)}, "
          f"max {fnum(cs.get('compiled_max_s'), 2)}; GPU machine, {os.cpu_count()} cores)")
        P(f"triton: picks by backend {tr.get('pick_backends')}; pick vs triton-best geomean "
          f"{fratio(tr.get('speedup_vs_triton_best_geomean'))}; triton-best vs torch {fratio(tr.get('triton_best_vs_torch_geomean'))}")
        for e in tr.get("wrong", [])[:10]:
            P(f"  WRONG triton candidate: {e['label']}: {e['candidate']} rel_err {fnum(e.get('rel_err'), 4)}")
    it = s.get("inductor_triton") or {}
    for e in it.get("problems", []):
        P(f"inductor-triton {e['label']}: triton-best {fnum(e['triton_best_tflops'], 1)} TF vs inductor-triton "
          f"{fnum(e['inductor_triton_tflops'], 1)} TF ({fratio(e['triton_best_vs_inductor_triton'])}, noise "
          f"{fpct(e.get('noise'))}); compile {fnum(e['compile_s'], 1)} s, kernels {e.get('kind')} {e.get('config') or ''}")
    for name, g in (it.get("geomean") or {}).items():
        if g.get("n"):
            P(f"inductor-triton geomean {name}: triton-best/inductor-triton {fratio(g.get('triton_best_vs_inductor_triton'))} "
              f"over {g['n']} (target {it.get('target')}: {'met' if g.get('meets_target') else 'NOT met'}); "
              f"pick/inductor-triton {fratio(g.get('pick_vs_inductor_triton'))}")
    cl = [p for p in s["problems"] if p.get("cutlass_best_vs_cublaslt_best") and p["m"] >= 2048]
    if cl:
        r = [p["cutlass_best_vs_cublaslt_best"] for p in cl]
        P(f"cutlass-best vs cublaslt-best, m >= 2048: within 5% or faster on {sum(x >= 1 / 1.05 for x in r)}/{len(r)} "
          f"(target 70%); geomean {fratio(geomean(r))}; worst "
          + "; ".join(f"{p['label']} {fratio(p['cutlass_best_vs_cublaslt_best'])}"
                      for p in sorted(cl, key=lambda p: p["cutlass_best_vs_cublaslt_best"])[:4]))
    cd = [p for p in s["problems"] if p.get("cutedsl_best_vs_cutlass_best") and p["m"] >= 2048]
    if cd:
        r = [p["cutedsl_best_vs_cutlass_best"] for p in cd]
        P(f"cutedsl-best vs cutlass-best, m >= 2048: within 5% or faster on {sum(x >= 1 / 1.05 for x in r)}/{len(r)} "
          f"(target 70%); geomean {fratio(geomean(r))}; worst "
          + "; ".join(f"{p['label']} {fratio(p['cutedsl_best_vs_cutlass_best'])}"
                      for p in sorted(cd, key=lambda p: p["cutedsl_best_vs_cutlass_best"])[:4]))
    ct = s.get("coldtune") or {}
    if ct:
        g, ind = ct.get("gemmtune") or {}, ct.get("inductor") or {}
        P(f"coldtune {ct.get('label')}: gemmtune ({','.join(ct.get('backends', []))}) {fnum(g.get('seconds'), 2)} s "
          f"(process {fnum(g.get('process_s'), 2)} s) vs inductor {fnum(ind.get('seconds'), 2)} s -> gemmtune faster: "
          f"{ct.get('gemmtune_faster')}" + (f"; errors: {'; '.join(ct.get('errors', []))[:300]}" if ct.get("errors") else ""))
    st = s.get("stability")
    if st:
        P(f"stability: {st['same_pick']}/{st['n']} same pick; {st['different_pick']} different "
          f"({st['different_within_noise']} within noise; second/first geomean {fratio(st['ratio_geomean_different'])}, "
          f"worst {fratio(st['worst_ratio'])}); errors {len(st['errors'])}")
    ch = s.get("cachehit")
    if ch:
        for where in ("cli", "in_process"):
            r = ch.get(where) or {}
            if r.get("n"):
                P(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache; select median {fnum(r.get('median_ms'), 3)} ms, "
                  f"p90 {fnum(r.get('p90_ms'), 3)}, max {fnum(r.get('max_ms'), 3)} (after first "
                  f"{fnum(r.get('max_ms_after_first'), 3)}); {r['n_under_1ms']}/{r['n']} under 1 ms"
                  + (f"; {r['warning']}" if r.get("warning") else ""))
            else:
                P(f"cachehit {where}: {(r.get('error') or 'nothing')[:400]}")
    P("part seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in s.get("part_seconds", {}).items())
      + ("" if doc.get("shards") else f"; total {time.monotonic() - T_START:.0f} s"))
    for e in s.get("part_errors", []):
        P(f"PART ERROR: {e[:300]}")
    for e in cov["errors"][:10]:
        P(f"problem error: {e[:300]}")
    if s.get("mismatches"):
        P(f"CORRECTNESS FAILURES: {len(s['mismatches'])}")
        for m in s["mismatches"][:10]:
            P(f"  {m}")
    else:
        P("correctness: every checked output within tolerance, no NaN")


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    if args.cold_tune_child:
        return cold_tune_child(args)
    command = "python3 bench/h200.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.merge:
        return merge_main(args, command)
    run = Run(args)
    run.env["command"] = command
    run.env["argv"] = sys.argv
    run.env["versions"] = run.gpu.versions()
    run.env["cublaslt"] = run.gpu.loaded_cublaslt()
    run.env["gpu_state_start"] = gpu_state() if not args.mock else None
    run.env["inductor_defaults"] = run.gpu.inductor_defaults()
    run.env["gpu"] = gpu_identity(args.mock)
    ordered = load_problems(args)
    problems = shard_problems(ordered, args) if "suite" in args.parts else []
    run.problems_total = len(ordered) if "suite" in args.parts else 0
    cold_shard = cold_tune_shard(args, ordered)
    log(f"h200.py: parts {','.join(args.parts)}; {len(problems)} suite problems"
        + (f" (shard {args.shard_index} of {args.shard_count}: index % {args.shard_count} == {args.shard_index} "
           f"of {len(ordered)}; coldtune in shard {cold_shard}; GPU {run.env['gpu']})" if args.shard else "")
        + f"; budget {'unlimited' if args.budget_s <= 0 else f'{args.budget_s:.0f} s'}; output {run.out}/{run.stem}.*")

    def part(name, fn, *a):
        t0 = time.monotonic()
        try:
            fn(*a)
        except Exception as e:
            run.errors.append(f"{name}: {type(e).__name__}: {e}")
            warn(f"part {name} failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        run.part_seconds[name] = time.monotonic() - t0
        log(f"part {name}: {run.part_seconds[name]:.1f} s")
        run.env["device_str"] = (run.env.get("engine", {}).get("device", {}) or {}).get("str") or run.env["versions"].get("device_name")
        try:
            run.write(problems)
        except Exception as e:
            warn(f"writing results failed: {e}")
            traceback.print_exc()

    try:
        if "ceilings" in args.parts:
            part("ceilings", run.part_ceilings)
        if "coldtune" in args.parts and cold_shard == args.shard_index:
            part("coldtune", run.part_coldtune)
            if getattr(run.gpu, "inductor_init_s", None) is not None:
                run.env["inductor_init_s"] = run.gpu.inductor_init_s
        if "suite" in args.parts:
            part("suite", run.part_suite, problems)
            if getattr(run.gpu, "inductor_init_s", None) is not None:
                run.env["inductor_init_s"] = run.gpu.inductor_init_s
        if "stability" in args.parts:
            part("stability", run.part_stability)
        if "cachehit" in args.parts:
            part("cachehit", run.part_cachehit)
        if "ceilings" in args.parts:
            part("ceilings_end", run.part_ceilings, True)
        run.env["gpu_state_end"] = gpu_state() if not args.mock else None
    finally:
        run.env["cublaslt"] = run.gpu.loaded_cublaslt() or run.env.get("cublaslt")
        doc = run.write(problems, final=True)
        run.finish()
        try:
            run.partial.unlink()
        except OSError:
            pass
    print_summary(doc)
    print(f"wrote {run.out / (run.stem + '.json')} and .md")
    return exit_code(doc)


if __name__ == "__main__":
    sys.exit(main())
