// GemmProblem: validation names the field, keys are stable, printing and parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"
#include "host/problems.hpp"

using namespace gemmtune;

using host_test::why;

TEST(Problem, LinearIsValidAndPacked) {
  auto p = GemmProblem::linear(16, 10240, 8192);
  EXPECT_EQ(why(p), "");
  EXPECT_EQ(p.lda(), 8192);  // A [m, k] row-major
  EXPECT_EQ(p.ldb(), 8192);  // B [k, n] col-major = W [n, k] row-major
  EXPECT_EQ(p.ldd(), 10240);
  EXPECT_EQ(p.elems_b(), 10240LL * 8192);
  EXPECT_EQ(p.elems_c(), 0);  // beta == 0: C not read
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 16 * 10240 * 8192);
}

TEST(Problem, Fp8LinearDefaultsToBf16OutAndTensorwise) {
  auto p = GemmProblem::linear(128, 256, 512, DType::e4m3);
  EXPECT_EQ(p.d.dtype, DType::bf16);
  EXPECT_EQ(p.scale, ScaleMode::tensorwise);
  EXPECT_EQ(why(p), "");
  EXPECT_EQ(p.scale_a_elems(), 1);
  p.scale = ScaleMode::rowwise;
  EXPECT_EQ(p.scale_a_elems(), 128);
  EXPECT_EQ(p.scale_b_elems(), 256);
}

TEST(Problem, EachBadFieldIsNamed) {
  auto base = GemmProblem::linear(64, 64, 64);
  struct Case {
    std::function<void(GemmProblem&)> edit;
    std::string field;
  } cases[] = {
      {[](auto& p) { p.m = 0; }, "problem.m"},
      {[](auto& p) { p.n = -3; }, "problem.n"},
      {[](auto& p) { p.k = 0; }, "problem.k"},
      {[](auto& p) { p.a.ld = 63; }, "problem.lda"},
      {[](auto& p) { p.a.ld = -1; }, "problem.lda"},
      {[](auto& p) { p.b.ld = 10; }, "problem.ldb"},
      {[](auto& p) { p.d.ld = 1; }, "problem.ldd"},
      {[](auto& p) { p.beta = 1, p.c.ld = 2; }, "problem.ldc"},
      {[](auto& p) { p.b.dtype = DType::fp16; }, "problem.b.dtype"},
      {[](auto& p) { p.a.dtype = p.b.dtype = DType::e5m2; }, "problem.b.dtype"},
      {[](auto& p) { p.d.dtype = DType::fp16; }, "problem.d.dtype"},
      {[](auto& p) { p.d.dtype = DType::e4m3; }, "problem.d.dtype"},
      {[](auto& p) { p.beta = 1, p.c.dtype = DType::fp32; }, "problem.c.dtype"},
      {[](auto& p) { p.scale = ScaleMode::tensorwise; }, "problem.scale"},
      {[](auto& p) { p.tf32 = true; }, "problem.tf32"},
      {[](auto& p) { p.alpha = INFINITY; }, "problem.alpha"},
      {[](auto& p) { p.beta = NAN; }, "problem.beta"},
  };
  for (auto& c : cases) {
    GemmProblem p = base;
    c.edit(p);
    std::string msg = why(p);
    EXPECT_EQ(msg.rfind(c.field + ":", 0), 0u) << "expected an error naming " << c.field << ", got '" << msg << "'";
  }
}

TEST(Problem, ColumnMajorLeadingDimension) {
  auto p = GemmProblem::linear(100, 50, 30);
  p.a.layout = Layout::col;  // A [100, 30] col-major: ld >= 100
  p.a.ld = 99;
  EXPECT_EQ(why(p).rfind("problem.lda:", 0), 0u);
  p.a.ld = 101;
  EXPECT_EQ(why(p), "");
  EXPECT_EQ(p.elems_a(), 101 * 30);
}

TEST(Problem, AcceptedPairings) {
  for (auto [in, out] : {std::pair{DType::bf16, DType::bf16}, {DType::bf16, DType::fp32}, {DType::fp16, DType::fp16},
                         {DType::fp32, DType::fp32}, {DType::e4m3, DType::bf16}, {DType::e4m3, DType::fp16},
                         {DType::e4m3, DType::fp32}}) {
    auto p = GemmProblem::linear(8, 8, 8, in, out);
    EXPECT_EQ(why(p), "") << to_string(in) << "->" << to_string(out);
  }
  auto mixed = GemmProblem::linear(8, 8, 8, DType::e4m3);
  mixed.b.dtype = DType::e5m2;
  EXPECT_EQ(why(mixed), "");
}

TEST(Problem, KeyIsStableAndCoversWhatMatters) {
  auto p = GemmProblem::linear(4096, 4096, 4096);
  // Pinned: a key must not change between builds or runs (caches outlive binaries).
  EXPECT_EQ(p.canonical(), "gemm1;m=4096;n=4096;k=4096;a=bf16/row/4096;b=bf16/col/4096;d=bf16/row/4096;bias=0;act=none;scale=none;tf32=0");
  EXPECT_EQ(p.key(), stable_hash(p.canonical()));
  EXPECT_EQ(stable_hash(""), "cbf29ce484222325");  // FNV-1a 64 offset basis
  EXPECT_EQ(stable_hash("a"), "af63dc4c8601ec8c");

  std::set<std::string> keys;
  std::vector<std::function<void(GemmProblem&)>> edits = {
      [](auto&) {},
      [](auto& q) { q.m = 4095; },
      [](auto& q) { q.a.layout = Layout::col; },
      [](auto& q) { q.a.ld = 4104; },
      [](auto& q) { q.bias = true; },
      [](auto& q) { q.act = Activation::silu; },
      [](auto& q) { q.beta = 1; },
      [](auto& q) { q.d.dtype = DType::fp32; },
  };
  for (auto& e : edits) {
    GemmProblem q = p;
    e(q);
    keys.insert(q.key());
  }
  EXPECT_EQ(keys.size(), edits.size());

  GemmProblem q = p;
  q.alpha = 2.5f;  // a run-time value: same kernel, same key
  EXPECT_EQ(q.key(), p.key());
  q.a.ld = 4096;  // explicit packed ld == implicit
  EXPECT_EQ(q.key(), p.key());
}

TEST(Problem, Printing) {
  auto p = GemmProblem::linear(16, 10240, 8192);
  p.bias = true;
  p.act = Activation::gelu_tanh;
  EXPECT_EQ(p.str(), "16x10240x8192 bf16 A:row B:col D:bf16/row +bias gelu_tanh");
}

TEST(Problem, Parsing) {
  int64_t m, n, k;
  parse_mnk("16x10240x8192", m, n, k);
  EXPECT_EQ(m, 16);
  EXPECT_EQ(n, 10240);
  EXPECT_EQ(k, 8192);
  for (const char* bad : {"", "4096x4096", "4096x4096x", "ax1x1", "1x1x1x1", "1x1x1 "}) {
    try {
      parse_mnk(bad, m, n, k, "shape");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.message().rfind("shape:", 0), 0u);
    }
  }
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("e4m3"), DType::e4m3);
  EXPECT_EQ(parse_activation("gelu"), Activation::gelu_tanh);
  try {
    parse_dtype("int8", "--dtype");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--dtype: unknown value 'int8'"), std::string::npos);
  }
}
