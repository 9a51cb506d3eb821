// The GPU reference GEMM against a float64 host GEMM, and compare() accepting a correct D and
// rejecting a perturbed, NaN or poisoned one. Every test skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"
#include "tune/verify.hpp"
#include "support/gpu.hpp"

using namespace gemmtune;

namespace {

struct DtypeConfig {
  DType a, b, d;
  bool tf32;
  ScaleMode scale;
};
const DtypeConfig kDtypes[] = {
    {DType::bf16, DType::bf16, DType::bf16, false, ScaleMode::none},
    {DType::fp16, DType::fp16, DType::fp16, false, ScaleMode::none},
    {DType::bf16, DType::bf16, DType::fp32, false, ScaleMode::none},
    {DType::fp32, DType::fp32, DType::fp32, false, ScaleMode::none},
    {DType::fp32, DType::fp32, DType::fp32, true, ScaleMode::none},
    {DType::e4m3, DType::e4m3, DType::bf16, false, ScaleMode::tensorwise},
    {DType::e4m3, DType::e5m2, DType::fp16, false, ScaleMode::rowwise},
    {DType::e5m2, DType::e4m3, DType::fp32, false, ScaleMode::none},
};

struct Epilogue {
  float alpha, beta;
  bool bias;
  Activation act;
};
const Epilogue kEpilogues[] = {
    {1.0f, 0.0f, false, Activation::none},      {0.75f, 0.5f, false, Activation::none},
    {1.0f, 0.0f, true, Activation::none},       {1.0f, 0.0f, false, Activation::relu},
    {1.0f, 0.0f, false, Activation::gelu_tanh}, {1.0f, 0.0f, false, Activation::silu},
    {1.5f, -1.0f, true, Activation::gelu_tanh}, {-2.0f, 1.0f, true, Activation::relu},
};

const int64_t kSizes[] = {1, 7, 64, 129, 300};

// An odd leading dimension larger than the packed one.
int64_t odd_ld(int64_t inner) { return inner + (inner % 2 == 0 ? 3 : 2); }

GemmProblem make(int64_t m, int64_t n, int64_t k, const DtypeConfig& t, Layout la, Layout lb, Layout ld,
                 const Epilogue& e, bool padded, Layout lc = Layout::row) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = {t.a, la, padded ? odd_ld(la == Layout::row ? k : m) : 0};
  p.b = {t.b, lb, padded ? odd_ld(lb == Layout::row ? n : k) : 0};
  p.d = {t.d, ld, padded ? odd_ld(ld == Layout::row ? n : m) : 0};
  p.c = {t.d, lc, padded ? odd_ld(lc == Layout::row ? n : m) + 2 : 0};
  p.tf32 = t.tf32;
  p.scale = t.scale;
  p.alpha = e.alpha, p.beta = e.beta, p.bias = e.bias, p.act = e.act;
  return p;
}

// Every layout combination x every dtype configuration; sizes, epilogues and padding vary
// with the case index so that all of them occur, in many combinations.
std::vector<GemmProblem> cases() {
  std::vector<GemmProblem> out;
  int i = 0;
  for (const DtypeConfig& t : kDtypes)
    for (int lay = 0; lay < 8; ++lay, ++i) {
      const Layout la = (lay & 1) ? Layout::col : Layout::row, lb = (lay & 2) ? Layout::col : Layout::row,
                   ld = (lay & 4) ? Layout::col : Layout::row;
      out.push_back(make(kSizes[(i * 3) % 5], kSizes[(i * 7 + 1) % 5], kSizes[(i * 2 + i / 5) % 5], t, la, lb, ld,
                         kEpilogues[(i + i / 8) % 8], i % 3 != 0, (i % 4 < 2) ? Layout::row : Layout::col));
    }
  return out;
}

Layout flip(Layout l) { return l == Layout::row ? Layout::col : Layout::row; }

std::vector<double> download_ref(const GemmProblem& p, const DeviceBuffer& ref) {
  std::vector<float> f(size_t(p.m * p.n));
  GT_CUDA(cudaMemcpy(f.data(), ref.get(), f.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return std::vector<double>(f.begin(), f.end());
}

// GPU reference vs. float64 host GEMM, within fp32-output tolerances for the same inputs.
void check_reference(const GemmProblem& p, uint64_t seed) {
  SCOPED_TRACE(p.str() + " alpha=" + std::to_string(p.alpha) + " beta=" + std::to_string(p.beta) +
               " bias=" + std::to_string(p.bias) + " act=" + to_string(p.act) + " scale=" + to_string(p.scale));
  Stream s;
  OperandSet ops(p, seed, s.get());
  DeviceBuffer ref(size_t(p.m * p.n) * sizeof(float));
  reference_gemm(p, ops.args(), ref.as<float>(), s.get());
  s.sync();
  const auto gpu = download_ref(p, ref);
  const auto exact = host::host_gemm(p, host::download(p, ops.args()));
  GemmProblem p32 = p;
  p32.d.dtype = DType::fp32;
  p32.tf32 = false;  // the reference computes in full fp32 whatever the candidates may do
  const CheckResult r = host::host_compare(p32, gpu, exact, tolerance_for(p32));
  EXPECT_TRUE(r.ok) << r.reason;
}

}  // namespace

TEST(Reference, MatchesFloat64HostAcrossLayoutsDtypesEpilogues) {
  REQUIRE_GPU();
  const auto all = cases();
  for (size_t i = 0; i < all.size(); ++i) check_reference(all[i], 1000 + i);
}

TEST(Reference, MatchesFloat64HostForEverySizeTriple) {
  REQUIRE_GPU();
  int i = 0;
  for (int64_t m : kSizes)
    for (int64_t n : kSizes)
      for (int64_t k : kSizes) {
        ++i;
        const DtypeConfig& t = kDtypes[i % 8];
        const Epilogue& e = kEpilogues[(i * 5) % 8];
        check_reference(make(m, n, k, t, (i & 1) ? Layout::col : Layout::row, (i & 2) ? Layout::row : Layout::col,
                             (i & 4) ? Layout::col : Layout::row, e, (i % 2) == 0, flip((i & 8) ? Layout::col : Layout::row)),
                        7 * i + 1);
      }
}

TEST(Reference, MatchesFloat64HostOnALargerProblem) {
  REQUIRE_GPU();
  // Many tiles, a partial last tile in every dimension, and a long k loop.
  check_reference(make(515, 259, 2051, kDtypes[0], Layout::row, Layout::col, Layout::row, kEpilogues[6], true), 42);
  check_reference(make(259, 515, 1031, kDtypes[6], Layout::col, Layout::row, Layout::col, kEpilogues[7], false), 43);
}

TEST(Reference, OperandsAreDeterministicFiniteAndInRange) {
  REQUIRE_GPU();
  GemmProblem p = make(129, 64, 300, kDtypes[0], Layout::row, Layout::col, Layout::row, kEpilogues[6], true);
  Stream s;
  OperandSet x(p, 5, s.get()), y(p, 5, s.get()), z(p, 6, s.get());
  s.sync();
  const auto hx = host::download(p, x.args()), hy = host::download(p, y.args()), hz = host::download(p, z.args());
  EXPECT_EQ(hx.a, hy.a);
  EXPECT_EQ(hx.b, hy.b);
  EXPECT_EQ(hx.c, hy.c);
  EXPECT_NE(hx.a, hz.a);
  const double range = 1.0 / std::sqrt(std::sqrt(300.0));
  int zeros = 0;
  for (int64_t i = 0; i < p.elems_a(); ++i) {  // padding included
    const double v = host::load(p.a.dtype, hx.a.data(), i);
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_LE(std::fabs(v), range * 1.01);
    zeros += v == 0;
  }
  EXPECT_LT(zeros, p.elems_a() / 100);
  EXPECT_EQ(x.input_bytes(), hx.a.size() + hx.b.size() + hx.c.size() + hx.bias.size());
  // D starts poisoned.
  std::vector<uint8_t> d(size_t(p.elems_d()) * size_of(p.d.dtype));
  GT_CUDA(cudaMemcpy(d.data(), x.args().d, d.size(), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < p.elems_d(); ++i) ASSERT_TRUE(std::isnan(host::load(p.d.dtype, d.data(), i)));
  // Scales: positive, in [0.5, 2).
  GemmProblem q = make(7, 64, 64, kDtypes[6], Layout::row, Layout::col, Layout::row, kEpilogues[0], false);
  OperandSet w(q, 9, s.get());
  s.sync();
  const auto hw = host::download(q, w.args());
  ASSERT_EQ(hw.sa.size(), 7u);
  ASSERT_EQ(hw.sb.size(), 64u);
  for (float v : hw.sa) EXPECT_TRUE(v >= 0.5f && v < 2.0f) << v;
  for (float v : hw.sb) EXPECT_TRUE(v >= 0.5f && v < 2.0f) << v;
}

TEST(Compare, AcceptsTheReferenceInDsDtypeAndRejectsCorruption) {
  REQUIRE_GPU();
  const auto all = cases();
  for (size_t i = 0; i < all.size(); ++i) {
    const GemmProblem& p = all[i];
    SCOPED_TRACE(p.str());
    Stream s;
    OperandSet ops(p, 2000 + i, s.get());
    const GemmArgs g = ops.args();
    DeviceBuffer ref(size_t(p.m * p.n) * sizeof(float));
    reference_gemm(p, g, ref.as<float>(), s.get());
    s.sync();
    const auto r = download_ref(p, ref);
    auto upload = [&](const std::vector<double>& values) {
      const auto bytes = host::pack_d(p, values);
      GT_CUDA(cudaMemcpy(g.d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    };

    // The reference rounded to D's dtype passes.
    upload(r);
    CheckResult res = compare(p, g.d, ref.as<float>(), s.get());
    EXPECT_TRUE(res.ok) << res.reason;
    EXPECT_EQ(res.bad, 0);
    EXPECT_EQ(res.nonfinite, 0);
    EXPECT_TRUE(res.reason.empty());

    // One element off by a large amount fails, and is located.
    const int64_t row = p.m / 2, col = p.n - 1, at = row * p.n + col;
    auto bad = r;
    bad[size_t(at)] += 1.0 + 2 * std::fabs(r[size_t(at)]);
    upload(bad);
    res = compare(p, g.d, ref.as<float>(), s.get());
    EXPECT_FALSE(res.ok);
    EXPECT_EQ(res.bad, 1);
    EXPECT_EQ(res.nonfinite, 0);
    EXPECT_GT(res.worst_ratio, 1.0);
    EXPECT_NE(res.reason.find("row " + std::to_string(row) + ", col " + std::to_string(col)), std::string::npos)
        << res.reason;

    // One NaN fails.
    bad = r;
    bad[size_t(at)] = std::nan("");
    upload(bad);
    res = compare(p, g.d, ref.as<float>(), s.get());
    EXPECT_FALSE(res.ok);
    EXPECT_EQ(res.nonfinite, 1);
    EXPECT_EQ(res.bad, 1);

    // D left as poisoned fails on every element.
    ops.poison_d(s.get());
    res = compare(p, g.d, ref.as<float>(), s.get());
    EXPECT_FALSE(res.ok);
    EXPECT_EQ(res.nonfinite, p.m * p.n);
    EXPECT_EQ(res.bad, p.m * p.n);
    EXPECT_FALSE(res.reason.empty());
  }
}

TEST(Compare, AgreesWithHostCompareOnNoisyOutput) {
  REQUIRE_GPU();
  // D = reference + noise of about the bf16 bound: the GPU and host comparisons must count
  // the same elements over bound.
  GemmProblem p = make(129, 300, 64, kDtypes[2], Layout::row, Layout::col, Layout::col, kEpilogues[0], true);
  Stream s;
  OperandSet ops(p, 77, s.get());
  DeviceBuffer ref(size_t(p.m * p.n) * sizeof(float));
  reference_gemm(p, ops.args(), ref.as<float>(), s.get());
  s.sync();
  const auto r = download_ref(p, ref);
  const Tolerance tol = tolerance_for(p);
  double rms = 0;
  for (double v : r) rms += v * v;
  rms = std::sqrt(rms / double(r.size()));
  std::vector<double> d(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    const double bound = tol.elem_rel * std::fabs(r[i]) + tol.elem_abs * rms;
    d[i] = double(float(r[i] + bound * ((i % 7 == 0) ? 1.5 : (i % 3 == 0) ? -0.5 : 0.25)));
  }
  const auto bytes = host::pack_d(p, d);
  GT_CUDA(cudaMemcpy(ops.args().d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  const CheckResult gpu = compare(p, ops.args().d, ref.as<float>(), s.get());
  const CheckResult cpu = host::host_compare(p, d, r);
  EXPECT_FALSE(gpu.ok);
  EXPECT_EQ(gpu.bad, cpu.bad);
  EXPECT_NEAR(gpu.rel_err, cpu.rel_err, 1e-6 * cpu.rel_err);
  EXPECT_NEAR(gpu.worst_ratio, cpu.worst_ratio, 1e-6 * cpu.worst_ratio);
}
