// Verification tolerances and the host reference's exact dtype conversions (no GPU needed).
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "support/host_reference.hpp"
#include "tune/verify.hpp"

using namespace gemmtune;
using namespace gemmtune::host;

namespace {

GemmProblem problem(DType in, DType out, int64_t k = 4096) {
  GemmProblem p = GemmProblem::linear(1024, 1024, k, in, out);
  return p;
}

// CUDA's own host-side conversions, as the cross-check of ours.
double cuda_e4m3(uint8_t b) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3))); }
double cuda_e5m2(uint8_t b) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E5M2))); }
double cuda_fp16(uint16_t b) {
  __half_raw r;
  r.x = b;
  return __half2float(__half(r));
}
double cuda_bf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t bits_of(__nv_bfloat16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t bits_of(__half h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

// ---- tolerances ---------------------------------------------------------------------------

TEST(Tolerance, OrderedByOutputPrecision) {
  const Tolerance f32 = tolerance_for(problem(DType::bf16, DType::fp32));
  const Tolerance f16 = tolerance_for(problem(DType::fp16, DType::fp16));
  const Tolerance b16 = tolerance_for(problem(DType::bf16, DType::bf16));
  EXPECT_LT(f32.rel_norm, f16.rel_norm);
  EXPECT_LT(f16.rel_norm, b16.rel_norm);
  EXPECT_LT(f32.elem_rel, f16.elem_rel);
  EXPECT_LT(f16.elem_rel, b16.elem_rel);
  EXPECT_LT(f32.elem_abs, f16.elem_abs);
  EXPECT_LT(f16.elem_abs, b16.elem_abs);
  for (const Tolerance& t : {f32, f16, b16}) {
    EXPECT_GT(t.rel_norm, 0);
    EXPECT_GT(t.elem_rel, 0);
    EXPECT_GT(t.elem_abs, 0);
    EXPECT_LT(t.rel_norm, 0.05);
  }
  // The magnitudes the bounds are meant to have.
  EXPECT_GT(b16.rel_norm, 5e-3);   // bf16 rounding: u = 2^-8
  EXPECT_LT(b16.rel_norm, 2e-2);
  EXPECT_GE(b16.elem_rel, 0x1p-7);  // at least one bf16 ulp
  EXPECT_GE(f32.rel_norm, 1e-5);    // fp32 out, 16-bit inputs: accumulation only
  EXPECT_LE(f32.rel_norm, 1e-3);
}

TEST(Tolerance, Tf32IsLooserThanFp32) {
  GemmProblem p = problem(DType::fp32, DType::fp32);
  const Tolerance exact = tolerance_for(p);
  p.tf32 = true;
  const Tolerance tf32 = tolerance_for(p);
  EXPECT_GT(tf32.rel_norm, 10 * exact.rel_norm);
  EXPECT_GT(tf32.elem_abs, 10 * exact.elem_abs);
  EXPECT_GT(tf32.rel_norm, 1e-3);
  EXPECT_LT(tf32.rel_norm, 1e-2);
}

TEST(Tolerance, Fp8InputsLikeTheOutputDtypePlusReducedAccumulation) {
  // The reference reads the same fp8 values, so only output rounding and accumulation remain;
  // Hopper's fp8 MMA accumulates with ~14 bits, which adds a term that matters for fp32 out
  // but stays small beside bf16's rounding.
  const Tolerance fp8_bf16 = tolerance_for(problem(DType::e4m3, DType::bf16));
  const Tolerance bf16 = tolerance_for(problem(DType::bf16, DType::bf16));
  EXPECT_DOUBLE_EQ(fp8_bf16.elem_rel, bf16.elem_rel);
  EXPECT_GT(fp8_bf16.rel_norm, bf16.rel_norm);
  EXPECT_LT(fp8_bf16.rel_norm, 1.05 * bf16.rel_norm);
  const Tolerance fp8_fp32 = tolerance_for(problem(DType::e4m3, DType::fp32));
  const Tolerance bf16_fp32 = tolerance_for(problem(DType::bf16, DType::fp32));
  EXPECT_GT(fp8_fp32.elem_abs, 2 * bf16_fp32.elem_abs);
  EXPECT_LT(fp8_fp32.rel_norm, 1e-3);
}

TEST(Tolerance, GrowsWithKAndSmoothActivations) {
  const Tolerance small = tolerance_for(problem(DType::bf16, DType::fp32, 64));
  const Tolerance large = tolerance_for(problem(DType::bf16, DType::fp32, 65536));
  EXPECT_LT(small.rel_norm, large.rel_norm);
  EXPECT_LT(small.elem_abs, large.elem_abs);
  GemmProblem p = problem(DType::bf16, DType::bf16);
  const Tolerance none = tolerance_for(p);
  p.act = Activation::relu;
  EXPECT_DOUBLE_EQ(tolerance_for(p).rel_norm, none.rel_norm);  // relu is exact
  p.act = Activation::gelu_tanh;
  EXPECT_GT(tolerance_for(p).rel_norm, none.rel_norm);
  p.act = Activation::silu;
  EXPECT_GT(tolerance_for(p).elem_rel, none.elem_rel);
}

// ---- conversions --------------------------------------------------------------------------

TEST(HostConversions, E4m3EveryPattern) {
  std::set<double> positive;
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    const double v = decode_e4m3(uint8_t(b));
    SCOPED_TRACE(b);
    EXPECT_TRUE(same(v, cuda_e4m3(uint8_t(b))));
    if (std::isnan(v)) {
      ++nans;
      EXPECT_EQ(b & 0x7f, 0x7f);  // S.1111.111 only
      continue;
    }
    EXPECT_FALSE(std::isinf(v));  // e4m3fn has no infinities
    EXPECT_EQ(std::signbit(v), b >= 0x80);
    if (b > 0 && b < 0x80) positive.insert(v);
    // Documented value set: subnormals j * 2^-9, normals (1 + j/8) * 2^(e - 7).
    const int e = (b >> 3) & 15, j = b & 7;
    const double expect = e == 0 ? j * 0x1p-9 : (1 + j / 8.0) * std::ldexp(1.0, e - 7);
    EXPECT_EQ(std::fabs(v), expect);
    EXPECT_EQ(encode_e4m3(v), uint8_t(b));  // round trip, incl. -0
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(positive.size(), 126u);  // 0x01 .. 0x7e, all distinct
  EXPECT_EQ(*positive.begin(), 0x1p-9);
  EXPECT_EQ(*positive.rbegin(), 448.0);
  EXPECT_EQ(decode_e4m3(0x08), 0x1p-6);  // smallest normal
  EXPECT_EQ(decode_e4m3(0x38), 1.0);
  // Saturation and rounding.
  EXPECT_EQ(encode_e4m3(1e6), 0x7e);
  EXPECT_EQ(encode_e4m3(-1e6), 0xfe);
  EXPECT_EQ(encode_e4m3(1.0 + 1.0 / 16), 0x38);  // tie -> even mantissa 0
  EXPECT_EQ(encode_e4m3(1.0 + 3.0 / 16), 0x3a);  // tie -> even mantissa 2
  EXPECT_EQ(encode_e4m3(0x1p-10), 0x00);         // half the smallest subnormal: tie to 0
  EXPECT_EQ(encode_e4m3(0x1p-10 * 1.01), 0x01);
}

TEST(HostConversions, E5m2EveryPattern) {
  int nans = 0, infs = 0;
  for (int b = 0; b < 256; ++b) {
    const double v = decode_e5m2(uint8_t(b));
    SCOPED_TRACE(b);
    EXPECT_TRUE(same(v, cuda_e5m2(uint8_t(b))));
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    if (std::isinf(v)) {
      ++infs;
      EXPECT_EQ(encode_e5m2(v, false), uint8_t(b));
      continue;
    }
    EXPECT_EQ(encode_e5m2(v), uint8_t(b));
  }
  EXPECT_EQ(nans, 6);
  EXPECT_EQ(infs, 2);
  EXPECT_EQ(decode_e5m2(0x7b), 57344.0);
  EXPECT_EQ(decode_e5m2(0x01), 0x1p-16);
  EXPECT_EQ(encode_e5m2(1e9), 0x7b);          // saturating
  EXPECT_EQ(encode_e5m2(1e9, false), 0x7c);   // IEEE overflow -> Inf
}

TEST(HostConversions, Fp16AndBf16EveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double h = decode_fp16(uint16_t(b)), f = decode_bf16(uint16_t(b));
    ASSERT_TRUE(same(h, cuda_fp16(uint16_t(b)))) << b;
    ASSERT_TRUE(same(f, cuda_bf16(uint16_t(b)))) << b;
    if (!std::isnan(h)) {
      ASSERT_EQ(encode_fp16(h), b) << b;
    }
    if (!std::isnan(f)) {
      ASSERT_EQ(encode_bf16(f), b) << b;
    }
  }
  EXPECT_EQ(decode_fp16(0x7bff), 65504.0);
  EXPECT_EQ(decode_fp16(0x0001), 0x1p-24);
  EXPECT_TRUE(std::isnan(decode_bf16(0x7fc0)));
  EXPECT_TRUE(std::isnan(decode_fp16(0x7e00)));
}

TEST(HostConversions, Bf16Rounding) {
  EXPECT_EQ(encode_bf16(1.0), 0x3f80);
  EXPECT_EQ(encode_bf16(1.0 + 0x1p-8), 0x3f80);                 // tie -> even (down)
  EXPECT_EQ(encode_bf16(1.0 + 3 * 0x1p-8), 0x3f82);             // tie -> even (up)
  EXPECT_EQ(encode_bf16(1.0 + 0x1p-8 + 0x1p-20), 0x3f81);       // above the tie
  EXPECT_EQ(encode_bf16(-1.0 - 0x1p-7), 0xbf81);
  EXPECT_EQ(encode_bf16(3.5e38), 0x7f80);                      // overflow -> Inf
  EXPECT_EQ(encode_bf16(-0.0), 0x8000);
  // Agrees with CUDA's host conversions on random floats of all magnitudes.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    ASSERT_EQ(encode_bf16(x), bits_of(__float2bfloat16_rn(x))) << x;
    ASSERT_EQ(encode_fp16(x), bits_of(__float2half_rn(x))) << x;
    // fp8 over a range where the formats are interesting.
    const float y = std::ldexp(float(bits(rng) % 1000000) / 1000000.0f, int(bits(rng) % 30) - 18) * ((u & 1) ? -1 : 1);
    ASSERT_EQ(encode_e4m3(y), __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3)) << y;
    ASSERT_EQ(encode_e5m2(y), __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E5M2)) << y;
  }
}

// ---- host GEMM and compare ----------------------------------------------------------------

TEST(HostReference, SmallGemmWithEpilogue) {
  // A = [[1, 2], [3, 4]] row-major, B = [[5, 6], [7, 8]] column-major with ld 3.
  GemmProblem p;
  p.m = p.n = p.k = 2;
  p.a = {DType::fp32, Layout::row, 0};
  p.b = {DType::fp32, Layout::col, 3};
  p.c = p.d = {DType::fp32, Layout::row, 0};
  p.alpha = 2;
  p.beta = 0.5f;
  p.bias = true;
  p.act = Activation::relu;
  Operands o;
  auto put = [](std::vector<uint8_t>& v, std::initializer_list<float> xs) {
    v.resize(xs.size() * 4);
    std::memcpy(v.data(), xs.begin(), v.size());
  };
  put(o.a, {1, 2, 3, 4});
  put(o.b, {5, 7, -99, 6, 8, -99});  // col 0 = (5, 7), col 1 = (6, 8), padding -99
  put(o.c, {10, 20, 30, -400});
  put(o.bias, {1, -1});
  const auto d = host_gemm(p, o);
  // A @ B = [[19, 22], [43, 50]]; 2 * AB + 0.5 C + bias = [[44, 53], [102, -101]]; relu.
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0], 44);
  EXPECT_EQ(d[1], 53);
  EXPECT_EQ(d[2], 102);
  EXPECT_EQ(d[3], 0);
}

TEST(HostReference, CompareCatchesPerturbationsAndNaN) {
  GemmProblem p = problem(DType::bf16, DType::bf16, 256);
  p.m = 8;
  p.n = 16;
  std::vector<double> ref(size_t(p.m * p.n));
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::sin(double(i) + 0.5);
  // The reference rounded to bf16 passes.
  std::vector<double> d(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) d[i] = decode_bf16(encode_bf16(ref[i]));
  EXPECT_TRUE(host_compare(p, d, ref).ok);
  auto bad = d;
  bad[37] += 0.5;
  CheckResult r = host_compare(p, bad, ref);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.bad, 1);
  bad = d;
  bad[5] = std::numeric_limits<double>::quiet_NaN();
  r = host_compare(p, bad, ref);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.nonfinite, 1);
  EXPECT_EQ(r.bad, 1);
}

TEST(HostReference, PackUnpackRoundTrip) {
  GemmProblem p = problem(DType::bf16, DType::bf16, 16);
  p.m = 3;
  p.n = 5;
  p.d = {DType::fp16, Layout::col, 7};
  std::vector<double> v(15);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) - 7.25;
  const auto bytes = pack_d(p, v);
  EXPECT_EQ(bytes.size(), size_t(7 * 5 * 2));
  EXPECT_EQ(unpack_d(p, bytes), v);
}
