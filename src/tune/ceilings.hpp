// What this GPU can do at best: copy bandwidth and dense matrix rates, measured; and the
// roofline bound they give for a problem (to say how close a kernel is to the hardware).
#pragma once

#include <functional>
#include <string>

#include "gemmtune/device.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

struct Ceilings {
  double copy_TBps = 0;    // device-to-device copy, bytes read + written per second / 1e12
  double bf16_tflops = 0;  // cuBLASLt's default pick, 8192^3 bf16 nn.Linear
  double fp8_tflops = 0;   // same, e4m3 inputs with tensorwise scales, bf16 out
};

// Measures on the current device (about a second: 20 timed copies; per GEMM ~200 ms of warm-up
// then 20 timed samples of 5 runs, median). Needs ~4 GiB of free device memory for the copy
// (less on small GPUs: each buffer is capped at 1/8 of memory). Throws Error without a GPU or
// when cuBLASLt is not available.
Ceilings measure_ceilings(const DeviceInfo& dev, std::function<void(const std::string&)> log = {});

// The roofline bound for p as TFLOP/s: flops / max(flops / peak, min_bytes / bandwidth), where
// peak is the bf16 rate for bf16/fp16 inputs, the fp8 rate for fp8 inputs, half the bf16 rate
// for fp32 with tf32, and 1/16 of it for plain fp32 (see ceilings.cpp). 0 when unknown.
double roof_tflops(const GemmProblem& p, const Ceilings& c);

}  // namespace gemmtune
