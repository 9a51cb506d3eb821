#!/usr/bin/env python3
"""Times two gemmtune kernels of one problem side by side under several timing methods, changing
one variable at a time from bench/h200.py's method towards the engine's race (src/tune/gpu_bench.cpp),
to find why the two rank a pair differently (issue 2, docs/status.md: llama3-70b/qkv m=512 fp8,
cuBLASLt 112x128x128 vs 320x64x128: the race measures them within ~1%, the bench 4-6% apart).

  python3 bench/pair-method.py --problem 512x10240x8192 --dtype e4m3 --ids ID1,ID2 [--rounds 40]

ids: cuBLASLt candidate ids (a tune's JSON, or the bench JSON's candidate_id). Methods (each one
interleaved run of both kernels, the order rotating every round; a sample = events around one
launch unless said otherwise):
  bench     as bench/h200.py: flush = fill_ of 256 MB, 50 us GPU spin, one input set, torch's
            current (legacy default) stream
  memset    flush = zero_() (cudaMemsetAsync) of 2x L2, as the race
  sets3     three input copies, rotated per launch, as the race
  stream    a new stream for everything
  reps8     sample = median of 8 x (flush, spin, launch), as a race sample
  race      memset + sets3 + stream + reps8 together
  h200-2    as bench, but a round's samples enqueued before one synchronize (bench/benchlib.py, h200.py's loop)
  h200-3    as h200-2 with torch's own call (torch._scaled_mm / torch.mm) as a third contender in
            the rotation, exactly bench/h200.py's side-by-side timing
Prints per method each kernel's median (p20-p80) and the median of the per-round paired ratios
(second / first id). Random inputs: torch.randn cast to e4m3 (as the bench), scales in [0.5, 1.5).
"""
import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))
import benchlib  # noqa: E402


def quantile(v, q):
    return benchlib.quantile(sorted(v), q)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True, help="MxNxK")
    ap.add_argument("--dtype", default="e4m3", choices=["e4m3", "bf16"])
    ap.add_argument("--ids", required=True, help="two cuBLASLt candidate ids, comma-separated")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--methods", default="bench,memset,sets3,stream,reps8,race,h200-2,h200-3")
    a = ap.parse_args()
    import torch as t
    import gemmtune

    m, n, k = (int(x) for x in a.problem.split("x"))
    ids = a.ids.split(",")
    if len(ids) != 2:
        sys.exit("pair-method: --ids needs exactly two ids")
    dev = t.device("cuda")
    problem = {"m": m, "n": n, "k": k, "dtype": a.dtype, "layout": "rc", "d_layout": "r"}
    if a.dtype == "e4m3":
        problem.update(scale="tensorwise", out_dtype="bf16")
    tmp = Path(tempfile.mkdtemp(prefix="pair-method-"))
    eng = gemmtune.Engine(cache_path=str(tmp / "cache.sqlite"), backends=["cublaslt"])
    kernels = [eng.load(problem, "cublaslt", i) for i in ids]
    g = t.Generator(device=dev)
    g.manual_seed(1234)

    def inputs():
        x = {"a": t.randn(m, k, device=dev, dtype=t.bfloat16, generator=g),
             "w": t.randn(n, k, device=dev, dtype=t.bfloat16, generator=g)}
        if a.dtype == "e4m3":
            x = {key: v.to(t.float8_e4m3fn) for key, v in x.items()}
            x["sa"] = (t.rand((), device=dev, generator=g) + 0.5).float()
            x["sb"] = (t.rand((), device=dev, generator=g) + 0.5).float()
        else:
            x["sa"] = x["sb"] = None
        x["d"] = t.empty(m, n, device=dev, dtype=t.bfloat16)
        return x

    sets = [inputs() for _ in range(3)]
    l2 = t.cuda.get_device_properties(dev).L2_cache_size
    big = t.empty(256 << 20, dtype=t.int8, device=dev)
    small = t.empty(2 * l2, dtype=t.int8, device=dev)
    spin_cycles = 100_000  # 50 us at 2 GHz, as the bench

    def launcher(kern, x, stream_ptr):
        ptrs = (x["a"].data_ptr(), x["w"].data_ptr(), 0, x["d"].data_ptr(), 0,
                x["sa"].data_ptr() if x["sa"] is not None else 0, x["sb"].data_ptr() if x["sb"] is not None else 0)
        return lambda: kern.run(*ptrs, stream_ptr)

    def run_h200(with_torch):
        """bench/h200.py's side-by-side timing itself (bench/benchlib.py): one input set, the
        bench's fill_ flush and spin before each sample, one sync a round; with_torch: torch's own
        call (torch._scaled_mm / torch.mm) as a third contender, as in the bench."""
        sp = t.cuda.current_stream().cuda_stream
        x = sets[0]
        fns = {i: launcher(kern, x, sp) for i, kern in enumerate(kernels)}
        if with_torch:
            wt = x["w"].t()
            if a.dtype == "e4m3":
                fns[2] = lambda: t._scaled_mm(x["a"], wt, scale_a=x["sa"], scale_b=x["sb"], out_dtype=t.bfloat16)
            else:
                fns[2] = lambda: t.mm(x["a"], wt)
        count = [0]

        def flush():
            count[0] += 1
            big.fill_(count[0] & 0x7F)
            t.cuda._sleep(spin_cycles)

        out, _ = benchlib.time_interleaved(t, fns, a.rounds, 30.0, flush)
        return [out[0], out[1]]

    def run_method(name):
        if name.startswith("h200-"):
            return run_h200(name == "h200-3")
        memset = name in ("memset", "race")
        nsets = 3 if name in ("sets3", "race") else 1
        reps = 8 if name in ("reps8", "race") else 1
        stream = t.cuda.Stream() if name in ("stream", "race") else t.cuda.current_stream()
        sp = stream.cuda_stream
        fns = [[launcher(kern, sets[s], sp) for s in range(nsets)] for kern in kernels]
        count = [0]

        def flush():
            count[0] += 1
            if memset:
                small.zero_()
            else:
                big.fill_(count[0] & 0x7F)
            t.cuda._sleep(spin_cycles)

        out = [[], []]
        with t.cuda.stream(stream):
            for _ in range(3):  # warm-up
                for j in range(2):
                    for f in fns[j]:
                        f()
            t.cuda.synchronize()
            launches = 0
            for r in range(a.rounds):
                order = [0, 1] if r % 2 == 0 else [1, 0]
                for j in order:
                    us = []
                    for _ in range(reps):
                        flush()
                        e0, e1 = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                        e0.record()
                        fns[j][launches % nsets]()
                        e1.record()
                        launches += 1
                        e1.synchronize()
                        us.append(e0.elapsed_time(e1) * 1e3)
                    out[j].append(statistics.median(us))
        return out

    print(f"pair-method: {a.problem} {a.dtype}; first = {ids[0][:24]}..., second = {ids[1][:24]}...; "
          f"{a.rounds} rounds; L2 {l2 >> 20} MiB")
    for name in a.methods.split(","):
        s = run_method(name)
        ratios = [y / x for x, y in zip(s[0], s[1])]
        print(f"{name:7s}: first {statistics.median(s[0]):8.2f} us ({quantile(s[0], .2):.2f}-{quantile(s[0], .8):.2f}) | "
              f"second {statistics.median(s[1]):8.2f} us ({quantile(s[1], .2):.2f}-{quantile(s[1], .8):.2f}) | "
              f"second/first: medians {statistics.median(s[1]) / statistics.median(s[0]):.4f}, "
              f"paired {statistics.median(ratios):.4f} ({quantile(ratios, .2):.4f}-{quantile(ratios, .8):.4f})")
        sys.stdout.flush()
    for kern in kernels:
        kern.close()
    eng.close()


if __name__ == "__main__":
    main()
