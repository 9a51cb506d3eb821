"""gemmtune's CuTe DSL backend, Python side: the Hopper GEMM kernel (gemm_sm90.py) and its
ahead-of-time compile into a self-contained shared object (compile.py). See docs/cutedsl.md."""
