// Verification: a simple GPU reference GEMM (fp32 accumulation, the same epilogue) and an
// element-wise comparison with tolerances by dtype. A candidate that fails is never selectable.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {

struct Tolerance {
  double rel_norm;  // ||D - ref|| / ||ref|| must be <= this
  double elem_rel;  // each |d - r| <= elem_rel * |r| + elem_abs * rms(ref)
  double elem_abs;
};
// By output dtype and input precision (tf32, fp8, fp16/bf16 rounding of D).
Tolerance tolerance_for(const GemmProblem& p);

struct CheckResult {
  bool ok = false;
  double rel_err = 0;       // ||D - ref|| / ||ref||
  double worst_ratio = 0;   // max over elements of |d - r| / bound
  int64_t bad = 0;          // elements over their bound
  int64_t nonfinite = 0;    // NaN / Inf in D (where the reference is finite)
  std::string reason;       // empty when ok, else e.g. "12 elements over bound, worst at (3, 17)"
};

// ref[m * n] (row-major fp32) = the problem's D computed simply on the GPU from args.
void reference_gemm(const GemmProblem& p, const GemmArgs& args, float* ref, cudaStream_t s);
// Compares D (args.d, in the problem's dtype and layout) with ref; synchronizes `s`.
CheckResult compare(const GemmProblem& p, const void* d, const float* ref, cudaStream_t s);

}  // namespace gemmtune
