"""The benches' problems: GEMM (bench/h200.py: LLM layers x m values x dtypes, ordered, limited and
sharded), decoder-step chains (bench/h200.py --part decoder) and softmax (bench/softmax.py: rows x
cols x dtypes)."""

from __future__ import annotations

import csv
import itertools
import random

from . import REPO

DTYPES = {
    # --dtypes name -> (gemmtune dtype, scale mode, baseline name)
    "bf16": ("bf16", "none", "torch.mm"),
    "fp8": ("e4m3", "tensorwise", "torch._scaled_mm"),
    "fp8-rowwise": ("e4m3", "rowwise", "torch._scaled_mm"),
    # block: DeepSeek-V3's 1x128 / 128x128 scales; the baseline is torch._scaled_mm where it takes
    # them, else the bench's own Triton kernel (gpu.TorchGpu.block_baseline names the one used).
    "fp8-block": ("e4m3", "block", "torch._scaled_mm"),
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
# The decoder part: one decoder layer's GEMMs, in the order a layer runs them, from this CSV; the
# --dtypes it takes (fp8: tensorwise scales, as the suite).
DECODER_LAYERS = ("qkv", "o", "gate_up", "down")
DECODER_LAYERS_CSV = REPO / "bench/suites/llm_layers.csv"
DECODER_DTYPES = ("bf16", "fp8")
SOFTMAX_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# The softmax bench's contenders: gemmtune's pick, torch.softmax, the plain Triton kernel.
SOFTMAX_CONTENDERS = ("pick", "torch", "triton_plain")


class Problem:
    """One GEMM of the suite: D[m,n] = A[m,k] @ W[n,k]^T (nn.Linear), bf16 out."""

    def __init__(self, model, layer, phase, m, n, k, dname):
        self.model, self.layer, self.phase = model, layer, phase
        self.m, self.n, self.k = m, n, k
        self.dname = dname
        self.dtype, self.scale, self.baseline = DTYPES[dname]
        self.inductor = False          # also torch.compile max-autotune (default gemm backends)
        self.inductor_triton = False   # also torch.compile max-autotune restricted to Triton
        self.index = 0                 # in the ordering of the whole run (its inputs' seed)

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
        """The problem's fields of a result row."""
        return {"op": "gemm", "model": self.model, "layer": self.layer, "phase": self.phase, "m": self.m,
                "n": self.n, "k": self.k, "dtype": self.dtype, "dtype_name": self.dname, "scale": self.scale,
                "out_dtype": "bf16", "layout": "rc", "epilogue": "none"}

    def throughput(self, median_us):
        """A row's throughput field: {"tflops": 2mnk / median}."""
        return {"tflops": self.flops / median_us * 1e-6 if median_us else None}


class DecoderChain:
    """One decoder layer's GEMMs (DECODER_LAYERS of one model, at one m, in one dtype), run back to
    back on one stream; each reads its own input buffers (no GEMM feeds the next)."""

    def __init__(self, model, m, dname, gemms):
        self.model, self.m, self.dname, self.gemms = model, m, dname, gemms
        self.dtype, self.scale, self.baseline = DTYPES[dname]
        self.index = 0  # in the ordering of the whole run's chains (its inputs' seed, its shard)

    @property
    def label(self):
        return f"{self.model} decoder m={self.m} {self.dname}"

    @property
    def flops(self):
        return sum(p.flops for p in self.gemms)

    @property
    def min_bytes(self):
        return sum(p.min_bytes for p in self.gemms)

    def fields(self):
        """The chain's fields of a result row: a GEMM problem's, with layer the GEMMs joined by '+',
        n and k null and gemms [[layer, n, k], ...]."""
        return {"op": "decoder", "model": self.model, "layer": "+".join(p.layer for p in self.gemms),
                "phase": "decode", "m": self.m, "n": None, "k": None, "dtype": self.dtype, "dtype_name": self.dname,
                "scale": self.scale, "out_dtype": "bf16", "layout": "rc", "epilogue": "none",
                "gemms": [[p.layer, p.n, p.k] for p in self.gemms]}

    def throughput(self, median_us):
        """{"tflops": the chain's flops / median}."""
        return {"tflops": self.flops / median_us * 1e-6 if median_us else None}


def load_decoder_chains(args):
    """The decoder part's chains in the run's order (m, then dtype, then model: a budget-limited run
    covers every m first), each with its index; --shard I/N keeps those whose index % N == I. Each
    GEMM's index (its inputs' seed) is 100000 + 4 * chain index + its place in the chain."""
    layers = {(r["model"], r["layer"]): r for r in read_csv(DECODER_LAYERS_CSV)}
    out = []
    dtypes = [d for d in args.dtype_list if d in DECODER_DTYPES]
    for i, (m, dname, model) in enumerate(itertools.product(args.decoder_m_list, dtypes, args.decoder_model_list)):
        missing = [lay for lay in DECODER_LAYERS if (model, lay) not in layers]
        if missing:
            raise SystemExit(f"--decoder-models: {model} has no {', '.join(missing)} in {DECODER_LAYERS_CSV}")
        gemms = [Problem(model, lay, "decode", m, int(layers[(model, lay)]["n"]), int(layers[(model, lay)]["k"]), dname)
                 for lay in DECODER_LAYERS]
        for j, p in enumerate(gemms):
            p.index = 100000 + 4 * i + j
        ch = DecoderChain(model, m, dname, gemms)
        ch.index = i
        out.append(ch)
    return [c for c in out if c.index % args.shard_count == args.shard_index]


class SoftmaxProblem:
    """y[rows, cols] = softmax(scale * x) over the last dimension; x and y of one dtype."""

    def __init__(self, rows, cols, dtype, scale):
        self.rows, self.cols, self.dtype, self.scale = rows, cols, dtype, scale

    @property
    def label(self):
        return f"{self.rows}x{self.cols} {self.dtype}"

    @property
    def bytes(self):
        """x read + y written."""
        return float(self.rows) * self.cols * 2 * SOFTMAX_DTYPE_BYTES[self.dtype]

    def gt(self):
        """The C API's softmax problem JSON."""
        return {"rows": self.rows, "cols": self.cols, "dtype": self.dtype, "scale": self.scale}

    def fields(self):
        return {"op": "softmax", "rows": self.rows, "cols": self.cols, "dtype": self.dtype, "scale": self.scale,
                "bytes": self.bytes}

    def throughput(self, median_us):
        """A row's throughput field: {"tbps": bytes / median, TB/s}."""
        return {"tbps": self.bytes / median_us * 1e-6 if median_us else None}


def parse_problem_ref(item, flag, error):
    """'m:model:layer[:dtype]' -> (m, model, layer, dtype name); dtype bf16 unless given. error(msg)
    does not return (argparse's ap.error)."""
    parts = item.strip().split(":")
    if len(parts) not in (3, 4) or not parts[0].isdigit():
        error(f"{flag}: '{item}' is not m:model:layer[:dtype]")
    dname = parts[3] if len(parts) == 4 else "bf16"
    if dname not in DTYPES:
        error(f"{flag}: '{item}': unknown dtype '{dname}' (known: {', '.join(DTYPES)})")
    return (int(parts[0]), parts[1], parts[2], dname)


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
    """The suite's problems in the run's order, each with its index; args.subset_unmatched gets the
    Inductor subset entries that name no planned problem (a dtype not in --dtypes, a typo, --models ...)."""
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


def read_softmax_suite(path):
    """[(rows, cols)] of a CSV whose header names rows,cols (bench/suites/softmax.csv)."""
    rows = []
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    head = [h.strip().lower() for h in lines[0].split(",")]
    if "rows" not in head or "cols" not in head:
        raise SystemExit(f"{path}: header must name rows,cols")
    ri, ci = head.index("rows"), head.index("cols")
    for ln in lines[1:]:
        f = ln.split(",")
        rows.append((int(f[ri]), int(f[ci])))
    return rows
