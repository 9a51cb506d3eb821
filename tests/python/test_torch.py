"""gemmtune.torch without a GPU: problem mapping, argument checks, fake implementations,
torch.compile tracing (meta tensors) and optimize()'s recording and module swap (a fake engine).
Skipped where torch is not installed (python/requirements-torch.txt)."""

import os

import pytest

torch = pytest.importorskip("torch")

import gemmtune  # noqa: E402
import gemmtune.torch as gt  # noqa: E402
from gemmtune.torch import _ops, _plan as P  # noqa: E402

META = "meta"
bf16 = torch.bfloat16


def t(*shape, dtype=bf16, device=META):
    return torch.empty(shape, dtype=dtype, device=device)


def raises(fn, *needles):
    with pytest.raises(gemmtune.GemmtuneError) as e:
        fn()
    for n in needles:
        assert n in str(e.value), str(e.value)
    assert e.value.status == gemmtune.GT_ERR_INVALID
    return str(e.value)


# ---- mapping ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("a_rows,b_rows,la,lb", [(True, True, "r", "r"), (False, True, "c", "r"),
                                                  (True, False, "r", "c"), (False, False, "c", "c")])
def test_mm_layouts(a_rows, b_rows, la, lb):
    a = t(64, 32) if a_rows else t(32, 64).t()
    b = t(32, 16) if b_rows else t(16, 32).t()
    p = P.plan_mm(a, b)
    assert p.problem["layout"] == la + lb
    assert p.problem["lda"] == (32 if a_rows else 64)
    assert p.problem["ldb"] == (16 if b_rows else 32)
    assert (p.problem["m"], p.problem["n"], p.problem["k"]) == (64, 16, 32)
    assert p.out_shape == (64, 16) and p.out_stride == (16, 1) and p.out_dtype == bf16


def test_leading_dimension_of_a_slice():
    a = t(64, 40)[:, :32]   # row-major, ld 40
    p = P.plan_mm(a, t(32, 16))
    assert p.problem["lda"] == 40 and p.problem["layout"] == "rr"
    at = t(48, 64)[:32].t()  # [64, 32] column-major, ld 64
    assert P.plan_mm(at, t(32, 16)).problem["lda"] == 64


def test_size_one_dimensions_take_packed_strides():
    # A [1, k] row from a column-major matrix and a [m, 1] column are valid whatever their strides.
    assert P.matrix_layout("mm", "a", t(32, 64).t()[:1]) == ("c", 64)
    assert P.matrix_layout("mm", "a", t(1, 32)) == ("r", 32)
    assert P.matrix_layout("mm", "a", t(8, 3)[:, :1]) == ("r", 3)


def test_linear_maps_weight_to_column_major_b_and_flattens():
    x, w, b = t(2, 3, 64), t(128, 64), t(128)
    x2 = P.flatten_rows("linear", x, 64)
    p = P.plan_linear(x2, w, b, "silu")
    assert p.problem == {"m": 6, "n": 128, "k": 64, "dtype": "bf16", "out_dtype": "bf16", "layout": "rc",
                         "lda": 64, "ldb": 64, "bias": True, "act": "silu"}
    assert P.plan_linear(x2, w, None, "gelu_tanh").problem["act"] == "gelu"
    # A weight stored transposed (w = W^T.t()) is B row-major.
    assert P.plan_linear(x2, t(64, 128).t(), None, None).problem["layout"] == "rr"


def test_scaled_mm_modes():
    a = t(32, 64, dtype=torch.float8_e4m3fn)
    b = t(16, 64, dtype=torch.float8_e4m3fn).t()
    f32 = torch.float32
    p = P.plan_scaled_mm(a, b, t(dtype=f32), t(1, dtype=f32), torch.bfloat16, None)
    assert p.problem["scale"] == "tensorwise" and p.problem["layout"] == "rc" and p.problem["out_dtype"] == "bf16"
    p = P.plan_scaled_mm(a, b, t(32, 1, dtype=f32), t(1, 16, dtype=f32), torch.float32, t(16, dtype=f32))
    assert p.problem["scale"] == "rowwise" and p.problem["bias"] and p.out_dtype == torch.float32
    raises(lambda: P.plan_scaled_mm(a, b, t(32, 3, dtype=f32), t(3, 16, dtype=f32), None, None), "scale_a, scale_b")
    raises(lambda: P.plan_scaled_mm(a, b, t(1, dtype=bf16), t(1, dtype=f32), None, None), "scale_a: dtype")
    raises(lambda: P.plan_scaled_mm(a, b, t(1, dtype=f32), t(1, dtype=f32), torch.int8, None), "out_dtype")
    raises(lambda: P.plan_scaled_mm(t(32, 64), b, t(1, dtype=f32), t(1, dtype=f32), None, None), "a: dtype")


def test_softmax_plan():
    p = P.plan_softmax(t(4, 8, 100), -1, 0.5)
    assert p.problem == {"rows": 32, "cols": 100, "ld": 100, "dtype": "bf16", "out_dtype": "bf16", "scale": 0.5}
    assert p.out_stride == (800, 100, 1)
    p = P.plan_softmax(t(10, 128)[:, :100], 1, 1.0)
    assert p.problem["ld"] == 128 and p.out_stride == (128, 1)


# ---- refusals name the argument ---------------------------------------------------------------------

def test_refusals_name_the_argument():
    w = t(128, 64)
    raises(lambda: P.plan_linear(t(8, 64, device="cpu"), w, None, None), "linear: x: is on cpu")
    raises(lambda: P.plan_linear(t(8, 64), t(128, 64, device="cpu"), None, None), "weight: is on cpu")
    raises(lambda: P.plan_linear(t(8, 64), t(128, 64, dtype=torch.float16), None, None), "weight: dtype")
    raises(lambda: P.plan_linear(t(8, 64), t(128, 32), None, None), "weight: shape")
    raises(lambda: P.plan_linear(t(8, 64), w, t(127), None), "bias: shape")
    raises(lambda: P.plan_linear(t(8, 64), w, t(128, dtype=torch.float16), None), "bias: dtype")
    raises(lambda: P.plan_linear(t(8, 64), w, None, "tanh"), "activation: 'tanh'")
    raises(lambda: P.plan_linear(t(8, 64, dtype=torch.int8), t(128, 64, dtype=torch.int8), None, None), "x: dtype")
    raises(lambda: P.plan_mm(t(8, 128)[:, ::2], t(64, 16)), "a: strides")
    raises(lambda: P.plan_mm(t(8, 1).expand(8, 64), t(64, 16)), "a: strides")
    raises(lambda: P.plan_mm(t(8, 64), t(32, 16)), "b: shape")
    raises(lambda: P.plan_mm(t(8, 64), t(64, 16, dtype=torch.float16)), "b: dtype")
    raises(lambda: P.plan_mm(t(0, 64), t(64, 16)), "m: empty")
    raises(lambda: P.plan_softmax(t(8, 64), 0, 1.0), "dim: 0")
    raises(lambda: P.plan_softmax(t(8, 64), -1, float("nan")), "scale")
    raises(lambda: P.plan_softmax(t(8, 4, 64).transpose(0, 1), -1, 1.0), "x: strides")
    raises(lambda: P.plan_softmax(t(8, 128)[:, ::2], -1, 1.0), "x: inner stride")


def test_cpu_tensors_refused_through_the_op():
    # No GPU needed: the op's implementation plans (and refuses) before touching the library.
    raises(lambda: gt.mm(t(8, 64, device="cpu"), t(64, 16, device="cpu")), "gemmtune.torch.mm: a: is on cpu")
    raises(lambda: gt.softmax(t(8, 64, device="cpu")), "softmax: x: is on cpu")


# ---- fake implementations and torch.compile ------------------------------------------------------------

def test_fake_impls_on_meta():
    assert gt.mm(t(64, 32), t(32, 16)).shape == (64, 16)
    y = gt.linear(t(2, 5, 64), t(96, 64), t(96), "relu")
    assert y.shape == (2, 5, 96) and y.dtype == bf16
    f8 = torch.float8_e4m3fn
    z = gt.scaled_mm(t(32, 64, dtype=f8), t(16, 64, dtype=f8).t(), t(32, 1, dtype=torch.float32),
                     t(1, 16, dtype=torch.float32), out_dtype=torch.float16)
    assert z.shape == (32, 16) and z.dtype == torch.float16
    s = gt.softmax(t(10, 128)[:, :100], scale=0.5)
    assert s.shape == (10, 100) and s.stride() == (128, 1)
    # The registered ops are what torch.compile sees.
    assert torch.ops.gemmtune.linear.default is not None
    torch.library.opcheck(torch.ops.gemmtune.mm.default, (t(64, 32), t(32, 16)),
                          test_utils=("test_schema", "test_faketensor"))


SCHEMAS = {
    "mm": "gemmtune::mm(Tensor a, Tensor b) -> Tensor",
    "linear": "gemmtune::linear(Tensor x, Tensor weight, Tensor? bias, str? activation) -> Tensor",
    "scaled_mm": "gemmtune::scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, ScalarType? out_dtype, "
                 "Tensor? bias) -> Tensor",
    "softmax": "gemmtune::softmax(Tensor x, int dim, float scale) -> Tensor",
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_ops_are_library_kernels_without_python_autograd(name):
    """Each op is a torch.library.Library definition: a CUDA (and CPU) kernel and a fake one, no
    Python autograd kernel (autograd lives in the public functions) and not a custom_op, whose
    Python layers ran on every call (3.1x the implementation's own time in bench/torch_host.py)."""
    op = getattr(torch.ops.gemmtune, name).default
    assert str(op._schema) == SCHEMAS[name]
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    qual = f"gemmtune::{name}"
    assert has(qual, "CUDA") and has(qual, "CPU") and has(qual, "Meta")
    assert not has(qual, "AutogradCUDA") and not has(qual, "Autograd")
    assert qual not in torch._library.custom_ops.OPDEFS


def test_ops_fake_shapes_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x, w, b = t(3, 7, 64), t(96, 64), t(96)
        y = torch.ops.gemmtune.linear.default(x, w, b, "silu")
        assert y.shape == (3, 7, 96) and y.dtype == bf16 and y.is_contiguous()
        z = torch.ops.gemmtune.mm.default(t(40, 64).t().t(), t(96, 64).t())
        assert z.shape == (40, 96) and z.stride() == (96, 1)
        s = torch.ops.gemmtune.softmax.default(t(10, 128)[:, :100], -1, 0.5)
        assert s.shape == (10, 100) and s.stride() == (128, 1)
        f8 = torch.float8_e4m3fn
        q = torch.ops.gemmtune.scaled_mm.default(t(32, 64, dtype=f8), t(16, 64, dtype=f8).t(), t(dtype=torch.float32),
                                                 t(dtype=torch.float32), torch.float32, None)
        assert q.shape == (32, 16) and q.dtype == torch.float32


def test_ops_refuse_bad_input_naming_the_field():
    # Through the dispatcher (what torch.compile's code calls): the fake kernel on meta, the real
    # one on CPU; both plan, so the error names the argument.
    raises(lambda: torch.ops.gemmtune.linear.default(t(8, 64), t(128, 32), None, None), "linear: weight: shape")
    raises(lambda: torch.ops.gemmtune.mm.default(t(8, 64), t(64, 16, dtype=torch.float16)), "mm: b: dtype")
    raises(lambda: torch.ops.gemmtune.softmax.default(t(8, 64), 0, 1.0), "softmax: dim: 0")
    raises(lambda: torch.ops.gemmtune.linear.default(t(8, 64, device="cpu"), t(128, 64, device="cpu"), None, None),
           "linear: x: is on cpu")
    for ok in (1, 2):
        torch.library.opcheck(torch.ops.gemmtune.linear.default, (t(2, 5, 64), t(96, 64), t(96) if ok == 2 else None,
                                                                   "relu"), test_utils=("test_schema", "test_faketensor"))
    torch.library.opcheck(torch.ops.gemmtune.softmax.default, (t(4, 100), -1, 0.5),
                          test_utils=("test_schema", "test_faketensor"))


def test_autograd_goes_through_the_function_only_when_needed():
    w = t(96, 64).requires_grad_()
    y = gt.linear(t(4, 64), w)
    assert type(y.grad_fn).__name__ == "_LinearFnBackward"
    with torch.no_grad():
        assert gt.linear(t(4, 64), w).grad_fn is None
    assert gt.linear(t(4, 64), t(96, 64)).grad_fn is None
    assert type(gt.mm(t(8, 64).requires_grad_(), t(64, 16)).grad_fn).__name__ == "_MmFnBackward"
    assert type(gt.softmax(t(8, 64).requires_grad_()).grad_fn).__name__ == "_SoftmaxFnBackward"


def test_compile_fullgraph_with_autograd():
    """Training through the ops under torch.compile: the autograd.Functions trace, no break."""
    torch._dynamo.reset()

    def fn(x, w):
        return gt.softmax(gt.mm(x, w), -1, 0.5).sum()

    x, w = t(16, 64).requires_grad_(), t(64, 32).requires_grad_()
    explain = torch._dynamo.explain(fn)(x, w)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    torch.compile(fn, fullgraph=True, backend="aot_eager")(x, w).backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape


def test_compile_fullgraph_traces_every_op():
    torch._dynamo.reset()
    f8 = torch.float8_e4m3fn

    def fn(x, w, b, a8, b8, sa, sb):
        h = gt.linear(x, w, b, "silu")
        h = gt.softmax(h, -1, 0.125)
        h = gt.mm(h.reshape(-1, h.shape[-1]), w)
        return h, gt.scaled_mm(a8, b8, sa, sb, out_dtype=torch.bfloat16)

    args = (t(2, 8, 64), t(64, 64), t(64), t(32, 64, dtype=f8), t(16, 64, dtype=f8).t(),
            t(dtype=torch.float32), t(dtype=torch.float32))
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    h, z = compiled(*args)
    assert h.shape == (16, 64) and z.shape == (32, 16)
    explain = torch._dynamo.explain(fn)(*args)
    assert explain.graph_break_count == 0 and explain.graph_count == 1


# ---- optimize() with a fake engine --------------------------------------------------------------------

class FakeEngine:
    """Records select() calls; answers like the C API's report (winner and cuBLASLt default)."""

    def __init__(self):
        self.selected = []

    def select(self, problem, force=False):
        self.selected.append(dict(problem))
        return None, {"from_cache": False, "seconds": 0.01, "results": [
            {"backend": "triton", "id": "t1", "name": "tile", "winner": True, "is_default": False, "median_us": 8.0},
            {"backend": "cublaslt", "id": "c0", "name": "lt", "winner": False, "is_default": True, "median_us": 10.0}]}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 128, device=META, dtype=bf16)
        self.inner = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(128, 64, bias=False, device=META, dtype=bf16))
        self.unused = torch.nn.Linear(64, 64, device=META, dtype=bf16)

    def forward(self, x):
        return self.inner(self.up(x))


def test_optimize_records_tunes_buckets_and_swaps():
    _ops.configure()
    net = Net()
    before = {k: v for k, v in net.state_dict().items()}
    fake = FakeEngine()
    rep = gt.optimize(net, (t(2, 8, 64),), m_buckets=[1, 16], engine=fake, progress=False)
    # Two used layers x (observed m = 16, buckets 1 and 16) = 4 problems; unused layer untouched.
    assert sorted((p["n"], p["k"], p["m"]) for p in fake.selected) == [(64, 128, 1), (64, 128, 16), (128, 64, 1),
                                                                       (128, 64, 16)]
    assert sorted(rep.replaced) == ["inner.1", "up"]
    assert type(net.up) is gt.Linear and type(net.inner[1]) is gt.Linear and type(net.unused) is torch.nn.Linear
    assert list(net.state_dict()) == list(before) and all(net.state_dict()[k] is not None for k in before)
    assert net.up.weight is not None and net.up.bias is not None and net.inner[1].bias is None
    assert all(p["backend"] == "triton" and p["speedup"] == pytest.approx(1.25) for p in rep.problems)
    assert "2 Linear layers replaced" in str(rep)
    # The buckets each layer family dispatches to (never tuned on the hot path).
    fams = list(_ops._State.buckets.values())
    assert sorted(len(v) for v in fams) == [2, 2] and all(v[0][0] == 1 and v[1][0] == 16 for v in fams)
    # The optimized model still traces (meta: through the fake implementation).
    y = net(t(3, 64))
    assert y.shape == (3, 64)
    _ops.configure()


def _res(backend, cid, median, status="ok", winner=False):
    return {"backend": backend, "id": cid, "name": cid, "status": status, "median_us": median, "winner": winner,
            "is_default": cid.startswith("torch-")}


def test_cheaper_launch_runs_ours_near_torch_on_small_problems():
    """Where the pick would run torch's op on a decode-sized problem: the fastest correct
    candidate of another backend within the margin of torch's kernel; else None."""
    pick = lambda results, margin=0.05, m=16: (_ops._cheaper_launch(m, results, margin) or {}).get("id")
    torch_wins = [_res("cublaslt", "torch-00-00", 10.0, winner=True), _res("native", "n1", 10.3),
                  _res("triton", "t1", 10.2), _res("native", "n0", 9.0, status="wrong"),
                  _res("triton", "t0", 9.5, status="pruned"), _res("cutlass", "c1", 10.6)]
    assert pick(torch_wins) == "t1"                      # the fastest correct one within 5%
    assert pick(torch_wins, 0.01) is None                # none within 1%
    assert pick(torch_wins, m=65) is None                # not decode-sized
    assert pick([dict(r, median_us=r["median_us"] * 6) for r in torch_wins]) is None  # 60 us: past the bound
    lt = [_res("cublaslt", "torch-00-00", 10.0), _res("cublaslt", "05", 9.8, winner=True), _res("triton", "t1", 10.2)]
    assert pick(lt) == "t1"                              # a cuBLASLt algo within the margin defers: ours instead
    lt[1]["median_us"] = 9.0
    assert pick(lt) is None                              # clearly faster than torch's: gemmtune launches it
    assert pick([_res("cublaslt", "torch-00-00", 10.0), _res("native", "n1", 9.0, winner=True)]) is None
    assert pick([_res("cublaslt", "05", 10.0, winner=True), _res("native", "n1", 10.1)]) is None  # no torch kernel
    assert pick([_res("cublaslt", "torch-00-00", 10.0, winner=True), _res("native", "n0", 9.0, status="wrong")]) is None


class TorchWinsEngine:
    """select(): torch's kernel wins by 2% over a native one (a report like the C API's)."""

    def __init__(self):
        self.loads = []

    def select(self, problem, force=False):
        return BaselineKernel(problem, baseline(True)), {"from_cache": False, "seconds": 0.01, "results": [
            _res("cublaslt", "torch-00-00", 10.0, winner=True), _res("native", "decode_x", 10.2)]}

    def load(self, problem, backend, cid):
        self.loads.append((problem["m"], backend, cid))
        return BaselineKernel(problem, {"backend": backend, "id": cid, "torch_baseline": False})


def test_small_problem_near_torch_runs_ours(monkeypatch):
    """optimize() records the candidate of ours for the bucket (not torch's op), and a key selected
    outside optimize() loads it."""
    _ops.configure()
    eng = TorchWinsEngine()
    net = Net()
    rep = gt.optimize(net, (t(2, 8, 64),), engine=eng, progress=False)
    assert all(p["backend"] == "native" and p["launch_cheaper"] and not p["torch_op"] for p in rep.problems)
    assert all(v == [(16, "native", "decode_x")] for v in _ops._State.buckets.values())
    _ops.configure()
    monkeypatch.setattr(_ops, "engine", lambda device=0: eng)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    k = _ops._select("linear", P.plan_linear(t(5, 64), t(128, 64), None, None), 0)
    assert k.describe()["backend"] == "native" and eng.loads == [(5, "native", "decode_x")]
    k = _ops._select("linear", P.plan_linear(t(5, 64), t(128, 64), None, "relu"), 0)  # an epilogue: never deferred
    assert k.describe()["torch_baseline"] and len(eng.loads) == 1
    _ops.configure()


def test_bucket_order_prefers_the_smallest_bucket_above():
    assert _ops._bucket_order(5, [1, 4, 8, 16]) == [8, 16, 4, 1]
    assert _ops._bucket_order(16, [1, 4, 8, 16]) == [16, 8, 4, 1]
    assert _ops._bucket_order(100, [1, 16]) == [16, 1]


def test_linear_module_shares_parameters():
    lin = torch.nn.Linear(64, 32, device=META, dtype=bf16)
    g = gt.Linear.from_linear(lin, activation="relu")
    assert g.weight is lin.weight and g.bias is lin.bias
    assert list(g.state_dict()) == ["weight", "bias"]
    assert "activation='relu'" in repr(g)
    assert g(t(4, 64)).shape == (4, 32)


class BucketEngine:
    """load() answers for every bucket but the ones in `refuse` (as a decode kernel refuses m > 16)."""

    def __init__(self, refuse=()):
        self.loads = []
        self.refuse = set(refuse)

    def load(self, problem, backend, cid):
        self.loads.append((problem["m"], backend, cid))
        if cid in self.refuse:
            raise gemmtune.GemmtuneError(gemmtune.GT_ERR_RUNTIME, f"{cid}: does not support m={problem['m']}")
        return ("kernel", problem["m"], cid)

    def select(self, problem, force=False):
        raise AssertionError("an untuned m must never be tuned when the layer has buckets")


def test_untuned_m_loads_the_nearest_valid_bucket_never_tunes(monkeypatch):
    _ops.configure()
    plan = P.plan_linear(t(5, 64), t(128, 64), None, None)
    _ops._State.buckets[_ops._family(plan.key)] = [(1, "native", "n1"), (8, "native", "n8"), (64, "triton", "t64")]
    eng = BucketEngine(refuse={"n8"})
    monkeypatch.setattr(_ops, "engine", lambda device=0: eng)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    # m = 5: bucket 8 first (refused: not valid for m = 5 here), then 64; loaded for m = 5.
    assert _ops._select("linear", plan, 0) == ("kernel", 5, "t64")
    assert eng.loads == [(5, "native", "n8"), (5, "triton", "t64")]
    # Nothing valid: an error naming the buckets tried, still no tune.
    eng.refuse = {"n1", "n8", "t64"}
    msg = str(pytest.raises(gemmtune.GemmtuneError, _ops._select, "linear", plan, 0).value)
    assert "no tuned bucket's kernel runs m=5" in msg and "m=1 native/n1" in msg
    _ops.configure()


def test_first_call_under_capture_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(_ops, "engine", lambda device=0: BucketEngine())
    plan = P.plan_mm(t(16, 64), t(64, 32))
    msg = str(pytest.raises(gemmtune.GemmtuneError, _ops._select, "mm", plan, 0).value)
    assert "captured into a CUDA graph" in msg and "run the op once before capture" in msg


class FakeKernel:
    def __init__(self, problem):
        self.problem = problem
        self._h = object()

    def describe(self):
        return {"backend": "fake", "id": "f0", "name": "fake"}


def test_hot_path_with_a_fake_kernel(monkeypatch):
    """The eager implementation end to end on CPU tensors, the GPU parts faked: planned once per
    signature, then the C call gets x's own data pointer for leading dims that flatten to a view
    (a copy's when they do not), the output has x's leading dims, and a new signature is planned."""
    import contextlib
    _ops.configure()
    calls, selects = [], []
    monkeypatch.setattr(P, "_check_cuda", lambda op, name, t, device: None)
    monkeypatch.setattr(_ops, "_select", lambda op, plan, device: selects.append(plan.problem) or FakeKernel(plan.problem))
    monkeypatch.setattr(_ops, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(_ops._State, "run", object())  # bound: _entry binds nothing
    monkeypatch.setattr(_ops._State, "run_abd", lambda *args: calls.append(args) or 0)
    w = torch.randn(48, 32, dtype=bf16)
    b = torch.randn(48, dtype=bf16)
    x = torch.randn(2, 5, 32, dtype=bf16)
    for _ in range(3):
        y = _ops._linear_impl(x, w, b, "silu")
    assert y.shape == (2, 5, 48) and y.dtype == bf16
    assert len(selects) == 1 and selects[0]["m"] == 10 and selects[0]["act"] == "silu" and selects[0]["bias"]
    h, pa, pb, pd, pbias, stream = calls[-1]   # gt_kernel_run_abd
    assert (pa, pb, pbias, stream) == (x.data_ptr(), w.data_ptr(), b.data_ptr(), 1234)
    assert pd == y.data_ptr()
    # Leading dims that do not flatten to a view: a new signature, its rows gathered by a copy.
    xt = torch.randn(5, 2, 32, dtype=bf16).transpose(0, 1)
    y2 = _ops._linear_impl(xt, w, None, None)
    assert y2.shape == (2, 5, 48) and len(selects) == 2 and calls[-1][1] != xt.data_ptr() and calls[-1][4] is None
    # A misaligned x is refused before anything is selected.
    xm = torch.randn(2 * 32 + 1, dtype=bf16)[1:].view(2, 32)
    raises(lambda: _ops._linear_impl(xm, w, None, None), "linear: x: data pointer")
    assert len(selects) == 2
    _ops.configure()


def test_autograd_shapes_on_meta():
    x = t(2, 3, 64).requires_grad_()
    w = t(96, 64).requires_grad_()
    b = t(96).requires_grad_()
    y = gt.softmax(gt.linear(x, w, b), scale=0.5)
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and b.grad.shape == b.shape
    a, m = t(8, 64).requires_grad_(), t(64, 16).requires_grad_()
    gt.mm(a, m).sum().backward()
    assert a.grad.shape == a.shape and m.grad.shape == m.shape
    with pytest.raises(gemmtune.GemmtuneError, match="activation: 'relu' has no backward"):
        gt.linear(t(4, 64).requires_grad_(), w, None, "relu").sum().backward()


def test_scaled_mm_block_scales():
    f8, f32 = torch.float8_e4m3fn, torch.float32
    m, n, k = 64, 384, 640                      # kb = 5, nb = 3, sb's row stride round_up(5, 4) = 8
    a = t(m, k, dtype=f8)
    b = t(n, k, dtype=f8).t()
    sa = t(5, m, dtype=f32).t()                 # [m, kb], M-major
    sb = t(3, 8, dtype=f32)[:, :5]              # W's scales [nb, kb], row stride 8
    p = P.plan_scaled_mm(a, b, sa, sb, torch.bfloat16, None)
    assert p.problem["scale"] == "block"
    assert P.plan_scaled_mm(a, b, sa, sb.t(), torch.bfloat16, None).problem["scale"] == "block"  # [kb, nb] view
    raises(lambda: P.plan_scaled_mm(a, b, t(m, 5, dtype=f32), sb, None, None), "scale_a: block scales")
    raises(lambda: P.plan_scaled_mm(a, b, sa, t(3, 5, dtype=f32), None, None), "scale_b: block scales", "= 8")
    z = gt.scaled_mm(a, b, sa, sb)
    assert z.shape == (m, n) and z.dtype == torch.bfloat16


def test_fast_path_takes_parameters(monkeypatch):
    """nn.Linear's weight is an nn.Parameter: under no_grad (inference) it takes the eager fast
    path like a plain tensor, not the dispatcher (measured on the H200: +24 us a call that way);
    with autograd to record, or for a tensor subclass, the op is used."""
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    w = torch.nn.Parameter(torch.randn(8, 8))
    x = torch.randn(2, 8)
    with torch.no_grad():
        assert _ops._plain(x, w, None)
    assert not _ops._plain(x, w, None)  # grad enabled and w requires grad

    class Sub(torch.Tensor):
        pass

    with torch.no_grad():
        assert not _ops._plain(x.as_subclass(Sub), w)


# ---- deferring to torch's op when the pick is torch's own kernel ----------------------------------------

class BaselineKernel(FakeKernel):
    """A selected kernel with a given describe() (backend, torch_baseline, medians)."""

    def __init__(self, problem, info):
        super().__init__(problem)
        self.info = info

    def describe(self):
        return {"id": "00", "name": "lt", "median_us": None, "torch_baseline_us": None, **self.info}


def baseline(yes: bool) -> dict:
    """describe() of the cuBLASLt torch baseline (yes) or of another cuBLASLt algo, medians unknown."""
    return {"backend": "cublaslt", "id": "torch-00-00" if yes else "00", "torch_baseline": yes}


def _fake_gpu(monkeypatch, describe):
    """The hot path on CPU tensors, the GPU parts faked; _select's kernel describes itself as
    describe(problem) says. Returns (selects, calls): problems selected, C runs made."""
    import contextlib
    _ops.configure()
    calls, selects = [], []
    monkeypatch.setattr(P, "_check_cuda", lambda op, name, t, device: None)
    monkeypatch.setattr(_ops, "_select", lambda op, plan, device: selects.append(plan.problem)
                        or BaselineKernel(plan.problem, describe(plan.problem)))
    monkeypatch.setattr(_ops, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(_ops._State, "run", object())  # bound: _entry binds nothing
    monkeypatch.setattr(_ops._State, "run_abd", lambda *args: calls.append(args) or 0)
    monkeypatch.setattr(_ops._State, "softmax_run", lambda *args: calls.append(args) or 0)
    monkeypatch.setattr(_ops._Cpp, "loaded", False)  # the C++ op as if not built (test_cpp_route binds it)
    return selects, calls


def test_defers_to_torch_exactly_when_the_pick_is_torch_baseline(monkeypatch):
    """mm and linear (no activation) whose pick is the torch baseline run torch's op (same result,
    no C call); any other pick, an activation, or softmax run gemmtune's kernel. Decided once per
    key: repeated calls select nothing more."""
    selects, calls = _fake_gpu(monkeypatch, lambda p: baseline(p.get("n", 48) == 48))  # n = 48 (and softmax)
    w, w2 = torch.randn(48, 32, dtype=bf16), torch.randn(40, 32, dtype=bf16)
    b = torch.randn(48, dtype=bf16)
    x = torch.randn(2, 5, 32, dtype=bf16)
    for _ in range(3):
        y = _ops._linear_impl(x, w, b, None)
        assert torch.equal(y, torch.nn.functional.linear(x, w, b))
        y = _ops._mm_impl(x[0], w.t())
        assert torch.equal(y, torch.mm(x[0], w.t()))
    assert len(selects) == 2 and calls == []
    assert all(e.defer for d in _ops._State.entries.values() for e in d.values())
    _ops._linear_impl(x, w2, None, None)          # not the baseline: gemmtune's kernel
    assert len(calls) == 1
    _ops._linear_impl(x, w, b, "silu")            # the baseline, but an activation: gemmtune's kernel
    assert len(calls) == 2
    _ops._softmax_impl(x, -1, 1.0)                # softmax never defers
    assert len(calls) == 3
    assert [e.defer for e in _ops._State.entries["linear"].values()] == [True, False, False]
    _ops.configure()


# The margin rule on the describe() of a pick: the s12 H200 run's layers at 2048 and 16 tokens.
GATE_2048 = {"backend": "cublaslt", "torch_baseline": False, "median_us": 321.6, "torch_baseline_us": 328.4}


@pytest.mark.parametrize("info,act,margin,defer", [
    (GATE_2048, "none", 0.05, True),                                        # 2.1% faster: within the margin
    (dict(GATE_2048, torch_baseline_us=336.6), "none", 0.05, True),         # 4.7% faster: still within 5%
    (dict(GATE_2048, torch_baseline_us=340.0), "none", 0.05, False),        # 5.7% faster: keeps its win
    (GATE_2048, "none", 0.0, False),                                        # margin 0: the baseline only
    (GATE_2048, "none", 0.02, False),                                       # 2.1% > 2%
    (dict(GATE_2048, median_us=330.0), "none", 0.0, True),                  # slower than the baseline
    (GATE_2048, "silu", 0.05, False),                                       # an activation: never
    (dict(GATE_2048, torch_baseline_us=None), "none", 0.05, False),         # baseline not timed / no cache
    (dict(GATE_2048, median_us=None), "none", 0.05, False),                 # the pick not timed at this m
    (dict(GATE_2048, backend="triton"), "none", 0.05, False),               # launched by gemmtune: keeps it
    (dict(GATE_2048, backend="native", median_us=11.04, torch_baseline_us=10.96), "none", 0.05, False),
    (dict(GATE_2048, torch_baseline=True, median_us=None), "none", 0.0, True),   # torch's own kernel
    (dict(GATE_2048, torch_baseline=True), "relu", 0.05, False),
])
def test_defer_rule(info, act, margin, defer):
    assert _ops._defers("linear", act, info, margin) is defer
    assert _ops._defers("mm", act, info, margin) is defer
    assert _ops._defers("softmax", act, info, margin) is False and _ops._defers("scaled_mm", act, info, margin) is False


def test_defer_margin_is_configured_and_applied_per_key(monkeypatch):
    """The margin (configure(defer_margin=...), default DEFER_MARGIN = 0.05) decides each key's
    entry once, from its kernel's describe(); configure() refuses a margin that is no fraction."""
    assert _ops.DEFER_MARGIN == 0.05 and _ops._State.defer_margin == 0.05
    # gate-like (n = 48): a cuBLASLt algo 2.1% faster than torch's; down-like (n = 40): 8% faster.
    medians = {48: (321.6, 328.4), 40: (100.0, 108.0)}
    _, calls = _fake_gpu(monkeypatch, lambda p: {"backend": "cublaslt", "torch_baseline": False,
                                                 "median_us": medians[p["n"]][0], "torch_baseline_us": medians[p["n"]][1]})
    x, w, w2 = torch.randn(2, 5, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16), torch.randn(40, 32, dtype=bf16)
    assert torch.equal(gt.linear(x, w), torch.nn.functional.linear(x, w)) and calls == []
    gt.linear(x, w2)
    assert len(calls) == 1
    for margin, defer in ((0.0, [False, False]), (0.09, [True, True])):
        _ops.configure(defer_margin=margin)
        assert _ops._State.defer_margin == margin and not _ops._State.entries["linear"]
        gt.linear(x, w), gt.linear(x, w2)
        assert [e.defer for e in _ops._State.entries["linear"].values()] == defer
    for bad in (-0.01, 1.0, "5%", None, True):
        raises(lambda: _ops.configure(defer_margin=bad), "configure: defer_margin")
    _ops.configure()
    assert _ops._State.defer_margin == 0.05


def test_deferred_call_is_torch_op_whatever_the_tensors(monkeypatch):
    """A deferred key runs torch's op before any other test: with autograd to record it is
    torch's own backward (no autograd.Function of ours), and no C call is made."""
    selects, calls = _fake_gpu(monkeypatch, lambda p: baseline(True))
    x, w = torch.randn(4, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16)
    with torch.no_grad():
        gt.linear(x, w), gt.mm(x, w.t())
    monkeypatch.setattr(_ops, "_plain_tensors", None)  # never asked on a deferred call (a call would raise)
    wg = w.clone().requires_grad_()
    y = gt.linear(x, wg)
    assert y.grad_fn is not None and "Function" not in type(y.grad_fn).__name__
    y.float().sum().backward()
    assert torch.equal(wg.grad, torch.nn.functional.linear(x, w).new_ones(4, 48).t() @ x)
    assert len(selects) == 2 and calls == []
    _ops.configure()


def test_traced_route_selects_once_never_under_capture(monkeypatch):
    """What dynamo asks while tracing with static shapes: the key's pick (selected now if new,
    the same entry the eager call uses); under CUDA-graph capture a new key is not selected (the
    op stays ours); not a CUDA device: never."""
    selects, calls = _fake_gpu(monkeypatch, lambda p: baseline(p["m"] == 10))
    TORCH, OP = _ops._ROUTE_TORCH, _ops._ROUTE_OP
    x, w = torch.randn(2, 5, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16)
    on_cpu = _ops._linear_key(x, w, None, None)
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)))  # CPU tensors as cuda:0
    lin = _ops._linear_key(x, w, None, None)
    assert _ops._traced_route("linear", lin, False) == TORCH and len(selects) == 1 and selects[0]["m"] == 10
    assert _ops._traced_route("linear", lin, False) == TORCH and len(selects) == 1
    # The eager call finds that entry (one key builder).
    assert _ops._State.entries["linear"][lin].defer
    assert _ops._traced_route("mm", _ops._mm_key(x[0], w.t()), False) == OP and len(selects) == 2   # m = 5
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    x3 = torch.randn(10, 32, dtype=bf16)
    assert _ops._traced_route("linear", _ops._linear_key(x3, w, None, None), False) == OP and len(selects) == 2
    assert _ops._traced_route("linear", lin, False) == TORCH            # already selected: still answered
    assert _ops._traced_route("linear", on_cpu, False) == OP and len(selects) == 2
    meta = (*lin[:3], torch.device("meta"), *lin[4:])
    assert _ops._traced_route("linear", meta, False) == OP and len(selects) == 2
    # A refused argument (weight's k differs): not deferred, nothing selected (the op reports it).
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    w16 = torch.randn(48, 16, dtype=bf16)
    assert _ops._traced_route("linear", _ops._linear_key(x, w16, None, None), False) == OP and len(selects) == 2
    # With a bias: its tensor is planned too.
    b = torch.randn(48, dtype=bf16)
    assert _ops._traced_route("linear", _ops._linear_key(x, w, b, None), False) == TORCH and selects[-1]["bias"]
    _ops.configure()


def test_cpp_route_binds_once_and_traces_run_abd(monkeypatch):
    """Where the C++ op is built (libgemmtune_torch_<torch major.minor>.so beside the library): a
    key whose pick does not defer binds a kernel handle of its own (one load, once), is traced as
    gemmtune::run_abd with that index, and the fake implementation gives the output; a deferred
    key, or one whose call records autograd, does not bind. Bad bindings and unbound indices are
    refused by name. (The kernel itself runs on the H200: scripts/gpu/torch_check.py.)"""
    import ctypes
    if not os.path.exists(_ops._Cpp.path()):
        pytest.skip(f"no C++ op for torch {torch.__version__}: {_ops._Cpp.path()}")
    _fake_gpu(monkeypatch, lambda p: baseline(p["n"] == 40))
    monkeypatch.setattr(_ops._Cpp, "loaded", None)
    monkeypatch.setattr(_ops._Cpp, "bound", {})
    assert _ops._Cpp.load(), _ops._Cpp.reason
    loads = []

    class Handle:
        def __init__(self):
            self._h = ctypes.c_void_p(0x1000 + 16 * len(loads))  # never run on this machine

    class Engine:
        def load(self, problem, backend, cid):
            loads.append((dict(problem), backend, cid))
            return Handle()

    monkeypatch.setattr(_ops, "engine", lambda device=0: Engine())
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)))  # CPU tensors as cuda:0
    x, w, b = torch.randn(2, 5, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16), torch.randn(48, dtype=bf16)
    key = _ops._linear_key(x, w, b, "silu")
    kid = _ops._traced_route("linear", key, False)
    assert kid >= 0 and _ops._traced_route("linear", key, False) == kid
    assert len(loads) == 1 and loads[0][0]["act"] == "silu" and loads[0][1:] == ("cublaslt", "00")
    assert _ops._Cpp.out[kid] == ((2, 5, 48), bf16)
    assert _ops._State.entries["linear"][key].cpp == kid  # the eager path runs it too
    # Autograd to record: the Python op (the key's entry is bound all the same, for eager calls).
    assert _ops._traced_route("linear", _ops._linear_key(x, w, None, None), True) == _ops._ROUTE_OP
    assert len(loads) == 2
    w40 = torch.randn(40, 32, dtype=bf16)
    assert _ops._traced_route("linear", _ops._linear_key(x, w40, None, None), False) == _ops._ROUTE_TORCH
    assert _ops._State.entries["linear"][_ops._linear_key(x, w40, None, None)].cpp == _ops._ROUTE_OP
    mk = _ops._traced_route("mm", _ops._mm_key(x[0], w.t()), False)
    assert mk == kid + 2 and _ops._Cpp.out[mk] == ((5, 48), bf16) and len(loads) == 3
    # Another pick for the same key (kernels dropped, selected again): a binding of its own.
    _ops.clear_kernels()
    monkeypatch.setattr(_ops, "_select", lambda op, plan, device: BaselineKernel(plan.problem, dict(baseline(False), id="01")))
    assert _ops._traced_route("linear", key, False) == kid + 3 and loads[-1][1:] == ("cublaslt", "01")
    monkeypatch.undo()  # real devices again: what follows traces meta tensors

    @torch.compiler.assume_constant_result
    def route(op, key, grad):
        return kid

    monkeypatch.setattr(_ops, "_traced_route", route)
    tg = _graph_targets(lambda x, w, b: gt.linear(x, w, b, "silu"), t(2, 5, 32), t(48, 32), t(48))
    assert tg == ["gemmtune.run_abd.default"], tg
    y = torch.ops.gemmtune.run_abd.default(t(2, 5, 32), t(48, 32), t(48), kid)  # the fake implementation
    assert y.shape == (2, 5, 48) and y.dtype == bf16 and y.device.type == META
    with pytest.raises(RuntimeError, match="_bind_kernel: handle: null"):
        torch.ops.gemmtune._bind_kernel(0, "mm", None, 0, t(5, 32), t(32, 48), None, [5, 48])
    with pytest.raises(RuntimeError, match="_bind_kernel: op: 'conv'"):
        torch.ops.gemmtune._bind_kernel(16, "conv", None, 0, t(5, 32), t(32, 48), None, [5, 48])
    with pytest.raises(RuntimeError, match="_bind_kernel: out: negative size"):
        torch.ops.gemmtune._bind_kernel(16, "mm", None, 0, t(5, 32), t(32, 48), None, [5, -1])
    raises(lambda: torch.ops.gemmtune.run_abd.default(t(5, 32), t(32, 48), None, 10**6), "run_abd: kernel: 1000000")
    with pytest.raises(NotImplementedError):  # CPU tensors: the op has a CUDA kernel only
        torch.ops.gemmtune.run_abd.default(torch.randn(5, 32), torch.randn(32, 48), None, kid)
    torch._dynamo.reset()
    _ops.configure()


def test_dynamo_passes_the_eager_key(monkeypatch):
    """The key dynamo evaluates (static shapes) and hands _traced_route is the eager call's key
    for the same tensors: one builder, so both find one entry."""
    seen = []

    @torch.compiler.assume_constant_result
    def record(op, key, grad):
        seen.append((op, key))
        return _ops._ROUTE_OP

    _fake_gpu(monkeypatch, lambda p: baseline(False))  # CPU tensors traced and run as if on a GPU
    monkeypatch.setattr(_ops, "_traced_route", record)
    x, w, b = torch.randn(2, 5, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16), torch.randn(48, dtype=bf16)
    a, m = torch.randn(5, 32, dtype=bf16), torch.randn(48, 32, dtype=bf16).t()
    torch._dynamo.reset()
    torch.compile(lambda x, w, b, a, m: (gt.linear(x, w, b), gt.linear(x, w), gt.mm(a, m)), backend="eager",
                  fullgraph=True, dynamic=False)(x, w, b, a, m)
    assert seen == [("linear", _ops._linear_key(x, w, b, None)), ("linear", _ops._linear_key(x, w, None, None)),
                    ("mm", _ops._mm_key(a, m))], seen
    torch._dynamo.reset()
    _ops.configure()


def _graph_targets(fn, *args, dynamic=False):
    """The FX graph's call targets that dynamo traces for fn(*args) (meta tensors)."""
    torch._dynamo.reset()
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch.compile(fn, backend=backend, fullgraph=True, dynamic=dynamic)(*args)
    return targets


def test_compile_traces_torch_op_when_deferred(monkeypatch):
    """Under torch.compile with static shapes a deferred linear / mm is traced as torch's op
    (Inductor can fuse around it); not deferred, or with symbolic shapes, it stays gemmtune's."""
    answer = {"v": True}

    @torch.compiler.assume_constant_result
    def fake_defer(op, sig, grad):
        return _ops._ROUTE_TORCH if answer["v"] else _ops._ROUTE_OP

    monkeypatch.setattr(_ops, "_traced_route", fake_defer)

    def fn(x, w, b):
        return gt.mm(gt.linear(x, w, b), w)

    args = (t(8, 64), t(64, 64), t(64))
    tg = _graph_targets(fn, *args)
    assert not any("gemmtune" in s for s in tg) and any("linear" in s for s in tg) and any("mm" in s for s in tg), tg
    answer["v"] = False
    tg = _graph_targets(fn, *args)
    assert sum("gemmtune" in s for s in tg) == 2, tg
    answer["v"] = True
    # Symbolic shapes: the op stays gemmtune's (its fake implementation then specializes the
    # sizes, so a later op on its output sees static ones).
    tg = _graph_targets(lambda x, w, b: gt.linear(x, w, b), *args, dynamic=True)
    assert tg == ["gemmtune.linear.default"], tg
    # An activation is never deferred (the route asks _defers).
    assert not _ops._defers("linear", "relu", baseline(True), 0.05)
    torch._dynamo.reset()


def test_deferred_block_dispatches_what_plain_pytorch_does(monkeypatch):
    """The H200 check's Llama-style block (scripts/gpu/torch_check.py, small sizes, CPU) after
    optimize(), every pick torch's own kernel: its forward dispatches exactly the aten ops plain
    PyTorch's does (same ops, shapes, strides, dtypes, in the same order), so on the GPU it
    launches the same kernels: a gap between the two blocks there is not in what they run."""
    import copy
    import os
    import sys
    from torch.utils._python_dispatch import TorchDispatchMode
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu"))
    import torch_check

    _fake_gpu(monkeypatch, lambda p: baseline(True))
    torch.manual_seed(0)
    plain = torch_check.DecoderBlock(d=64, heads=4, kv=2, ff=160).to(bf16).eval()
    opt = copy.deepcopy(plain)
    x = torch.randn(1, 8, 64, dtype=bf16)
    rep = gt.optimize(opt, (x,), engine=FakeEngine(), progress=False)
    assert len(rep.replaced) == 7

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            sig = [(tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                   for a in torch.utils._pytree.tree_leaves((args, kwargs or {}))]
            self.ops.append((str(func), sig))
            return func(*args, **(kwargs or {}))

    with torch.no_grad():
        opt(x)  # selects every layer's kernel (the first call of each key)
        assert all(e.defer for e in _ops._State.entries["linear"].values())
        runs = []
        for mod in (plain, opt):
            with Ops() as mode:
                y = mod(x)
            runs.append((mode.ops, y))
    (ops_plain, y_plain), (ops_opt, y_opt) = runs
    assert ops_opt == ops_plain
    assert sum("mm" in name for name, _ in ops_plain) == 7 and not any("gemmtune" in n for n, _ in ops_opt)
    assert torch.equal(y_opt, y_plain)

    # Under torch.compile (static shapes) the deferred block is traced as the same graph as plain
    # PyTorch's: the same calls in the same order, so Inductor compiles both alike.
    @torch.compiler.assume_constant_result
    def deferred(op, key, grad):
        return _ops._ROUTE_TORCH

    monkeypatch.setattr(_ops, "_traced_route", deferred)
    graphs = []
    for mod in (plain, opt):
        torch._dynamo.reset()
        calls = []

        def backend(gm, example_inputs, calls=calls):
            calls.extend((n.op, str(n.target)) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
            return gm.forward

        with torch.no_grad():
            torch.compile(mod, backend=backend, fullgraph=True, dynamic=False)(x)
        graphs.append(calls)
    assert graphs[0] == graphs[1] and sum("linear" in t for _, t in graphs[0]) == 7, graphs
    torch._dynamo.reset()
    _ops.configure()
