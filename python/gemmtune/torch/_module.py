"""gemmtune.torch.Linear (a drop-in nn.Linear) and optimize() (tune a model's Linear layers)."""

import time
from typing import Any, Iterable, Optional, Sequence

import torch

from . import _ops
from . import _plan as P


class Linear(torch.nn.Linear):
    """nn.Linear whose forward runs gemmtune.torch.linear: the same parameters, state_dict and
    constructor; `activation` (None, 'relu', 'gelu_tanh', 'silu') is fused into the GEMM."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 activation: Optional[str] = None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear, activation: Optional[str] = None) -> "Linear":
        """A Linear sharing lin's Parameter objects (no copy)."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.weight = lin.weight
        new.bias = lin.bias
        new.activation = activation
        new.train(lin.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops.linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        act = f", activation={self.activation!r}" if self.activation else ""
        return super().extra_repr() + act


class OptimizeReport:
    """What optimize() did: `replaced` (module names now gemmtune.torch.Linear), `problems` (one
    dict per tuned GEMM: layers, m, n, k, dtype, bias, backend, kernel, median_us, default_us
    (cuBLASLt's default pick, the kernel torch would run), speedup, torch_us (the median of
    torch's own call in the tune, where cuBLASLt reproduced it), torch_op (the layer runs torch's
    op: the pick is torch's kernel or within the defer margin of it, configure()), launch_cheaper
    (a small problem whose pick would have run torch's op runs this candidate of gemmtune's
    instead, within the margin: _ops.LAUNCH_BOUND_M), from_cache, seconds, candidates),
    `seconds` in all."""

    def __init__(self):
        self.replaced: list = []
        self.problems: list = []
        self.seconds = 0.0

    def as_dict(self) -> dict:
        return {"replaced": self.replaced, "problems": self.problems, "seconds": self.seconds}

    def __str__(self) -> str:
        lines = [f"gemmtune.torch.optimize: {len(self.replaced)} Linear layers replaced, {len(self.problems)} "
                 f"problems in {self.seconds:.1f} s",
                 f"{'m':>6} {'n':>6} {'k':>6} {'dtype':>5} {'backend':>9} {'us':>9} {'default us':>10} {'x':>6} "
                 f"{'runs':>5}  layers"]
        for p in self.problems:
            us = f"{p['median_us']:.2f}" if p.get("median_us") else "-"
            dus = f"{p['default_us']:.2f}" if p.get("default_us") else "-"
            sp = f"{p['speedup']:.3f}" if p.get("speedup") else "-"
            runs = "torch" if p.get("torch_op") else "gt"
            lines.append(f"{p['m']:>6} {p['n']:>6} {p['k']:>6} {p['dtype']:>5} {p['backend']:>9} {us:>9} {dus:>10} "
                         f"{sp:>6} {runs:>5}  {', '.join(p['layers'][:3])}{' ...' if len(p['layers']) > 3 else ''}")
        return "\n".join(lines)

    __repr__ = __str__


def _progress(items: list, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=len(items), desc="gemmtune", unit="problem")


def _summary(report: dict) -> dict:
    results = report.get("results") or []
    win = next((r for r in results if r.get("winner")), None)
    default = next((r for r in results if r.get("is_default")), None)
    out = {"backend": win["backend"] if win else "", "id": win["id"] if win else "",
           "kernel": win["name"] if win else "", "median_us": win.get("median_us") if win else None,
           "default_us": default.get("median_us") if default else None,
           "from_cache": bool(report.get("from_cache")), "seconds": report.get("seconds"),
           "candidates": len(results)}
    if out["median_us"] and out["default_us"]:
        out["speedup"] = out["default_us"] / out["median_us"]
    return out


def optimize(model: torch.nn.Module, example_inputs: Any, m_buckets: Optional[Iterable[int]] = None, *,
             example_kwargs: Optional[dict] = None, engine=None, progress: bool = True,
             force: bool = False) -> OptimizeReport:
    """Tunes every nn.Linear that `model(*example_inputs, **example_kwargs)` runs and replaces
    it (in place) by gemmtune.torch.Linear with the same parameters.

    m_buckets: the numbers of rows (tokens) to tune each layer for besides the ones the example
    run saw, e.g. [1, 2, 4, ..., 8192] for serving with a varying batch. At run time an m that
    was tuned runs its own kernel; any other m runs the winner of the nearest bucket valid for
    it (the smallest tuned m above it first), loaded for its m and never tuned on the hot path.
    engine: a gemmtune.Engine (default: gemmtune.torch.engine(), see configure()); force: tune
    even what the tuning cache already holds. Returns an OptimizeReport."""
    t0 = time.perf_counter()
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    linears = [(name, mod) for name, mod in model.named_modules() if type(mod) is torch.nn.Linear]
    seen: dict = {}  # module name -> [2-D views of the inputs it got]

    def recorder(name):
        def hook(mod, args):
            x = args[0]
            seen.setdefault(name, []).append(P.flatten_rows("linear", x, mod.in_features))
        return hook

    hooks = [mod.register_forward_pre_hook(recorder(name)) for name, mod in linears]
    try:
        with torch.no_grad():
            model(*example_inputs, **(example_kwargs or {}))
    finally:
        for h in hooks:
            h.remove()

    # One entry per problem: (family, m) -> problem dict and the layers that share it.
    problems: dict = {}
    buckets = sorted({int(m) for m in (m_buckets or [])})
    if any(m < 1 for m in buckets):
        raise P.invalid("optimize", f"m_buckets: every m must be >= 1, got {buckets}")
    mods = dict(linears)
    for name, xs in seen.items():
        mod = mods[name]
        for x2 in xs:
            plan = P.plan_linear(x2, mod.weight, mod.bias, None)
            fam = _ops._family(plan.key)
            ms = {plan.problem["m"]}
            if plan.problem["layout"][0] == "r":  # lda = k whatever m: the buckets share the layout
                ms |= set(buckets)
            for m in ms:
                entry = problems.setdefault((fam, m), {"problem": dict(plan.problem, m=m), "layers": [],
                                                       "device": x2.device})
                if name not in entry["layers"]:
                    entry["layers"].append(name)

    report = OptimizeReport()
    items = sorted(problems.items(), key=lambda kv: (kv[1]["problem"]["n"], kv[1]["problem"]["k"], kv[0][1]))
    bar = _progress(items, progress)
    tuned: dict = {}  # family -> [(m, backend, id)]
    try:
        for (fam, m), entry in items:
            p = entry["problem"]
            dev = entry["device"].index if entry["device"].index is not None else 0
            eng = engine if engine is not None else _ops.engine(dev)
            if bar is not None:
                bar.set_postfix_str(f"{p['m']}x{p['n']}x{p['k']} {p['dtype']}")
            kernel, rep = eng.select(p, force=force)
            s = _summary(rep)
            # The selected kernel says what won even when the report has no results (a choice
            # this engine made before).
            info = kernel.describe() if kernel is not None else {}
            if info:
                s.update(backend=info["backend"], id=info["id"], kernel=info["name"],
                         torch_us=info.get("torch_baseline_us"),
                         torch_op=_ops._defers("linear", "none", info, _ops._State.defer_margin))
            # A small problem whose pick would run torch's op: one of ours within the margin instead.
            alt = _ops._cheaper_launch(p["m"], rep.get("results") or [], _ops._State.defer_margin)
            if alt is not None:
                s.update(backend=alt["backend"], id=alt["id"], kernel=alt.get("name", ""), median_us=alt["median_us"],
                         torch_op=False, launch_cheaper=True)
                if s.get("default_us"):
                    s["speedup"] = s["default_us"] / alt["median_us"]
            report.problems.append({"layers": entry["layers"], "m": p["m"], "n": p["n"], "k": p["k"],
                                    "dtype": p["dtype"], "bias": p.get("bias", False), **s})
            if s["backend"]:
                tuned.setdefault(fam, []).append((m, s["backend"], s["id"]))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    with _ops._State.lock:
        for fam, lst in tuned.items():
            _ops._State.buckets[fam] = sorted(lst)

    # Swap the modules: every occurrence under its parent (a module shared by two parents is
    # replaced once and set under both).
    swapped: dict = {}
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and any(child is mods.get(n) for n in seen):
                new = swapped.setdefault(id(child), Linear.from_linear(child))
                setattr(parent, child_name, new)
                report.replaced.append(f"{parent_name}.{child_name}" if parent_name else child_name)
    report.seconds = time.perf_counter() - t0
    return report
