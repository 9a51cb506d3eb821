// Test support: a float64 host softmax with torch.softmax's special-value semantics, and an
// element-wise comparison whose bound depends on the output dtype. Header-only, host code.
//
// Special values, as torch.softmax computes them (max M, then S = sum exp(x - M), then
// exp(x - M) / S; IEEE arithmetic decides the rest). Sources read (search tool, PyTorch issues):
//   pytorch/pytorch#6864   F.softmax([0, inf]) = [nan, nan]; [0, inf, 0] and [-inf, 0, inf] are
//                          all-NaN: one +Inf makes M = +Inf, exp(inf - inf) = NaN enters S.
//                          (So softmax([inf, 1]) is [nan, nan], not [nan, 0]: every output is
//                          divided by S = NaN.) [0, -inf] = [1, 0]; [-inf, 0, -inf] = [0, 1, 0].
//   pytorch/pytorch#25110  a row of all -Inf gives all NaN (M = -Inf, exp(-inf - -inf) = NaN;
//                          maintainers: "0/0 is NaN ... expected"); #106545 shows the same on CPU
//                          and CUDA and the proposal to return uniform was not adopted.
// The cases, per row (after scaling):
//   any NaN                            -> every output NaN (exp(NaN - M) = NaN enters S)
//   any +Inf                           -> every output NaN (inf - inf = NaN enters S)
//   every element -Inf                 -> every output NaN (-inf - -inf = NaN)
//   some -Inf, the others finite       -> 0 exactly at the -Inf entries, softmax of the rest
//   finite                             -> the usual softmax; no overflow since x - M <= 0
// The scale: s * x is rounded to fp32 (the kernels' arithmetic) before the float64 softmax, so
// that s = 0 turns +-Inf into NaN and s < 0 swaps +Inf and -Inf exactly as on the device.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gemmtune/softmax.hpp"
#include "host_reference.hpp"

namespace gemmtune::host {

// s * x as the kernels form it: an fp32 product of the fp32 scale and the input's value.
inline double scaled(float scale, double x) { return double(scale * float(x)); }

// Softmax of one row of already-scaled values, float64, torch semantics (see above).
inline void softmax_row(const double* x, int64_t n, double* y, double* row_max = nullptr) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) nan = true;
    else m = std::max(m, x[i]);
  }
  if (row_max) *row_max = m;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);  // NaN for NaN, +Inf and all--Inf rows
  if (nan) s = std::numeric_limits<double>::quiet_NaN();    // (already NaN; stated for clarity)
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m) / s;
}

struct SoftmaxRef {
  std::vector<double> y;        // packed [rows, cols]
  std::vector<double> row_max;  // M per row (of the scaled values; NaN ignored)
};

// Reference for host bytes `x` laid out as the problem says (rows * ld elements of p.in).
inline SoftmaxRef host_softmax(const SoftmaxProblem& p, const void* x) {
  SoftmaxRef r;
  r.y.resize(size_t(p.rows * p.cols));
  r.row_max.resize(size_t(p.rows));
  std::vector<double> row(size_t(p.cols));
  for (int64_t i = 0; i < p.rows; ++i) {
    for (int64_t c = 0; c < p.cols; ++c) row[size_t(c)] = scaled(p.scale, load(p.in, x, i * p.row_stride() + c));
    softmax_row(row.data(), p.cols, &r.y[size_t(i * p.cols)], &r.row_max[size_t(i)]);
  }
  return r;
}

// The bound on |y - ref| for one element. The kernels compute in fp32 and round once to the
// output dtype:
//   u_out            the rounding to the output (relative, round to nearest: 2^-8 bf16,
//                    2^-11 fp16, 2^-24 fp32)
//   fp32 arithmetic  eps = 2^-24 times: 8 (expf's 2 ulp, the reciprocal and the product, the
//                    online rescales), 2 * (|s x| + |M|) (x - M rounded in fp32 moves exp by
//                    that relative amount), 4 * sqrt(cols) (the sum S: per-thread sequential
//                    sums and tree reductions, random-order rounding)
//   abs              one ulp of the output's subnormals (fp32: four), for results near underflow
inline double softmax_bound(DType out, int64_t cols, double ref, double sx, double m) {
  const double eps = std::ldexp(1.0, -24);
  double u_out = 0, abs_floor = 0;
  switch (out) {
    case DType::bf16: u_out = std::ldexp(1.0, -8), abs_floor = std::ldexp(1.0, -133); break;
    case DType::fp16: u_out = std::ldexp(1.0, -11), abs_floor = std::ldexp(1.0, -24); break;
    default: u_out = eps, abs_floor = std::ldexp(1.0, -147); break;
  }
  const double compute = eps * (8 + 2 * (std::fabs(sx) + std::fabs(m)) + 4 * std::sqrt(double(cols)));
  return (u_out + 2 * compute) * std::fabs(ref) + abs_floor;
}

struct SoftmaxCheck {
  bool ok = true;
  int64_t bad = 0;         // elements over their bound, or NaN where the reference is not
  double worst_ratio = 0;  // max |y - ref| / bound
  std::string reason;      // empty when ok
};

// Compares host bytes `y` (rows * ld elements of p.out) with the reference; `x` gives the bound
// its |s x| term. A NaN reference needs a NaN; a finite one a finite value within the bound.
inline SoftmaxCheck softmax_compare(const SoftmaxProblem& p, const void* x, const void* y, const SoftmaxRef& ref) {
  SoftmaxCheck res;
  int64_t worst_at = -1;
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c) {
      const double want = ref.y[size_t(r * p.cols + c)];
      const double got = load(p.out, y, r * p.row_stride() + c);
      double ratio;
      if (std::isnan(want)) {
        ratio = std::isnan(got) ? 0.0 : INFINITY;
      } else if (!std::isfinite(got)) {
        ratio = INFINITY;
      } else {
        const double diff = std::fabs(got - want);
        const double sx = scaled(p.scale, load(p.in, x, r * p.row_stride() + c));
        const double bound = softmax_bound(p.out, p.cols, want, std::isfinite(sx) ? sx : 0.0, ref.row_max[size_t(r)]);
        ratio = diff == 0 ? 0.0 : diff / bound;
      }
      if (ratio > 1) ++res.bad;
      if (ratio > res.worst_ratio) res.worst_ratio = ratio, worst_at = r * p.cols + c;
    }
  res.ok = res.bad == 0;
  if (!res.ok) {
    const int64_t r = worst_at / p.cols, c = worst_at % p.cols;
    res.reason = std::to_string(res.bad) + " of " + std::to_string(p.rows * p.cols) + " elements over bound (worst " +
                 std::to_string(res.worst_ratio) + "x at row " + std::to_string(r) + ", col " + std::to_string(c) +
                 ": got " + std::to_string(load(p.out, y, r * p.row_stride() + c)) + ", want " +
                 std::to_string(ref.y[size_t(worst_at)]) + ")";
  }
  return res;
}

}  // namespace gemmtune::host
