// Softmax operands, GPU reference and element-wise check: the SoftmaxOp half of the tune
// path's verification (src/tune/ops.hpp). Mirrors the float64 host reference of the tests
// (tests/support/host_softmax.hpp): torch.softmax's special values and the same bound.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "core/cuda.hpp"
#include "gemmtune/softmax.hpp"
#include "tune/verify.hpp"

namespace gemmtune {

// Random x (uniform in [-8, 8) before the scale; every candidate computes s * x in fp32), the
// padding between cols and ld NaN (a kernel that reads it makes its row NaN), y poisoned.
// With `specials`, rows r with r % 8 in {1, 2, 3, 4, 5} (rows >= 8 only) get torch's special
// cases: 1 one NaN, 2 one +Inf, 3 all -Inf, 4 -Inf at every odd column, 5 one -Inf next to a
// large value (1e4 / scale: the rest of the row underflows to 0).
class SoftmaxOperands {
 public:
  SoftmaxOperands(const SoftmaxProblem& p, uint64_t seed, cudaStream_t s, bool specials = false);
  SoftmaxArgs args() const { return {x_.get(), y_.get()}; }
  void poison_outputs(cudaStream_t s) const;  // y (padding included): all bits set, NaN in every dtype
  const SoftmaxProblem& problem() const { return p_; }
  size_t input_bytes() const { return x_.bytes(); }
  size_t output_bytes() const { return y_.bytes(); }

 private:
  SoftmaxProblem p_;
  DeviceBuffer x_, y_;
};

// The bound on |y - ref| of one element, as tests/support/host_softmax.hpp's softmax_bound
// (a host test checks they agree): the output rounding (2^-8 bf16, 2^-11 fp16, 2^-24 fp32)
// plus twice the fp32 arithmetic's error, eps * (8 + 2 (|s x| + |M|) + 4 sqrt(cols)), relative
// to |ref|, plus one subnormal ulp of the output.
__host__ __device__ inline double softmax_elem_bound(int out_bits_u, int64_t cols, double ref, double sx, double m) {
  // out_bits_u: -log2 of the output's unit roundoff (8 bf16, 11 fp16, 24 fp32).
  const double eps = 5.9604644775390625e-08;  // 2^-24
  const double u_out = out_bits_u == 8 ? 0.00390625 : out_bits_u == 11 ? 0.00048828125 : eps;
  const double abs_floor = out_bits_u == 8 ? 9.183549615799121e-41    // 2^-133
                           : out_bits_u == 11 ? 5.9604644775390625e-08  // 2^-24
                                              : 5.605193857299268e-45;  // 2^-147
  const double compute = eps * (8 + 2 * (fabs(sx) + fabs(m)) + 4 * sqrt(double(cols)));
  return (u_out + 2 * compute) * fabs(ref) + abs_floor;
}
int softmax_out_bits(DType out);  // 8, 11 or 24

// ref[rows * cols] (packed fp32) = softmax(scale * x), computed per row in float64 on the GPU
// with torch's special values (NaN rows as in tests/support/host_softmax.hpp); row_max[rows]
// (float64) gets M of each row (NaN ignored) for the bound.
void reference_softmax(const SoftmaxProblem& p, const void* x, float* ref, double* row_max, cudaStream_t s);

// Compares y (p.out, rows * ld) with ref: a NaN reference needs NaN; a finite one a finite value
// within softmax_elem_bound; the padding between cols and ld must still hold the poison (all
// bits set). Synchronizes `s`. rel_err = ||y - ref|| / ||ref|| over the finite reference.
CheckResult compare_softmax(const SoftmaxProblem& p, const void* x, const void* y, const float* ref,
                            const double* row_max, cudaStream_t s);

}  // namespace gemmtune
