// Host-only tests of the CUTLASS backend's config space, pruning, ids and generated sources.
#include <gtest/gtest.h>

#include <set>

#include "backends/cutlass/configs.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cutlass_backend {
namespace {

constexpr int kSms = 132;

std::vector<GemmProblem> sample_problems() {
  std::vector<GemmProblem> ps;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{4096, 4096, 4096}, {1, 4096, 4096}, {16, 10240, 8192},
                                                             {64, 28672, 8192}, {128, 128, 128}, {8192, 28672, 8192},
                                                             {2048, 1024, 65536}, {300, 7000, 528}, {8, 64, 64}})
    for (DType t : {DType::bf16, DType::fp16, DType::e4m3}) ps.push_back(GemmProblem::linear(m, n, k, t));
  GemmProblem epi = GemmProblem::linear(512, 4096, 1024);
  epi.bias = true, epi.act = Activation::gelu_tanh, epi.beta = 1.0f;
  ps.push_back(epi);
  GemmProblem rowwise = GemmProblem::linear(256, 8192, 4096, DType::e4m3);
  rowwise.scale = ScaleMode::rowwise;
  ps.push_back(rowwise);
  GemmProblem nn = GemmProblem::linear(1024, 1024, 1024);
  nn.a.layout = Layout::col, nn.b.layout = Layout::row, nn.d.layout = Layout::col;
  ps.push_back(nn);
  return ps;
}

TEST(CutlassConfigs, IdRoundTripsForEveryValidConfig) {
  for (const GemmProblem& p : sample_problems())
    for (const Config& c : valid_configs(p)) {
      EXPECT_EQ(Config::parse(c.id()), c) << c.id();
      EXPECT_FALSE(c.name().empty());
    }
  EXPECT_EQ(Config::parse("co128x256x64c2x1").tile_n, 256);
  EXPECT_TRUE(Config::parse("pp64x128x128c1x2s").swap_ab);
}

TEST(CutlassConfigs, ParseRejectsMalformedIds) {
  for (const char* bad : {"", "co", "xx128x128x64c1x1", "co128x128x64", "co128x128x64c1x1x", "co96x128x64c1x1",
                          "co128x128x64c2x2", "co0128x128x64c1x1", "co128x128x32c1x1", "co128x128x64c1x1ss"})
    EXPECT_THROW(Config::parse(bad), Error) << bad;
}

TEST(CutlassConfigs, CheckRestatesTheTemplateRules) {
  GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
  EXPECT_TRUE(check(Config{128, 128, 64, 1, 1, Schedule::cooperative, false}, p));
  EXPECT_FALSE(check(Config{64, 128, 64, 1, 1, Schedule::cooperative, false}, p));   // coop needs M >= 128
  EXPECT_FALSE(check(Config{256, 128, 64, 1, 1, Schedule::pingpong, false}, p));     // ping-pong M <= 128
  EXPECT_FALSE(check(Config{256, 256, 64, 1, 1, Schedule::cooperative, false}, p));  // accumulators
  EXPECT_FALSE(check(Config{128, 256, 64, 1, 1, Schedule::pingpong, false}, p));     // accumulators
  EXPECT_FALSE(check(Config{128, 128, 128, 1, 1, Schedule::cooperative, false}, p)); // K spans 256 B for bf16
  GemmProblem f8 = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  EXPECT_TRUE(check(Config{128, 128, 128, 2, 1, Schedule::cooperative, false}, f8));
  EXPECT_FALSE(check(Config{128, 128, 64, 1, 1, Schedule::cooperative, false}, f8));
  Verdict v = check(Config{64, 64, 64, 1, 1, Schedule::cooperative, false}, p);
  EXPECT_NE(v.reason.find("co64x64x64c1x1"), std::string::npos) << v.reason;
}

TEST(CutlassConfigs, EveryValidConfigFitsSharedMemory) {
  for (const GemmProblem& p : sample_problems())
    for (const Config& c : valid_configs(p)) {
      EXPECT_GE(stages(c, p), kMinStages) << c.id() << " " << p.str();
      EXPECT_LE(stage_bytes(c, p) * kMinStages + epilogue_bytes(c, p), kMaxSharedBytes);
    }
}

TEST(CutlassConfigs, PrunedSpaceIsSmallValidAndStable) {
  for (const GemmProblem& p : sample_problems()) {
    ASSERT_TRUE(problem_verdict(p)) << p.str() << ": " << problem_verdict(p).reason;
    auto cs = configs_for(p, kSms);
    EXPECT_GE(cs.size(), 1u) << p.str();
    EXPECT_LE(cs.size(), 16u) << p.str();
    if (p.m >= 256 && p.n >= 256) EXPECT_GE(cs.size(), 8u) << p.str();
    std::set<std::string> ids;
    for (const Config& c : cs) {
      EXPECT_TRUE(check(c, p)) << c.id();
      EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate " << c.id();
      const int64_t M = c.swap_ab ? p.n : p.m, N = c.swap_ab ? p.m : p.n;
      auto pow2 = [](int64_t x) { int64_t q = 1; while (q < x) q <<= 1; return q; };
      EXPECT_LE(c.tile_m, std::max<int64_t>(64, pow2(M))) << c.id() << " " << p.str();
      EXPECT_LE(c.tile_n, std::max<int64_t>(64, pow2(N))) << c.id() << " " << p.str();
      if (c.swap_ab) EXPECT_LE(p.m, 128) << c.id() << " " << p.str();
    }
    EXPECT_EQ(configs_for(p, kSms), cs) << "not deterministic for " << p.str();
    // Costs are non-decreasing along the returned order.
    for (size_t i = 1; i < cs.size(); ++i)
      EXPECT_LE(cost_estimate(cs[i - 1], p, kSms), cost_estimate(cs[i], p, kSms) * (1 + 1e-12));
  }
  EXPECT_LE(configs_for(GemmProblem::linear(8192, 8192, 8192), kSms, 24).size(), 24u);
  EXPECT_EQ(configs_for(GemmProblem::linear(8192, 8192, 8192), kSms, 5).size(), 5u);
}

TEST(CutlassConfigs, SmallMGetsSwapAB) {
  auto cs = configs_for(GemmProblem::linear(16, 10240, 8192), kSms);
  EXPECT_TRUE(std::any_of(cs.begin(), cs.end(), [](const Config& c) { return c.swap_ab; }));
  auto big = configs_for(GemmProblem::linear(4096, 4096, 4096), kSms);
  EXPECT_TRUE(std::none_of(big.begin(), big.end(), [](const Config& c) { return c.swap_ab; }));
  EXPECT_TRUE(std::any_of(big.begin(), big.end(), [](const Config& c) { return c.schedule == Schedule::pingpong; }));
  EXPECT_TRUE(std::any_of(big.begin(), big.end(), [](const Config& c) { return c.cluster_m * c.cluster_n == 2; }));
}

TEST(CutlassConfigs, ProblemVerdictGivesReasons) {
  EXPECT_TRUE(problem_verdict(GemmProblem::linear(100, 200, 304)));
  Verdict fp32 = problem_verdict(GemmProblem::linear(64, 64, 64, DType::fp32));
  EXPECT_FALSE(fp32);
  EXPECT_NE(fp32.reason.find("fp32"), std::string::npos);
  GemmProblem odd = GemmProblem::linear(64, 64, 100);  // lda = 100 bf16 = 200 bytes
  Verdict v = problem_verdict(odd);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("TMA"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("lda"), std::string::npos) << v.reason;
  GemmProblem f8 = GemmProblem::linear(64, 64, 64, DType::e4m3);
  f8.b.layout = Layout::row;
  f8.b.ld = 0;
  EXPECT_FALSE(problem_verdict(f8));
  GemmProblem f8out = GemmProblem::linear(64, 64, 64, DType::e4m3, DType::fp32);
  EXPECT_FALSE(problem_verdict(f8out));
  EXPECT_TRUE(configs_for(odd, kSms).empty());
  // 16-bit inputs with an fp32 output (a valid problem, cuBLASLt's): no instance here.
  Verdict bf16_f32 = problem_verdict(GemmProblem::linear(64, 64, 64, DType::bf16, DType::fp32));
  EXPECT_FALSE(bf16_f32);
  EXPECT_NE(bf16_f32.reason.find("output fp32"), std::string::npos) << bf16_f32.reason;
  // C is read in D's layout: a C of the other layout is refused (when C is read at all).
  GemmProblem cd = GemmProblem::linear(64, 64, 64, DType::fp16);
  cd.d.layout = Layout::col;
  EXPECT_TRUE(problem_verdict(cd));  // beta = 0: C's layout does not matter
  cd.beta = 1.0f;
  Verdict mixed = problem_verdict(cd);
  EXPECT_FALSE(mixed);
  EXPECT_NE(mixed.reason.find("D's layout"), std::string::npos) << mixed.reason;
  cd.c.layout = Layout::col;
  EXPECT_TRUE(problem_verdict(cd));
}

TEST(CutlassConfigs, InstanceSourceNamesEveryParameter) {
  GemmProblem p = GemmProblem::linear(16, 4096, 4096, DType::e4m3);
  p.bias = true, p.act = Activation::silu, p.scale = ScaleMode::rowwise;
  InstanceSpec s = InstanceSpec::of(Config{64, 128, 128, 2, 1, Schedule::pingpong, true}, p);
  EXPECT_EQ(s.text(), "a=e4m3 b=e4m3 d=bf16 layout=rcr c=0 bias=1 act=silu scale=rowwise cfg=pp64x128x128c2x1s");
  std::string src = s.source();
  for (const char* want : {"#include \"sm90_gemm.cuh\"", "gk::Dt::e4m3, gk::Dt::e4m3, gk::Dt::bf16, true, false, true",
                           "64, 128, 128, 2, 1, gk::Sched::pingpong", "false, true, gk::Act::silu, gk::Scale::rowwise, true>",
                           "GT_CUTLASS_DEFINE_ENTRY_POINTS(Instance, \"a=e4m3"})
    EXPECT_NE(src.find(want), std::string::npos) << want << "\n" << src;
  // alpha, beta and the shape are run-time arguments: other shapes share the instance.
  GemmProblem q = p;
  q.m = 4096, q.n = 1024, q.alpha = 2.0f;
  EXPECT_EQ(InstanceSpec::of(s.config, q).source(), src);
}

TEST(CutlassConfigs, H200Description) {
  DeviceInfo d = h200_device();
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_LT(d.index, 0);
}

}  // namespace
}  // namespace gemmtune::cutlass_backend
