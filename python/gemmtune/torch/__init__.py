"""gemmtune for PyTorch: tuned GEMM and softmax ops, a drop-in nn.Linear, whole-model tuning.

    import gemmtune.torch as gt
    report = gt.optimize(model, example_inputs)     # tunes every nn.Linear, swaps in gt.Linear

Ops (torch.library ops `torch.ops.gemmtune.*`, traceable by torch.compile(fullgraph=True),
capturable in CUDA graphs once warmed up): mm, linear, scaled_mm, softmax. grouped_mm (torch._grouped_mm's
signature, mixture-of-experts layers) runs eagerly only (_grouped.py). They run on torch's
current stream and allocate their outputs through torch. Arguments they cannot run raise
gemmtune.GemmtuneError naming the argument ("gemmtune.torch.linear: weight: ...").
"""

try:
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError("gemmtune.torch needs PyTorch (pip install torch); the rest of gemmtune does not") from e

from ._ops import clear_kernels, configure, engine, linear, mm, scaled_mm, softmax
from ._module import Linear, OptimizeReport, optimize
from ._grouped import grouped_mm

__all__ = ["mm", "linear", "scaled_mm", "softmax", "grouped_mm", "Linear", "optimize", "OptimizeReport", "configure", "engine",
           "clear_kernels"]
