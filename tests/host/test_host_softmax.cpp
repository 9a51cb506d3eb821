// The float64 softmax reference: hand-computed rows, torch.softmax's special values, the scale
// in fp32, and the comparison's bound by output dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support/host_softmax.hpp"

using namespace gemmtune;
using namespace gemmtune::host;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> sm(std::vector<double> x) {
  std::vector<double> y(x.size());
  softmax_row(x.data(), int64_t(x.size()), y.data());
  return y;
}
bool all_nan(const std::vector<double>& y) {
  for (double v : y)
    if (!std::isnan(v)) return false;
  return true;
}

// A fp32 problem with the given rows (each `cols` long), packed, as host bytes.
std::vector<uint8_t> bytes_of(const SoftmaxProblem& p, const std::vector<double>& values) {
  std::vector<uint8_t> b(size_t(p.elems()) * size_of(p.in), 0);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c) store(p.in, b.data(), r * p.row_stride() + c, values[size_t(r * p.cols + c)]);
  return b;
}
}  // namespace

TEST(HostSoftmax, HandComputedRows) {
  auto y = sm({0, 0});
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], 0.5);
  y = sm({1, 2, 3});
  const double s = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_DOUBLE_EQ(y[0], std::exp(-2.0) / s);
  EXPECT_DOUBLE_EQ(y[1], std::exp(-1.0) / s);
  EXPECT_DOUBLE_EQ(y[2], 1.0 / s);
  y = sm({42});
  EXPECT_DOUBLE_EQ(y[0], 1.0);
  // Huge finite values do not overflow: x - M <= 0.
  y = sm({1e300, 1e300});
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  y = sm({-1e300, 0});
  EXPECT_DOUBLE_EQ(y[0], 0.0);
  EXPECT_DOUBLE_EQ(y[1], 1.0);
}

TEST(HostSoftmax, TorchSpecialValues) {
  // pytorch/pytorch#6864: -Inf among finite values is an exact 0.
  auto y = sm({0, -kInf});
  EXPECT_EQ(y[0], 1.0);
  EXPECT_EQ(y[1], 0.0);
  y = sm({-kInf, 0, -kInf});
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 1.0);
  EXPECT_EQ(y[2], 0.0);
  // A +Inf anywhere: every output NaN (inf - inf enters the sum), as in #6864.
  EXPECT_TRUE(all_nan(sm({kInf, 1})));
  EXPECT_TRUE(all_nan(sm({0, kInf})));
  EXPECT_TRUE(all_nan(sm({0, kInf, 0})));
  EXPECT_TRUE(all_nan(sm({-kInf, 0, kInf})));
  EXPECT_TRUE(all_nan(sm({kInf, kInf})));
  // All -Inf: NaN (#25110, #106545).
  EXPECT_TRUE(all_nan(sm({-kInf})));
  EXPECT_TRUE(all_nan(sm({-kInf, -kInf, -kInf})));
  // Any NaN: NaN throughout, wherever it is.
  EXPECT_TRUE(all_nan(sm({kNaN, 1, 2})));
  EXPECT_TRUE(all_nan(sm({1, 2, kNaN})));
  EXPECT_TRUE(all_nan(sm({kNaN})));
  EXPECT_TRUE(all_nan(sm({-kInf, kNaN})));
}

TEST(HostSoftmax, ScaleIsAnFp32ProductBeforeTheSoftmax) {
  auto p = SoftmaxProblem::make(4, 2, DType::fp32);
  p.out = DType::fp32;
  p.scale = -2.0f;
  // Row 0: scale * [1, 2] = [-2, -4]. Row 1: scale * [+inf, 0] = [-inf, 0] -> [0, 1].
  // Row 2: 3e38 * -2 overflows fp32 to -inf, as on the device -> [0, 1] with 0 beside it.
  // Row 3: scale * [-inf, -inf] = [+inf, +inf] -> NaN.
  const auto x = bytes_of(p, {1, 2, kInf, 0, 3e38, 0, -kInf, -kInf});
  const auto r = host_softmax(p, x.data());
  EXPECT_DOUBLE_EQ(r.y[0], 1.0 / (1.0 + std::exp(-2.0)));
  EXPECT_DOUBLE_EQ(r.y[1], std::exp(-2.0) / (1.0 + std::exp(-2.0)));
  EXPECT_EQ(r.y[2], 0.0);
  EXPECT_EQ(r.y[3], 1.0);
  EXPECT_EQ(r.y[4], 0.0);
  EXPECT_EQ(r.y[5], 1.0);
  EXPECT_TRUE(std::isnan(r.y[6]) && std::isnan(r.y[7]));
  EXPECT_EQ(r.row_max[0], -2.0);
  // Scale 0 makes an Inf NaN (0 * inf): the row is NaN.
  p.scale = 0.0f;
  const auto r0 = host_softmax(p, x.data());
  EXPECT_TRUE(std::isnan(r0.y[2]) && std::isnan(r0.y[3]));
  EXPECT_DOUBLE_EQ(r0.y[0], 0.5);  // softmax of zeros is uniform
}

TEST(HostSoftmax, StridedRowsSkipThePadding) {
  auto p = SoftmaxProblem::make(2, 3, DType::bf16);
  p.ld = 8;
  std::vector<uint8_t> x(size_t(p.elems()) * 2, 0xff);  // padding is NaN bits: must not be read
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) store(p.in, x.data(), r * 8 + c, double(c));
  const auto ref = host_softmax(p, x.data());
  for (double v : ref.y) EXPECT_FALSE(std::isnan(v));
  EXPECT_DOUBLE_EQ(ref.y[3], ref.y[0]);
}

TEST(HostSoftmax, CompareBoundsByOutputDtype) {
  for (DType out : {DType::bf16, DType::fp16, DType::fp32}) {
    auto p = SoftmaxProblem::make(1, 4, DType::fp32);
    p.out = out;
    const auto x = bytes_of(p, {0.5, -1.25, 3, -kInf});
    const auto ref = host_softmax(p, x.data());
    // The reference rounded to the output dtype passes.
    std::vector<uint8_t> y(size_t(p.elems()) * size_of(out));
    for (int c = 0; c < 4; ++c) store(out, y.data(), c, ref.y[size_t(c)]);
    auto res = softmax_compare(p, x.data(), y.data(), ref);
    EXPECT_TRUE(res.ok) << to_string(out) << ": " << res.reason;
    // Four output ulps away does not (fp32: 100 ulps, its bound being dominated by the fp32
    // arithmetic, about 28 ulps here).
    const double off = out == DType::bf16 ? 4 * std::ldexp(1.0, -7) : out == DType::fp16 ? 4 * std::ldexp(1.0, -10) : 100 * std::ldexp(1.0, -23);
    store(out, y.data(), 2, ref.y[2] * (1 + off));
    res = softmax_compare(p, x.data(), y.data(), ref);
    EXPECT_FALSE(res.ok) << to_string(out);
    EXPECT_EQ(res.bad, 1);
    EXPECT_NE(res.reason.find("col 2"), std::string::npos) << res.reason;
    // The -Inf entry must be 0 (a tiny value is within the subnormal floor only for fp16).
    store(out, y.data(), 2, ref.y[2]);
    store(out, y.data(), 3, 0.01);
    EXPECT_FALSE(softmax_compare(p, x.data(), y.data(), ref).ok);
    // NaN where the reference is finite fails; a finite value where it is NaN fails.
    store(out, y.data(), 3, kNaN);
    EXPECT_FALSE(softmax_compare(p, x.data(), y.data(), ref).ok);
  }
  auto p = SoftmaxProblem::make(1, 2, DType::fp32);
  p.out = DType::fp32;
  const auto x = bytes_of(p, {kInf, 1});
  const auto ref = host_softmax(p, x.data());
  std::vector<uint8_t> y(8);
  store(p.out, y.data(), 0, kNaN);
  store(p.out, y.data(), 1, kNaN);
  EXPECT_TRUE(softmax_compare(p, x.data(), y.data(), ref).ok);
  store(p.out, y.data(), 1, 0.0);
  EXPECT_FALSE(softmax_compare(p, x.data(), y.data(), ref).ok);
}
