// Host-only tests of the CUTLASS backend's config space, pruning, ids and generated sources.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "backends/cutlass/configs.hpp"
#include "backends/cutlass/cutlass_backend.hpp"
#include "backends/cutlass/grouped.hpp"
#include "compile/artifact_cache.hpp"
#include "compile/nvcc.hpp"
#include "compile/python_worker.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/precompile.hpp"
#include "host/problems.hpp"

namespace gemmtune::cutlass_backend {
namespace {

constexpr int kSms = 132;

using host_test::sample_problems;

TEST(CutlassConfigs, IdRoundTripsForEveryValidConfig) {
  for (const GemmProblem& p : sample_problems())
    for (const Config& c : valid_configs(p)) {
      EXPECT_EQ(Config::parse(c.id()), c) << c.id();
      EXPECT_FALSE(c.name().empty());
    }
  EXPECT_EQ(Config::parse("co128x256x64c2x1").tile_n, 256);
  EXPECT_EQ(Config::parse("co128x192x128c1x2").tile_n, 192);
  EXPECT_TRUE(Config::parse("pp64x128x128c1x2s").swap_ab);
  Config o = Config::parse("co128x192x128c1x2rm8");
  EXPECT_EQ(o.raster, Raster::along_m);
  EXPECT_EQ(o.swizzle, 8);
  EXPECT_EQ(o.id(), "co128x192x128c1x2rm8");
  EXPECT_EQ(Config::parse("pp64x64x128c1x1srn2").raster, Raster::along_n);
  EXPECT_EQ(o.compiled().id(), "co128x192x128c1x2");
}

TEST(CutlassConfigs, ParseRejectsMalformedIds) {
  for (const char* bad : {"", "co", "xx128x128x64c1x1", "co128x128x64", "co128x128x64c1x1x", "co96x128x64c1x1", "co128x160x64c1x1", "co192x128x64c1x1",
                          "co128x128x64c2x2", "co0128x128x64c1x1", "co128x128x32c1x1", "co128x128x64c1x1ss",
                          "co128x128x64c1x1rm3", "co128x128x64c1x1rx8", "co128x128x64c1x1rm", "co128x128x64c1x1rm08",
                          "co128x128x64c1x1rn8s"})
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
  // fp8 keeps a promotion tile of partial sums next to the accumulators: at most 96 per thread.
  EXPECT_TRUE(check(Config{128, 192, 128, 1, 1, Schedule::cooperative, false}, f8));
  EXPECT_TRUE(check(Config{64, 192, 128, 1, 1, Schedule::pingpong, false}, f8));
  EXPECT_FALSE(check(Config{128, 256, 128, 1, 1, Schedule::cooperative, false}, f8));
  EXPECT_FALSE(check(Config{256, 128, 128, 1, 1, Schedule::cooperative, false}, f8));
  EXPECT_FALSE(check(Config{128, 128, 128, 1, 1, Schedule::pingpong, false}, f8));
  EXPECT_TRUE(check(Config{128, 256, 64, 1, 1, Schedule::cooperative, false}, p));  // bf16: up to 128
  EXPECT_TRUE(check(Config{128, 192, 64, 2, 1, Schedule::cooperative, false}, p));
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

// Block scales (kernel/sm90_gemm.cuh, Fp8BlockOverlapMainloop): tile N x K = 128 x 128 (one B
// scale block), at most 64 accumulators per thread, no swap-AB, m a multiple of 4 (A's scales by
// TMA); each refusal names its reason.
TEST(CutlassConfigs, BlockScalesTakeTheirOwnConfigs) {
  GemmProblem p = GemmProblem::linear(8192, 8192, 8192, DType::e4m3);
  p.scale = ScaleMode::block;
  ASSERT_TRUE(problem_verdict(p)) << problem_verdict(p).reason;
  EXPECT_TRUE(check(Config{128, 128, 128, 2, 1, Schedule::cooperative, false}, p));
  EXPECT_TRUE(check(Config{64, 128, 128, 1, 2, Schedule::pingpong, false}, p));
  auto refused = [&](Config c, const char* why) {
    Verdict v = check(c, p);
    EXPECT_FALSE(v) << c.id();
    EXPECT_NE(v.reason.find(why), std::string::npos) << c.id() << ": " << v.reason;
  };
  refused(Config{128, 192, 128, 1, 1, Schedule::cooperative, false}, "tile N must be 128");
  refused(Config{256, 64, 128, 1, 1, Schedule::cooperative, false}, "tile N must be 128");
  refused(Config{64, 128, 128, 1, 1, Schedule::pingpong, true}, "swap-AB");
  GemmProblem tw = p;
  tw.scale = ScaleMode::tensorwise;
  EXPECT_TRUE(check(Config{128, 192, 128, 1, 1, Schedule::cooperative, false}, tw));  // tensorwise keeps its space
  auto cs = configs_for(p, kSms);
  ASSERT_FALSE(cs.empty());
  for (const Config& c : cs) {
    EXPECT_EQ(c.tile_n, 128) << c.id();
    EXPECT_FALSE(c.swap_ab) << c.id();
  }
  // Decode m: no swap-AB, still candidates (tile M 64 / 128 over 16 rows).
  GemmProblem d = p;
  d.m = 16;
  EXPECT_FALSE(configs_for(d, kSms).empty());
  GemmProblem odd = p;
  odd.m = 130;
  Verdict v = problem_verdict(odd);
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("multiple of 4"), std::string::npos) << v.reason;
  EXPECT_TRUE(configs_for(odd, kSms).empty());
  // The generated source names the block mode; the instance text keys it apart from tensorwise.
  InstanceSpec s = InstanceSpec::of(cs.front(), p);
  EXPECT_NE(s.source().find("gk::Scale::block"), std::string::npos) << s.source();
  EXPECT_NE(s.text(), InstanceSpec::of(cs.front(), tw).text());
}

// Tile orders are run-time variants of a config: large problems get them for the best few configs,
// small ones none; a variant shares its config's instance (the same text, source and job).
TEST(CutlassConfigs, TileOrdersShareTheInstance) {
  GemmProblem big = GemmProblem::linear(8192, 57344, 8192, DType::e4m3);
  const auto ranked = configs_for(big, kSms);
  const auto all = with_tile_orders(ranked, big);
  ASSERT_EQ(all.size(), ranked.size() + 2 * size_t(kOrderedConfigs));
  EXPECT_TRUE(std::equal(ranked.begin(), ranked.end(), all.begin()));  // the ranked list first, unchanged
  std::set<std::string> ids;
  for (const Config& c : all) EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate " << c.id();
  for (size_t i = ranked.size(); i < all.size(); ++i) {
    const Config& v = all[i];
    EXPECT_NE(v.raster, Raster::heuristic);
    EXPECT_EQ(v.swizzle, 8);
    EXPECT_TRUE(check(v, big)) << v.id();
    EXPECT_EQ(Config::parse(v.id()), v);
    EXPECT_EQ(InstanceSpec::of(v, big).text(), InstanceSpec::of(v.compiled(), big).text());
    EXPECT_EQ(job(InstanceSpec::of(v, big)).source, job(InstanceSpec::of(v.compiled(), big)).source);
  }
  for (const GemmProblem& small : {GemmProblem::linear(2048, 4096, 2048), GemmProblem::linear(16, 57344, 8192)})
    EXPECT_EQ(with_tile_orders(configs_for(small, kSms), small).size(), configs_for(small, kSms).size()) << small.str();
  Verdict v = check(Config{128, 128, 64, 1, 1, Schedule::cooperative, false, Raster::heuristic, 4}, GemmProblem::linear(4096, 4096, 4096));
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("swizzle"), std::string::npos) << v.reason;
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

// precompile() reports an unsupported problem as skipped and a --configs id that cannot run a
// problem as an error, both without building anything (so this runs without nvcc too).
TEST(CutlassConfigs, PrecompileReportsWhatItCannotBuild) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gt-cutlass-precompile-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EngineOptions o;
  o.backends = {"cutlass"};
  o.compile.artifacts = dir;
  PrecompileRequest req;
  req.gemm = {GemmProblem::linear(64, 64, 64, DType::fp32), GemmProblem::linear(256, 256, 256)};
  req.candidates = {"co64x64x64c1x1"};  // cooperative needs tile M >= 128
  auto items = precompile(req, o, hopper_target(kSms));
  if (items.size() == 1 && items[0].skipped) GTEST_SKIP() << "cutlass " << items[0].error;
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(items[0].skipped);
  EXPECT_NE(items[0].error.find("does not support"), std::string::npos) << items[0].error;
  EXPECT_FALSE(items[1].skipped);
  EXPECT_TRUE(items[1].key.empty());
  EXPECT_EQ(items[1].candidate, "co64x64x64c1x1");
  EXPECT_NE(items[1].error.find("co64x64x64c1x1 cannot run"), std::string::npos) << items[1].error;
  fs::remove_all(dir);
}

// Load-only mode (a kernel pack on a machine without nvcc): the backend offers exactly the
// configs whose artifact the store holds, and a problem with none has no candidates (saying why).
TEST(CutlassConfigs, LoadOnlyOffersWhatTheStoreHolds) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gt-cutlass-loadonly-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "cutlass");
  // What a build machine records next to its artifacts.
  std::ofstream(dir / "cutlass" / "toolchain.json")
      << nlohmann::json{{"format", 1},         {"nvcc", "fake nvcc, release 13.0, V13.0.88"},
                        {"nvcc_version", "13.0.88"}, {"cutlass", "4.2.0"},
                        {"kernel", std::string(64, 'a')}, {"flags", compile::nvcc_flags()}}
             .dump(2);
  CompileOptions co;
  co.artifacts = dir;
  co.nvcc = dir / "no-such-nvcc";  // no compiler here: load-only
  co = resolve(co);
  compile::ArtifactCache cache(co, compile::make_toolchains(co, Log()), Log());
  ASSERT_TRUE(cache.available("cutlass")) << cache.available("cutlass").reason;
  ASSERT_TRUE(cache.load_only("cutlass"));
  const GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
  const auto ranked = configs_for(p, kSms, 16);
  ASSERT_GE(ranked.size(), 3u);
  const Config held = ranked[2];
  auto put = [&](const Config& c, const GemmProblem& q) {
    const compile::Job j = job(InstanceSpec::of(c, q));
    cache.store().put(cache.key(j), "not really a shared object", j.meta);
  };
  put(held, p);

  auto backend = make_cutlass_backend(BackendContext{hopper_target(kSms), Log(), &cache, 16});
  ASSERT_TRUE(backend->available()) << backend->available().reason;
  EXPECT_TRUE(backend->supports(p)) << backend->supports(p).reason;
  auto cands = backend->candidates(p);
  ASSERT_EQ(cands.size(), 3u);  // the held config, then its two tile orders (64 MiB of operands)
  EXPECT_EQ(cands[0]->id(), held.id());
  EXPECT_EQ(cands[1]->id(), held.id() + "rm8");
  EXPECT_EQ(cands[2]->id(), held.id() + "rn8");
  // Another shape of the same instance class: the same instance serves it.
  const GemmProblem q = GemmProblem::linear(8192, 8192, 4096);
  if (auto rq = configs_for(q, kSms, 16); std::find(rq.begin(), rq.end(), held) != rq.end())
    EXPECT_FALSE(backend->candidates(q).empty());
  // A pack instance outside this problem's unrestricted top 16 (valid and not pruned, but ranked
  // away by the cap) is still offered: the ranking runs over what the store holds. (The GPU test's
  // fixed configs at 333x776x328 are such instances.)
  const GemmProblem r = GemmProblem::linear(333, 776, 328);
  const auto all_r = configs_for(r, kSms, 0), top_r = configs_for(r, kSms, 16);
  ASSERT_GT(all_r.size(), top_r.size());
  const Config outside = all_r.back();
  ASSERT_EQ(std::find(top_r.begin(), top_r.end(), outside), top_r.end());
  put(outside, r);
  std::vector<std::string> ids;
  for (auto& c : backend->candidates(r)) ids.push_back(c->id());
  EXPECT_NE(std::find(ids.begin(), ids.end(), outside.id()), ids.end()) << outside.id() << " not offered";
  // Another instance class (fp16): nothing in the store, so no candidates, and the error says why.
  try {
    backend->candidates(GemmProblem::linear(4096, 4096, 4096, DType::fp16));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("load-only"), std::string::npos) << e.message();
  }
  fs::remove_all(dir);
}

// Restricting the ranking (configs_for's `admit`) to a set holding the whole unrestricted result
// gives that result, in order: a pack that covers a problem's candidates changes nothing. A
// restriction to configs outside the top list still yields candidates, capped and ranked.
TEST(CutlassConfigs, AdmitKeepsTheRankingAndTheCap) {
  for (const GemmProblem& p : {GemmProblem::linear(4096, 4096, 4096), GemmProblem::linear(333, 776, 328),
                               GemmProblem::linear(16, 1000, 512), GemmProblem::linear(2048, 1024, 1024, DType::e4m3, DType::bf16)}) {
    SCOPED_TRACE(p.str());
    const auto top = configs_for(p, kSms, 16), all = configs_for(p, kSms, 0);
    ASSERT_FALSE(top.empty());
    // Admit the top list plus every other config (the pack holds more than needed).
    EXPECT_EQ(configs_for(p, kSms, 16, [](const Config&) { return true; }), top);
    EXPECT_EQ(configs_for(p, kSms, 16, [&](const Config& c) { return std::find(top.begin(), top.end(), c) != top.end(); }),
              top);
    // Admit only what the top list leaves out: those, at most 16, in cost order.
    auto rest = configs_for(p, kSms, 16, [&](const Config& c) { return std::find(top.begin(), top.end(), c) == top.end(); });
    EXPECT_EQ(rest.size(), std::min<size_t>(16, all.size() - top.size()));
    for (size_t i = 0; i < rest.size(); ++i) {
      EXPECT_EQ(std::find(top.begin(), top.end(), rest[i]), top.end()) << rest[i].id();
      if (i) EXPECT_LE(cost_estimate(rest[i - 1], p, kSms), cost_estimate(rest[i], p, kSms));
    }
  }
}

TEST(CutlassConfigs, H200Description) {
  DeviceInfo d = hopper_target();
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_LT(d.index, 0);
}

}  // namespace
}  // namespace gemmtune::cutlass_backend

namespace gemmtune::cutlass_backend {
namespace {

// The grouped kernels' scope: bf16 / fp16 with D in A's dtype, no epilogue extras, 16-byte rows;
// every refusal says why.
TEST(CutlassGrouped, VerdictGivesReasons) {
  auto ok = GroupedGemmProblem::make(8, 14336, 4096, 512);
  EXPECT_TRUE(grouped_verdict(ok));
  auto why = [&](GroupedGemmProblem p) { return grouped_verdict(p).reason; };
  EXPECT_NE(why(GroupedGemmProblem::make(8, 256, 256, 64, DType::e4m3)).find("bf16 or fp16"), std::string::npos);
  auto f32 = ok;
  f32.d = DType::fp32;
  EXPECT_NE(why(f32).find("A's dtype"), std::string::npos);
  auto bias = ok;
  bias.bias = true;
  EXPECT_NE(why(bias).find("bias"), std::string::npos);
  auto odd = GroupedGemmProblem::make(8, 250, 256, 64);
  EXPECT_NE(why(odd).find("multiples of 8"), std::string::npos);
}

// Every offered config passes the template's rules, round-trips its id, and short groups get the
// 64-row tiles first; the masked layout and fp16 are other instances (texts and sources differ).
TEST(CutlassGrouped, ConfigsAndInstances) {
  for (int64_t rows : {16, 64, 100, 256, 512, 4096}) {
    auto p = GroupedGemmProblem::make(8, 4096, 2048, rows);
    const auto configs = grouped_configs(p);
    ASSERT_GE(configs.size(), 6u) << rows;
    EXPECT_LE(configs.size(), 8u);
    std::set<std::string> ids;
    for (const auto& c : configs) {
      EXPECT_TRUE(grouped_check(c, p)) << c.id() << ": " << grouped_check(c, p).reason;
      EXPECT_EQ(Config::parse(c.id()), c);
      ids.insert(c.id());
    }
    EXPECT_EQ(ids.size(), configs.size()) << "duplicates at " << rows;
    if (rows <= 64) EXPECT_EQ(configs.front().tile_m, 64) << rows;
    if (rows > 256) EXPECT_EQ(configs.front().schedule, Schedule::cooperative) << rows;
  }
  auto p = GroupedGemmProblem::make(8, 4096, 2048, 512);
  const Config c = grouped_configs(p).front();
  const GroupedInstanceSpec s = GroupedInstanceSpec::of(c, p);
  EXPECT_EQ(s.text(), "grouped a=bf16 layout=contiguous cfg=" + c.id());
  EXPECT_NE(s.source().find("gk::Sm90Grouped<gk::Dt::bf16, 128, 256, 64, 2, 1, gk::Sched::cooperative, false>"),
            std::string::npos)
      << s.source();
  EXPECT_NE(s.source().find("GT_CUTLASS_DEFINE_ENTRY_POINTS(Instance, \"" + s.text() + "\")"), std::string::npos);
  auto m = p;
  m.layout = GroupedLayout::masked;
  EXPECT_NE(GroupedInstanceSpec::of(c, m).source(), s.source());
  auto h = p;
  h.a = h.d = DType::fp16;
  EXPECT_NE(GroupedInstanceSpec::of(c, h).text(), s.text());
  // A job's family: instances of one dtype and layout compile together.
  EXPECT_EQ(grouped_job(s).family, "grouped a=bf16 layout=contiguous");
  // Configs the grouped template does not take.
  Config swap = c;
  swap.swap_ab = true;
  EXPECT_FALSE(grouped_check(swap, p));
  Config n192 = c;
  n192.tile_n = 192;
  EXPECT_FALSE(grouped_check(n192, p));
  Config odd = c;
  odd.raster = Raster::along_n, odd.swizzle = 3;
  EXPECT_FALSE(grouped_check(odd, p));
  // Long groups get tile-order variants of their first configs, sharing those instances.
  const auto ranked = grouped_configs(p);
  const auto ordered = with_grouped_tile_orders(ranked, p);
  ASSERT_EQ(ordered.size(), ranked.size() + 2 * size_t(kOrderedConfigs));
  for (size_t i = ranked.size(); i < ordered.size(); ++i) {
    const Config& v = ordered[i];
    EXPECT_TRUE(grouped_check(v, p)) << v.id();
    EXPECT_EQ(v.swizzle, 8);
    EXPECT_EQ(Config::parse(v.id()), v);
    EXPECT_EQ(GroupedInstanceSpec::of(v, p).source(), GroupedInstanceSpec::of(ranked[(i - ranked.size()) / 2], p).source());
  }
  auto short_groups = p;
  short_groups.rows_per_group = 64;
  EXPECT_EQ(with_grouped_tile_orders(grouped_configs(short_groups), short_groups).size(),
            grouped_configs(short_groups).size());
}

// Groups never ask for more memory than the machine has: 8 on this 2-core, 24 GB machine's two
// slots, fewer with more slots or less memory, none (1) where one instance a slot barely fits.
TEST(CutlassGroups, GroupLimitFollowsTheMemory) {
  EXPECT_EQ(compile::nvcc_group_limit(22.4, 2), 8u);
  EXPECT_EQ(compile::nvcc_group_limit(120, 16), 5u);
  EXPECT_EQ(compile::nvcc_group_limit(12, 2), 3u);
  EXPECT_EQ(compile::nvcc_group_limit(32, 8), 1u);
  EXPECT_EQ(compile::nvcc_group_limit(0, 2), 1u);  // unknown memory: no groups
  EXPECT_EQ(compile::nvcc_group_limit(1000, 1), 8u);
  EXPECT_EQ(compile::nvcc_group_limit(22.4, 0), 8u);  // slots below 1 count as 1
}

}  // namespace
}  // namespace gemmtune::cutlass_backend

