// The native decode GEMM's config space and problem rules: configs exist for every decode
// problem of the llm-layers suite (m <= 16), with the fewest token tiles that hold m, distinct
// names that parse back, no k split without work, at most max_configs; what the kernels cannot
// run is refused naming the reason; bad ids are refused.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "backends/native/decode_gemm.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;
using namespace gemmtune::native;

TEST(NativeDecodeConfigs, EverySuiteDecodeProblemHasConfigs) {
  const std::pair<int64_t, int64_t> layers[] = {{6144, 4096}, {4096, 14336}, {128256, 4096}, {1280, 8192},
                                                {8192, 1024}, {57344, 8192}, {8192, 3584}};
  for (int64_t m : {1, 2, 8, 9, 16})
    for (auto [n, k] : layers)
      for (DType dt : {DType::bf16, DType::fp16, DType::e4m3}) {
        const GemmProblem p = GemmProblem::linear(m, n, k, dt);
        SCOPED_TRACE(p.str());
        ASSERT_EQ(decode_unsupported(p), "");
        const auto cfgs = decode_configs(p, 132);
        ASSERT_FALSE(cfgs.empty());
        EXPECT_LE(cfgs.size(), 12u);
        std::set<std::string> names;
        const int need = m <= 8 ? 1 : 2;
        for (const auto& c : cfgs) {
          EXPECT_TRUE(names.insert(c.name()).second) << c.name() << " twice";
          EXPECT_EQ(c.cannot_run(p), "") << c.name();
          EXPECT_EQ(c.tiles, need) << c.name();
          EXPECT_EQ(DecodeConfig::parse(c.name()), c);
          const DecodeLaunch l = decode_launch(c, p);
          EXPECT_EQ(l.grid % c.cluster, 0);
          EXPECT_GE(l.grid / c.cluster * c.cta_rows(), n) << c.name() << ": rows not covered";
          EXPECT_LT(l.grid / c.cluster * c.cta_rows() - n, c.cta_rows()) << c.name() << ": an idle row block";
          EXPECT_LE(l.smem, 227 * 1024) << c.name();
          // Every k split has at least two batches of work.
          const int64_t chunks = (k * int64_t(size_of(dt)) + 63) / 64;
          EXPECT_TRUE(c.k_splits() == 1 || chunks > int64_t(c.k_splits() - 1) * 2 * c.chunks_per_batch())
              << c.name() << ": k of " << chunks << " chunks split too far";
        }
        EXPECT_EQ(decode_configs(p, 132, 3).size(), std::min<size_t>(3, cfgs.size()));
      }
}

TEST(NativeDecodeConfigs, RefusesWhatTheKernelsCannotRun) {
  auto why = [](auto f) {
    GemmProblem p = GemmProblem::linear(16, 4096, 4096);
    f(p);
    return decode_unsupported(p);
  };
  EXPECT_EQ(why([](GemmProblem&) {}), "");
  EXPECT_NE(why([](GemmProblem& p) { p.m = 17; }).find("m = 17"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.b.layout = Layout::row; }).find("nn.Linear layout"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.d.layout = Layout::col; }).find("nn.Linear layout"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::fp32); }).find("both bf16"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p = GemmProblem::linear(p.m, p.n, p.k, DType::e5m2); }).find("e5m2"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.k = 4100; }).find("k * element size"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.a.ld = 4100; }).find("lda"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.b.ld = 4099; }).find("ldb"), std::string::npos);
  EXPECT_NE(why([](GemmProblem& p) { p.k = 0; }), "");  // validate()'s reason
  EXPECT_TRUE(decode_configs(GemmProblem::linear(17, 4096, 4096), 132).empty());
  // A config with too few token tiles for m.
  const DecodeConfig one{1, 1, 4, 1, 1};
  EXPECT_NE(one.cannot_run(GemmProblem::linear(9, 64, 64)).find("tiles = 1"), std::string::npos);
  EXPECT_EQ(one.cannot_run(GemmProblem::linear(8, 64, 64)), "");
  EXPECT_THROW(decode_launch(one, GemmProblem::linear(9, 64, 64)), Error);
}

TEST(NativeDecodeConfigs, IdsParseStrictly) {
  EXPECT_EQ(DecodeConfig::parse("decode_t2_r1_n2_k2_c4"), (DecodeConfig{2, 1, 2, 2, 4}));
  for (const char* bad : {"", "decode", "decode_t2_r1_n2_k2", "decode_t2_r1_n2_k2_c4x", "decode_t3_r1_n4_k1_c1",
                          "decode_t4_r1_n4_k1_c1", "decode_t1_r3_n4_k1_c1", "decode_t1_r1_n4_k4_c1", "decode_t1_r1_n1_k1_c1",
                          "decode_t1_r1_n4_k1_c16"})
    EXPECT_THROW(DecodeConfig::parse(bad), Error) << bad;
}
