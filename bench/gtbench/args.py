"""The command lines of bench/h200.py (gemm_args) and bench/softmax.py (softmax_args)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from . import REPO
from .parts import PARTS
from .problems import (DEFAULT_COLD_TUNE_PROBLEM, DEFAULT_INDUCTOR_SUBSET, DEFAULT_INDUCTOR_TRITON_SUBSET, DTYPES,
                       SOFTMAX_DTYPE_BYTES, parse_problem_ref)


def gemm_args(argv=None):
    """bench/h200.py's command line (its --help), checked and parsed into the fields the parts read."""
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
                    "fp8-rowwise (rowwise scales; kept only where gemmtune has a correct candidate), fp8-block (1x128 / "
                    "128x128 block scales; the tensorwise pick of each shape and a block-scaled baseline timed "
                    "alongside). Default bf16,fp8")
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
    ap.add_argument("--decoder-models", default="llama3-8b,llama3-70b-tp8",
                    help="decoder part: models of bench/suites/llm_layers.csv whose qkv, o, gate_up, down GEMMs make "
                         "one chain (default %(default)s)")
    ap.add_argument("--decoder-m-values", default="1,8,16,64", help="decoder part: m values (default %(default)s)")
    ap.add_argument("--decoder-s", type=float, default=90.0,
                    help="seconds of the budget the suite leaves for the decoder part when both run (default "
                         "%(default)s; the decoder's tunes of problems the suite tuned are cache hits)")
    ap.add_argument("--cold-tune-problem", default=DEFAULT_COLD_TUNE_PROBLEM,
                    help="coldtune part: m:model:layer[:dtype] from --layers (default: %(default)s, bf16)")
    ap.add_argument("--cold-tune-backends", default="cublaslt,triton",
                    help="coldtune part: gemmtune backends of the cold tune (default %(default)s)")
    ap.add_argument("--cold-tune-pack", default="",
                    help="coldtune part: the child's artifact store starts as a copy of this kernel pack (e.g. the "
                         "CUTLASS instances of scripts/precompile-cutlass.sh: loaded, not compiled) instead of empty")
    ap.add_argument("--cold-tune-timeout-s", type=float, default=300.0,
                    help="coldtune part: kill the cold gemmtune tune after this (default %(default)s)")
    ap.add_argument("--artifacts", default="", help="the artifact store of the bench's engines (their compile.artifacts "
                    "option; default: a fresh temporary folder, so the suite's Triton compiles are cold)")
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
    args.decoder_model_list = [x.strip() for x in args.decoder_models.split(",") if x.strip()]
    try:
        args.decoder_m_list = [int(x) for x in args.decoder_m_values.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--decoder-m-values: '{args.decoder_m_values}' is not a comma-separated list of integers")

    def subset(text, flag):
        out = set()
        if text.strip().lower() in ("", "none"):
            return out
        for item in text.split(","):
            if item.strip():
                out.add(parse_problem_ref(item, flag, ap.error))
        return out
    args.subset = subset(args.inductor_subset, "--inductor-subset")
    args.triton_subset = subset(args.inductor_triton_subset, "--inductor-triton-subset")
    args.cold_problem = parse_problem_ref(args.cold_tune_problem, "--cold-tune-problem", ap.error)
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


def softmax_args(argv=None, description=""):
    """bench/softmax.py's command line (description: its --help's first line)."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=str(REPO / "bench/suites/softmax.csv"), help="CSV rows,cols (default %(default)s)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32", help="comma-separated: bf16, fp16, fp32 (x and y)")
    ap.add_argument("--scale", type=float, default=1.0, help="softmax(scale * x); torch gets x * scale first when != 1")
    ap.add_argument("--limit", type=int, default=0, help="at most N suite rows (0 = all)")
    ap.add_argument("--rounds", type=int, default=20, help="timed rounds per problem (default %(default)s)")
    ap.add_argument("--warmup-ms", type=float, default=200.0, help="warm-up per problem (default %(default)s)")
    ap.add_argument("--flush-mb", type=int, default=256, help="L2 flush buffer, MiB (default %(default)s)")
    ap.add_argument("--backends", default="", help="gemmtune softmax backends (default: all: native,triton,cutedsl)")
    ap.add_argument("--cache", default="", help="gemmtune tuning cache (default: a fresh $OUT/softmax-cache.sqlite)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting problems after this many seconds (0 = none)")
    ap.add_argument("--tag", default="", help="suffix of the output files' names")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="output folder (default $OUT, else ./bench-out)")
    ap.add_argument("--mock", action="store_true", help="CPU self-test: fake GPU, fake engine, fake timings")
    args = ap.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in args.dtypes:
        if d not in SOFTMAX_DTYPE_BYTES:
            ap.error(f"--dtypes: unknown dtype {d!r} (bf16, fp16, fp32)")
    if not args.out:
        args.out = str(Path.cwd() / "bench-out")
    return args
