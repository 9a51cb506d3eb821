// The Triton backend's config space: ids, pruning per problem, compile parameters and grids.
#include <gtest/gtest.h>

#include <climits>
#include <set>

#include "backends/triton/configs.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::triton {
namespace {

constexpr int kSms = 132;

int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

std::vector<GemmProblem> typical_problems() {
  std::vector<GemmProblem> out = {
      GemmProblem::linear(4096, 4096, 4096),           GemmProblem::linear(16, 10240, 8192),
      GemmProblem::linear(1, 4096, 4096),              GemmProblem::linear(128, 128, 16384),
      GemmProblem::linear(4096, 4096, 4096, DType::fp32), GemmProblem::linear(4096, 4096, 4096, DType::e4m3),
      GemmProblem::linear(100, 200, 300),              GemmProblem::linear(64, 4096, 4096),
      GemmProblem::linear(1024, 1024, 1024),           GemmProblem::linear(8192, 28672, 4096),
  };
  GemmProblem nn = GemmProblem::linear(2048, 2048, 2048, DType::fp16);
  nn.b.layout = Layout::row;
  nn.d.layout = Layout::col;
  nn.beta = 1.0f;
  nn.c.layout = Layout::row;
  nn.bias = true;
  nn.act = Activation::gelu_tanh;
  out.push_back(nn);
  return out;
}

size_t count(const std::vector<Config>& cs, KernelKind kind, bool split) {
  return size_t(std::count_if(cs.begin(), cs.end(),
                              [&](const Config& c) { return c.kind == kind && (c.split_k > 1) == split; }));
}

TEST(TritonConfigs, IdsRoundTripAndAreUnique) {
  for (const GemmProblem& p : typical_problems()) {
    SCOPED_TRACE(p.str());
    std::set<std::string> ids;
    for (const Config& c : configs_for(p, kSms)) {
      EXPECT_EQ(Config::parse(c.id()), c) << c.id();
      EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate " << c.id();
    }
  }
  Config c;
  c.kind = KernelKind::tiled, c.block_m = 16, c.block_n = 64, c.block_k = 128, c.num_warps = 4, c.num_stages = 4;
  c.split_k = 4;
  EXPECT_EQ(c.id(), "t16x64x128w4s4g8k4");
  EXPECT_EQ(c.name(), "tiled 16x64x128 w4 s4 split-k 4");
  c.kind = KernelKind::persistent, c.split_k = 1;
  EXPECT_EQ(c.id(), "p16x64x128w4s4g8");
  EXPECT_EQ(c.name(), "persistent 16x64x128 w4 s4");
}

TEST(TritonConfigs, MalformedIdsThrowNamingTheId) {
  const char* bads[] = {"",
                        "t128",
                        "x128x128x64w8s3g8",
                        "t128x128x64w8s3g8k1",    // k1 is not canonical
                        "t0128x128x64w8s3g8",     // leading zero
                        "p128x128x64w8s3g8k2",    // persistent has no split-k
                        "t128x128x64w8s3g8 ",     // trailing text
                        "t512x128x64w8s3g8",      // out of range
                        "t96x128x64w8s3g8",       // not a power of two
                        "t128x128x64w3s3g8",      // warps not a power of two
                        "t128x128x64w8s3"};
  for (const char* bad : bads) {
    try {
      Config::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("'" + std::string(bad) + "'"), std::string::npos) << e.message();
    }
  }
}

TEST(TritonConfigs, AboutTenToThirtyCandidatesForTypicalProblems) {
  for (const GemmProblem& p : typical_problems()) {
    auto cs = configs_for(p, kSms);
    EXPECT_GE(cs.size(), 10u) << p.str();
    EXPECT_LE(cs.size(), 30u) << p.str();
  }
  // A tiny problem collapses onto a few configs (one k step: stages do not matter).
  auto tiny = configs_for(GemmProblem::linear(32, 32, 32), kSms);
  ASSERT_FALSE(tiny.empty());
  EXPECT_LE(tiny.size(), 3u);
}

TEST(TritonConfigs, EveryConfigFitsSharedMemoryAndTheProblem) {
  for (const GemmProblem& p : typical_problems()) {
    SCOPED_TRACE(p.str());
    for (const Config& c : configs_for(p, kSms)) {
      EXPECT_LE(shared_estimate(c, p), kMaxSharedBytes) << c.id();
      EXPECT_TRUE(check(c, p, kSms)) << c.id();
      EXPECT_LE(c.block_m, std::max<int64_t>(16, pow2_at_least(p.m))) << c.id();
      EXPECT_LE(c.block_n, std::max<int64_t>(16, pow2_at_least(p.n))) << c.id();
      EXPECT_GE(c.block_k, 32) << c.id();
      EXPECT_TRUE(c.num_warps == 4 || c.num_warps == 8) << c.id();
      EXPECT_TRUE(c.num_stages >= 2 && c.num_stages <= 5) << c.id();
    }
  }
  // fp32 inputs take twice the bytes: the largest tiles no longer fit.
  auto fp32 = GemmProblem::linear(4096, 4096, 4096, DType::fp32);
  Config big = Config::parse("t128x256x64w8s3g8");
  Verdict v = check(big, fp32, kSms);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("shared memory"), std::string::npos) << v.reason;
  EXPECT_TRUE(check(big, GemmProblem::linear(4096, 4096, 4096), kSms));
}

TEST(TritonConfigs, SmallProblemsGetSmallTiles) {
  for (const Config& c : configs_for(GemmProblem::linear(16, 10240, 8192), kSms)) {
    EXPECT_EQ(c.block_m, 16) << c.id();
    EXPECT_EQ(c.kind, KernelKind::tiled) << c.id();  // 128-row persistent tiles are far too tall
  }
}

TEST(TritonConfigs, PersistentOnlyWhereTmaAndLayoutsAllow) {
  auto square = GemmProblem::linear(4096, 4096, 4096);
  EXPECT_GE(count(configs_for(square, kSms), KernelKind::persistent, false), 3u);

  auto misaligned = GemmProblem::linear(4096, 4096, 4100);  // lda = ldb = 4100: not a multiple of 16
  EXPECT_EQ(count(configs_for(misaligned, kSms), KernelKind::persistent, false), 0u);
  Verdict v = check(Config::parse("p128x128x64w8s3g8"), misaligned, kSms);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("multiples of 16"), std::string::npos) << v.reason;

  auto fp8_nn = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  EXPECT_GE(count(configs_for(fp8_nn, kSms), KernelKind::persistent, false), 3u);  // A row, B col: K-major
  fp8_nn.b.layout = Layout::row;
  EXPECT_EQ(count(configs_for(fp8_nn, kSms), KernelKind::persistent, false), 0u);
  auto half_nn = GemmProblem::linear(4096, 4096, 4096);
  half_nn.b.layout = Layout::row;
  EXPECT_GE(count(configs_for(half_nn, kSms), KernelKind::persistent, false), 3u);
}

TEST(TritonConfigs, SplitKForFewTilesAndLongK) {
  auto skinny = GemmProblem::linear(16, 4096, 8192);
  auto cs = configs_for(skinny, kSms);
  EXPECT_GE(count(cs, KernelKind::tiled, true), 2u);
  for (const Config& c : cs) {
    if (c.split_k == 1) continue;
    EXPECT_LE(c.split_k, 16);
    EXPECT_LE(int64_t(c.split_k) * (16 / c.block_m) * ((4096 + c.block_n - 1) / c.block_n), 2 * kSms) << c.id();
    EXPECT_GE(8192 / c.split_k, 256) << c.id();
  }
  auto deep = GemmProblem::linear(128, 128, 16384);
  bool has16 = false;
  for (const Config& c : configs_for(deep, kSms)) has16 = has16 || c.split_k == 16;
  EXPECT_TRUE(has16);
  EXPECT_EQ(count(configs_for(GemmProblem::linear(4096, 4096, 4096), kSms), KernelKind::tiled, true), 0u);
  EXPECT_EQ(count(configs_for(GemmProblem::linear(16, 4096, 512), kSms), KernelKind::tiled, true), 0u);  // short K

  Config c = Config::parse("t64x64x128w4s4g8k16");
  Verdict v = check(c, GemmProblem::linear(64, 64, 1024), kSms);  // 8 k-blocks for 16 splits
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("without work"), std::string::npos) << v.reason;
}

TEST(TritonConfigs, ProblemsPastI32AreRejected) {
  auto p = GemmProblem::linear(int64_t(INT32_MAX) + 1, 16, 16);
  Verdict v = problem_verdict(p);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("32-bit"), std::string::npos) << v.reason;
  EXPECT_TRUE(configs_for(p, kSms).empty());
  auto ld = GemmProblem::linear(16, 16, 16);
  ld.a.ld = int64_t(INT32_MAX) + 16;
  EXPECT_FALSE(problem_verdict(ld));
  EXPECT_TRUE(problem_verdict(GemmProblem::linear(65536, 65536, 65536)));  // big, but i32 sizes
}

TEST(TritonConfigs, GemmParamsFollowTheContract) {
  auto p = GemmProblem::linear(4096, 1000, 4096);  // ldd = 1000: not a multiple of 16
  nlohmann::json j = gemm_params(Config::parse("t128x128x64w8s3g8"), p, kSms);
  nlohmann::json want = {
      {"kernel", "gemm_tiled"}, {"a_dtype", "bf16"}, {"b_dtype", "bf16"}, {"out_dtype", "bf16"},
      {"a_row", true},          {"b_row", false},    {"c_row", true},     {"d_row", true},
      {"has_c", false},         {"has_bias", false}, {"act", "none"},     {"scale", "none"},
      {"tf32", false},          {"block_m", 128},    {"block_n", 128},    {"block_k", 64},
      {"group_m", 8},           {"split_k", 1},      {"num_sms", 0},      {"num_warps", 8},
      {"num_stages", 3},        {"even_k", true},    {"i32_offsets", true},
      {"ld_div16", {{"a", true}, {"b", true}, {"c", false}, {"d", false}}},
      {"dims_div16", {{"m", true}, {"n", false}, {"k", true}}},
  };
  EXPECT_EQ(j, want) << j.dump();
  // Canonical text: sorted keys, so equal params give equal artifact keys.
  EXPECT_EQ(j.dump().substr(0, 30), R"({"a_dtype":"bf16","a_row":true)");

  auto e = GemmProblem::linear(64, 4096, 4096, DType::e4m3);
  e.scale = ScaleMode::rowwise;
  e.bias = true;
  e.act = Activation::silu;
  e.beta = 0.5f;
  nlohmann::json pj = gemm_params(Config::parse("p128x128x64w8s3g8"), e, kSms);
  EXPECT_EQ(pj["kernel"], "gemm_persistent");
  EXPECT_EQ(pj["num_sms"], kSms);
  EXPECT_EQ(pj["a_dtype"], "e4m3");
  EXPECT_EQ(pj["scale"], "rowwise");
  EXPECT_EQ(pj["has_c"], true);
  EXPECT_EQ(pj["has_bias"], true);
  EXPECT_EQ(pj["act"], "silu");
  EXPECT_EQ(pj["even_k"], false);  // gemm_tiled only: constant for persistent configs
  EXPECT_EQ(pj["i32_offsets"], false);

  Config split = Config::parse("t16x64x128w4s4g8k4");
  nlohmann::json r = reduce_params(split, e);
  EXPECT_EQ(r["kernel"], "splitk_reduce");
  EXPECT_EQ(r["split_k"], 4);
  EXPECT_EQ(r["block"], kReduceBlock);
  EXPECT_FALSE(r.contains("block_m"));  // one reduce kernel serves every split-k tile shape
  EXPECT_EQ(reduce_params(Config::parse("t64x128x64w4s4g8k4"), e), r);
}

TEST(TritonConfigs, EvenKAndI32OffsetsAreComputedPerConfig) {
  // even_k: every k tile whole (k % block_k == 0; split-k programs take whole tiles too).
  auto p = GemmProblem::linear(128, 8192, 28672);
  EXPECT_EQ(gemm_params(Config::parse("t64x128x128w4s4g8"), p, kSms)["even_k"], true);
  EXPECT_EQ(gemm_params(Config::parse("t64x128x128w4s4g8k4"), p, kSms)["even_k"], true);
  auto odd = GemmProblem::linear(128, 8192, 28672 + 64);
  EXPECT_EQ(gemm_params(Config::parse("t64x128x128w4s4g8"), odd, kSms)["even_k"], false);
  EXPECT_EQ(gemm_params(Config::parse("t64x128x64w4s4g8"), odd, kSms)["even_k"], true);
  // Different values are different compile params, hence different artifact keys.
  EXPECT_NE(gemm_params(Config::parse("t64x128x128w4s4g8"), p, kSms),
            gemm_params(Config::parse("t64x128x128w4s4g8"), odd, kSms));

  // i32_offsets: 8192 x 28672 fits; A row-major with (m - 1) * lda >= 2^31 does not.
  EXPECT_TRUE(main_loop_fits_i32(Config::parse("t64x128x128w4s4g8"), p));
  auto tall = GemmProblem::linear(80000, 4096, 32768);  // (80000 - 1) * 32768 > 2^31
  EXPECT_FALSE(main_loop_fits_i32(Config::parse("t128x128x64w8s3g8"), tall));
  EXPECT_EQ(gemm_params(Config::parse("t128x128x64w8s3g8"), tall, kSms)["i32_offsets"], false);
  // B column-major (W[n, k]): (n - 1) * ldb decides; B row-major: the tile's k rows times ldb.
  auto wide = GemmProblem::linear(64, 70000, 32768);
  EXPECT_FALSE(main_loop_fits_i32(Config::parse("t64x128x64w4s4g8"), wide));
  wide.b.layout = Layout::row;  // ldb = n = 70000: 63 * 70000 + n fits
  EXPECT_TRUE(main_loop_fits_i32(Config::parse("t64x128x64w4s4g8"), wide));
  // Exactly at the bound: (m - 1) * lda == 2^31 - 1 fits, one more row does not.
  auto edge = GemmProblem::linear(2, 16, 16);
  edge.a.ld = INT32_MAX;
  EXPECT_TRUE(main_loop_fits_i32(Config::parse("t16x16x32w4s2g8"), edge));
  edge.m = 3;
  EXPECT_FALSE(main_loop_fits_i32(Config::parse("t16x16x32w4s2g8"), edge));
  // k so close to 2^31 that rounding up to whole k tiles overflows i32: refused.
  EXPECT_FALSE(problem_verdict(GemmProblem::linear(16, 16, int64_t(INT32_MAX) - 100)));
}

// Candidate counts per problem class (docs/triton-backend.md has the table).
TEST(TritonConfigs, LargeProblemsGetAShortListThatCanWin) {
  auto gate_up = GemmProblem::linear(2048, 57344, 8192);
  ASSERT_TRUE(large_problem(gate_up, kSms));
  auto cs = configs_for(gate_up, kSms);
  EXPECT_GE(cs.size(), 10u);
  EXPECT_LE(cs.size(), 14u);
  std::set<std::string> ids;
  for (const Config& c : cs) ids.insert(c.id());
  // The H200's winners and near-winners (bench/results/2026-11-30-h200-triton-*.json).
  for (const char* id : {"p128x256x64w8s3g8", "p256x128x64w8s3g8", "p128x128x64w4s4g8", "p128x128x128w8s3g8",
                         "t128x128x64w8s5g8"})
    EXPECT_TRUE(ids.count(id)) << id;
  EXPECT_EQ(count(cs, KernelKind::tiled, true), 0u);
  for (const Config& c : cs) EXPECT_GE(int64_t(c.block_m) * c.block_n, 128 * 64) << c.id();

  for (auto p : {GemmProblem::linear(8192, 8192, 8192), GemmProblem::linear(8192, 8192, 28672),
                 GemmProblem::linear(4096, 4096, 4096, DType::fp16)}) {
    EXPECT_TRUE(large_problem(p, kSms)) << p.str();
    EXPECT_LE(configs_for(p, kSms).size(), 14u) << p.str();
  }
  // Not large: small m keeps the small-tile and split-k configs (m = 128: 64x128x128 w4 s4 won).
  auto down = GemmProblem::linear(128, 8192, 28672);
  EXPECT_FALSE(large_problem(down, kSms));
  auto dc = configs_for(down, kSms);
  EXPECT_GT(dc.size(), 14u);
  EXPECT_TRUE(std::find(dc.begin(), dc.end(), Config::parse("t64x128x128w4s4g8")) != dc.end());
  EXPECT_GE(count(dc, KernelKind::tiled, true), 1u);
  EXPECT_FALSE(large_problem(GemmProblem::linear(256, 65536, 4096), kSms));  // m < 512
  EXPECT_FALSE(large_problem(GemmProblem::linear(1024, 2048, 4096), kSms));  // 128 tiles < 2 waves
  // fp32 keeps the general list (the large 16-bit tiles do not fit its shared memory).
  EXPECT_GE(configs_for(GemmProblem::linear(4096, 4096, 4096, DType::fp32), kSms).size(), 10u);
}

TEST(TritonConfigs, Fp8LargeProblemsGetBlockK128Candidates) {
  // llama3-70b/o at m=8192 (n = k = 8192), A row-major, B = W[n, k]: every Triton candidate
  // lost by more than 1.3x on the H200 before (BLOCK_K 32-64 tiles, 128-register accumulators).
  for (ScaleMode scale : {ScaleMode::tensorwise, ScaleMode::rowwise}) {
    auto p = GemmProblem::linear(8192, 8192, 8192, DType::e4m3);
    p.scale = scale;
    SCOPED_TRACE(p.str());
    ASSERT_TRUE(large_problem(p, kSms));
    auto cs = configs_for(p, kSms);
    EXPECT_GE(cs.size(), 10u);
    EXPECT_LE(cs.size(), 14u);
    EXPECT_GE(count(cs, KernelKind::persistent, false), 4u);
    EXPECT_GE(count(cs, KernelKind::tiled, false), 4u);
    std::set<std::string> ids;
    for (const Config& c : cs) {
      ids.insert(c.id());
      EXPECT_EQ(c.block_k, 128) << c.id();
      EXPECT_LE(int64_t(c.block_m) * c.block_n / (32 * c.num_warps), 64) << c.id() << ": would spill";
      EXPECT_LE(shared_estimate(c, p), kMaxSharedBytes) << c.id();
      EXPECT_TRUE(check(c, p, kSms)) << c.id();
      EXPECT_EQ(gemm_params(c, p, kSms)["scale"], to_string(scale));
    }
    for (const char* id : {"p128x128x128w8s3g8", "p128x128x128w8s4g8", "t128x128x128w8s4g8", "t64x256x128w8s4g8"})
      EXPECT_TRUE(ids.count(id)) << id;
    // 128x256x128 w8 needs 128 + 128 accumulator registers per thread: not offered.
    EXPECT_FALSE(ids.count("p128x256x128w8s3g8"));
  }
  // fp8 with B row-major: no persistent (wgmma reads fp8 K-major), tiled ones remain.
  auto nn = GemmProblem::linear(8192, 8192, 8192, DType::e4m3);
  nn.b.layout = Layout::row;
  auto cs = configs_for(nn, kSms);
  EXPECT_EQ(count(cs, KernelKind::persistent, false), 0u);
  EXPECT_GE(cs.size(), 5u);
  // Smaller fp8 problems keep the general list plus the BLOCK_K 128 shapes, minus spilling tiles.
  auto small = GemmProblem::linear(128, 1280, 8192, DType::e4m3);
  small.scale = ScaleMode::rowwise;
  auto sc = configs_for(small, kSms);
  EXPECT_GE(sc.size(), 10u);
  EXPECT_LE(sc.size(), 30u);
  EXPECT_GE(count(sc, KernelKind::tiled, true), 1u);
  EXPECT_GE(count(sc, KernelKind::persistent, false), 1u);
  // The H200's best here (fp8-rowwise m=128: split-k 4 of 64x64x128) is still offered.
  EXPECT_TRUE(std::find(sc.begin(), sc.end(), Config::parse("t64x64x128w4s4g8k4")) != sc.end());
  for (const Config& c : sc) {
    EXPECT_LE(int64_t(c.block_m) * c.block_n / (32 * c.num_warps), 64) << c.id();
    EXPECT_GE(c.block_k, 64) << c.id() << ": a 32-deep fp8 stage is a single wgmma";
  }
}

TEST(TritonConfigs, GridsAndWorkspace) {
  auto p = GemmProblem::linear(1000, 300, 4096);
  Grid g = gemm_grid(Config::parse("t128x64x64w4s4g8"), p, kSms);
  EXPECT_EQ(g.x, 8u * 5u);
  EXPECT_EQ(g.y, 1u);
  g = gemm_grid(Config::parse("t128x64x64w4s4g8k4"), p, kSms);
  EXPECT_EQ(g.y, 4u);
  EXPECT_EQ(workspace_bytes(Config::parse("t128x64x64w4s4g8k4"), p), 4 * 1000 * 300 * 4);
  EXPECT_EQ(workspace_bytes(Config::parse("t128x64x64w4s4g8"), p), 0);
  EXPECT_EQ(gemm_grid(Config::parse("p128x64x64w4s4g8"), p, kSms).x, 40u);  // fewer tiles than SMs
  EXPECT_EQ(gemm_grid(Config::parse("p128x64x64w4s4g8"), GemmProblem::linear(4096, 4096, 64), kSms).x,
            unsigned(kSms));
  EXPECT_EQ(reduce_grid(p).x, unsigned((1000 * 300 + kReduceBlock - 1) / kReduceBlock));
}

}  // namespace
}  // namespace gemmtune::triton
