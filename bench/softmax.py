#!/usr/bin/env python3
"""gemmtune softmax benchmark on the H200 (issue 6): one process, every contender interleaved.

For every row of the suite (bench/suites/softmax.csv: rows,cols; 2^29 elements each) and every
dtype (--dtypes, default bf16,fp16,fp32): gemmtune tunes the problem through the C API
(libgemmtune_c.so: gt_softmax_select, a fresh cache in $OUT unless --cache), then its pick,
torch.softmax and a plain one-row-per-program Triton kernel are timed in the same rounds, and the
copy bandwidth (1 GiB device-to-device) is measured in the same run. Results: TB/s = (bytes of x
read + bytes of y written) / median time, % of that copy bandwidth, speedup vs torch.

Method (as bench/h200.py): random inputs in [-8, 8) (never zeros); before every timed sample a
256 MiB buffer is read (L2 flush, leaving clean lines) and a ~50 us GPU spin is queued, both outside the timed
region; CUDA events around one call; a time-based warm-up; medians with p20 and p80 over
--rounds samples; all contenders of a problem in the same rounds with a rotating order. Every
output is checked against torch.softmax(x.float() * scale) in fp32: no NaN (the inputs are
finite), relative Frobenius error and the worst element within the output dtype's bound;
gemmtune's and Triton's outputs are filled with NaN before the check. A failed check is printed
loudly and makes the script exit 1 after everything is written.

Plain Triton (the baseline, bench/gtbench/plain_softmax.py): one program per row, the row in
registers up to 32K columns, beyond that a loop over 4K chunks.

Acceptance (bf16, every row): gemmtune >= 90% of the copy bandwidth and >= 1.3x torch.softmax:
summary.criteria. Writes $OUT/<date>-h200-softmax[-tag].json and .md.

    python3 bench/softmax.py --out /tmp/sm                  # all rows, bf16,fp16,fp32
    python3 bench/softmax.py --dtypes bf16 --limit 2        # smoke
    python3 bench/softmax.py --mock --out /tmp/sm-mock      # CPU self-test of this script
"""

from __future__ import annotations

import sys

from gtbench.args import softmax_args  # bench/gtbench: this script's folder is on sys.path
from gtbench.parts.softmax import run_softmax


def main(argv=None):
    return run_softmax(softmax_args(argv, description=__doc__.split("\n\n")[0]))


if __name__ == "__main__":
    sys.exit(main())
