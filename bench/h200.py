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
  ceilings   also the stream ceiling: a streaming read of B bytes from a cold L2 (best of a few
             configs of a Triton kernel of the bench's), 4 MiB .. 1 GiB and the exact bytes of
             every memory-bound problem; memory-bound problems are reported against it
  suite      bench/suites/llm_layers.csv x m_values.csv x --dtypes: gemmtune select (tunes from an
             empty cache) vs cuBLASLt's default (the report's is_default candidate) vs Triton's
             best correct candidate vs torch.mm / torch._scaled_mm (+ TorchInductor max-autotune on
             --inductor-subset, + max-autotune restricted to Triton on --inductor-triton-subset)
  decoder    one decoder layer's GEMMs (qkv, o, gate_up, down) of --decoder-models at
             --decoder-m-values, bf16 and fp8, back to back in one CUDA graph: gemmtune's picks vs
             torch.mm / torch._scaled_mm, both graphs replayed interleaved from a cold L2
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

import sys
import time
import traceback

from gtbench import log, warn  # bench/gtbench: this script's folder is on sys.path
from gtbench.args import gemm_args
from gtbench.console import print_summary
from gtbench.merge import merge_main
from gtbench.parts.cachehit import part_cachehit
from gtbench.parts.ceilings import part_ceilings
from gtbench.parts.coldtune import cold_tune_child, part_coldtune
from gtbench.parts.decoder import part_decoder
from gtbench.parts.stability import part_stability
from gtbench.parts.suite import part_suite
from gtbench.problems import cold_tune_shard, load_decoder_chains, load_problems, shard_problems
from gtbench.run import Run
from gtbench.summary import exit_code


def main(argv=None):
    args = gemm_args(argv)
    if args.cold_tune_child:
        return cold_tune_child(args.cold_tune_child)
    command = "python3 bench/h200.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.merge:
        return merge_main(args, command)
    run = Run(args)
    gpu = run.gpu
    run.env["command"] = command
    run.env["argv"] = sys.argv
    run.env["versions"] = gpu.versions()
    run.env["cublaslt"] = gpu.loaded_cublaslt()
    run.env["gpu_state_start"] = gpu.state()
    run.env["inductor_defaults"] = run.inductor.defaults()
    run.env["gpu"] = gpu.identity()
    ordered = load_problems(args)
    problems = shard_problems(ordered, args) if "suite" in args.parts else []
    run.problems_total = len(ordered) if "suite" in args.parts else 0
    cold_shard = cold_tune_shard(args, ordered)
    chains = load_decoder_chains(args) if "decoder" in args.parts else []
    log(f"h200.py: parts {','.join(args.parts)}; {len(problems)} suite problems, {len(chains)} decoder chains"
        + (f" (shard {args.shard_index} of {args.shard_count}: index % {args.shard_count} == {args.shard_index} "
           f"of {len(ordered)}; coldtune in shard {cold_shard}; GPU {run.env['gpu']})" if args.shard else "")
        + f"; budget {'unlimited' if args.budget_s <= 0 else f'{args.budget_s:.0f} s'}; output {run.out}/{run.stem}.*")

    def part(name, fn, *a):
        """Runs one part (a crash is a part error, exit 2) and rewrites the result files after it."""
        t0 = time.monotonic()
        try:
            fn(run, *a)
        except Exception as e:
            run.errors.append(f"{name}: {type(e).__name__}: {e}")
            warn(f"part {name} failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        run.part_seconds[name] = time.monotonic() - t0
        log(f"part {name}: {run.part_seconds[name]:.1f} s")
        if name in ("coldtune", "suite") and run.inductor.init_s is not None:
            run.env["inductor_init_s"] = run.inductor.init_s
        run.env["device_str"] = (run.env.get("engine", {}).get("device", {}) or {}).get("str") or run.env["versions"].get("device_name")
        try:
            run.write(problems)
        except Exception as e:
            warn(f"writing results failed: {e}")
            traceback.print_exc()

    try:
        if "ceilings" in args.parts:
            part("ceilings", part_ceilings, False, problems + [p for ch in chains for p in ch.gemms])
        if "coldtune" in args.parts and cold_shard == args.shard_index:
            part("coldtune", part_coldtune)
        if "suite" in args.parts:
            part("suite", part_suite, problems)
        if "decoder" in args.parts:
            part("decoder", part_decoder, chains)
        if "stability" in args.parts:
            part("stability", part_stability)
        if "cachehit" in args.parts:
            part("cachehit", part_cachehit)
        if "ceilings" in args.parts:
            part("ceilings_end", part_ceilings, True)
        run.env["gpu_state_end"] = gpu.state()
    finally:
        run.env["cublaslt"] = gpu.loaded_cublaslt() or run.env.get("cublaslt")
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
