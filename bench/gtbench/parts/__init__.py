"""The parts of a GEMM run (bench/h200.py --part), in the order they run; each is a function of the
Run (run.py) that adds its results to it. softmax.py is the softmax bench's one part."""

PARTS = ("ceilings", "coldtune", "suite", "decoder", "stability", "cachehit")
