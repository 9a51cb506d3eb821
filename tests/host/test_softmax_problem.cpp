// SoftmaxProblem: validation names the field, canonical text is pinned, keys are distinct.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "gemmtune/error.hpp"
#include "gemmtune/softmax.hpp"
#include "host/problems.hpp"

using namespace gemmtune;

using host_test::why;

TEST(SoftmaxProblem, MakeIsValidAndPacked) {
  auto p = SoftmaxProblem::make(1000, 4097);
  EXPECT_EQ(why(p), "");
  EXPECT_EQ(p.row_stride(), 4097);
  EXPECT_EQ(p.elems(), 1000LL * 4097);
  EXPECT_EQ(p.in, DType::bf16);
  EXPECT_EQ(p.out, DType::bf16);
  EXPECT_DOUBLE_EQ(p.min_bytes(), 1000.0 * 4097 * (2 + 2));
  p.out = DType::fp32;
  EXPECT_DOUBLE_EQ(p.min_bytes(), 1000.0 * 4097 * (2 + 4));
  p.ld = 4104;
  EXPECT_EQ(p.elems(), 1000LL * 4104);
  EXPECT_DOUBLE_EQ(p.min_bytes(), 1000.0 * 4097 * (2 + 4));  // padding is not moved
  EXPECT_EQ(why(SoftmaxProblem::make(1, 1, DType::fp32)), "");
  EXPECT_EQ(why(SoftmaxProblem::make(3, int64_t(1) << 31)), "");  // no fixed upper bound on cols
}

TEST(SoftmaxProblem, EachBadFieldIsNamed) {
  const auto base = SoftmaxProblem::make(8, 64);
  struct Case {
    std::function<void(SoftmaxProblem&)> edit;
    std::string field;
  } cases[] = {
      {[](auto& p) { p.rows = 0; }, "softmax.rows"},
      {[](auto& p) { p.rows = -2; }, "softmax.rows"},
      {[](auto& p) { p.cols = 0; }, "softmax.cols"},
      {[](auto& p) { p.cols = -1; }, "softmax.cols"},
      {[](auto& p) { p.ld = 63; }, "softmax.ld"},
      {[](auto& p) { p.ld = -1; }, "softmax.ld"},
      {[](auto& p) { p.rows = int64_t(1) << 40, p.ld = int64_t(1) << 40; }, "softmax.ld"},
      {[](auto& p) { p.in = DType::e4m3; }, "softmax.in"},
      {[](auto& p) { p.out = DType::e5m2; }, "softmax.out"},
      {[](auto& p) { p.scale = INFINITY; }, "softmax.scale"},
      {[](auto& p) { p.scale = NAN; }, "softmax.scale"},
  };
  for (auto& c : cases) {
    SoftmaxProblem p = base;
    c.edit(p);
    const std::string msg = why(p);
    EXPECT_EQ(msg.rfind(c.field + ":", 0), 0u) << "expected an error naming " << c.field << ", got '" << msg << "'";
  }
  EXPECT_EQ(why(SoftmaxProblem::make(8, 0)), "softmax.cols: must be >= 1 (got 0)");
}

TEST(SoftmaxProblem, CanonicalTextIsPinned) {
  auto p = SoftmaxProblem::make(1000, 4097);
  EXPECT_EQ(p.canonical(), "softmax1;rows=1000;cols=4097;ld=4097;in=bf16;out=bf16");
  p.ld = 4104, p.in = DType::fp32, p.out = DType::fp16;
  EXPECT_EQ(p.canonical(), "softmax1;rows=1000;cols=4097;ld=4104;in=fp32;out=fp16");
  // The key is FNV-1a 64 of the canonical text (stable across runs and builds).
  EXPECT_EQ(p.key(), stable_hash(p.canonical()));
  EXPECT_EQ(p.key().size(), 16u);
}

TEST(SoftmaxProblem, PackedLdAndScaleDoNotChangeTheKey) {
  auto a = SoftmaxProblem::make(7, 33);
  auto b = a;
  b.ld = 33;  // explicit packed == 0
  EXPECT_EQ(a.key(), b.key());
  b.scale = 0.125f;  // a run-time argument
  EXPECT_EQ(a.key(), b.key());
  EXPECT_NE(a.str(), b.str());
}

TEST(SoftmaxProblem, KeysAreDistinct) {
  std::set<std::string> keys;
  int n = 0;
  for (int64_t rows : {1, 7, 1000})
    for (int64_t cols : {1, 31, 32, 33, 1024, 4097})
      for (int64_t pad : {0, 8})
        for (DType in : {DType::bf16, DType::fp16, DType::fp32})
          for (DType out : {DType::bf16, DType::fp16, DType::fp32}) {
            SoftmaxProblem p = SoftmaxProblem::make(rows, cols, in);
            p.out = out;
            p.ld = pad ? cols + pad : 0;
            keys.insert(p.key());
            ++n;
          }
  EXPECT_EQ(keys.size(), size_t(n));
  // Not the GEMM's key space either (different prefix).
  EXPECT_EQ(keys.count(GemmProblem::linear(1, 1, 1).key()), 0u);
}

TEST(SoftmaxProblem, Str) {
  auto p = SoftmaxProblem::make(1000, 4096);
  EXPECT_EQ(p.str(), "1000x4096 bf16->bf16");
  p.out = DType::fp32, p.ld = 4104, p.scale = 0.125f;
  EXPECT_EQ(p.str(), "1000x4096 bf16->fp32 ld=4104 scale=0.125");
}

TEST(SoftmaxProblem, ParseRowsCols) {
  int64_t r = 0, c = 0;
  parse_rows_cols("1000x4097", r, c);
  EXPECT_EQ(r, 1000);
  EXPECT_EQ(c, 4097);
  parse_rows_cols("7X262147", r, c);
  EXPECT_EQ(r, 7);
  EXPECT_EQ(c, 262147);
  for (const char* bad : {"", "x", "10", "10x", "x10", "10x20x30", "10 x 20", "ax3", "3x3 "}) {
    try {
      parse_rows_cols(bad, r, c, "softmax.shape");
      ADD_FAILURE() << "parsed '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.message().rfind("softmax.shape:", 0), 0u) << e.message();
    }
  }
}
