// Host-only tests of the CuTe DSL grouped GEMM backend (src/backends/cutedsl/grouped.hpp): the
// compile params, the problem and config rules, the ranked configs of MoE shapes, the backend's
// wiring; and (when the DSL is installed in the project's .venv) one real compile through the
// worker, loaded with dlopen (no GPU: run() must then fail cleanly), plus load-only mode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "backends/cutedsl/grouped.hpp"
#include "gemmtune/error.hpp"
#include "gpu/cutedsl_grouped_problems.hpp"
#include "host/cutedsl_compile.hpp"
#include "host/problems.hpp"

namespace gemmtune::cutedsl {
namespace {

GroupedGemmProblem mixtral(int64_t rows, DType t = DType::bf16) { return GroupedGemmProblem::make(8, 14336, 4096, rows, t); }
GroupedGemmProblem deepseek(int64_t rows, DType t = DType::bf16) { return GroupedGemmProblem::make(32, 7168, 2048, rows, t); }

// An e4m3 rowwise masked problem with bias and silu.
GroupedGemmProblem fp8_masked() {
  GroupedGemmProblem p = deepseek(64, DType::e4m3);
  p.layout = GroupedLayout::masked, p.bias = true, p.act = Activation::silu;
  return p;
}

TEST(CutedslGrouped, ParamsCarryEverythingTheArtifactBakesIn) {
  const GroupedGemmProblem bf16 = mixtral(512);
  EXPECT_EQ(grouped_params(Config{128, 256, 1, 2}, bf16).dump(),
            R"({"ab_dtype":"bf16","act":"none","bias":false,"cluster_n":2,"d_dtype":"bf16","layout":"contiguous",)"
            R"("op":"grouped","scale":"none","stages":0,"tile_m":128,"tile_n":256})");
  const GroupedGemmProblem f8 = fp8_masked();
  EXPECT_EQ(grouped_params(Config{64, 128, 1, 1}, f8).dump(),
            R"({"ab_dtype":"e4m3","act":"silu","bias":true,"cluster_n":1,"d_dtype":"bf16","layout":"masked",)"
            R"("op":"grouped","scale":"rowwise","stages":0,"tile_m":64,"tile_n":128})");
  GroupedGemmProblem tw = f8;
  tw.scale = ScaleMode::tensorwise, tw.d = DType::fp16, tw.act = Activation::gelu_tanh;
  const nlohmann::json j = grouped_params(Config{128, 64, 1, 2, 3}, tw);
  EXPECT_EQ(j["scale"], "tensorwise");
  EXPECT_EQ(j["d_dtype"], "fp16");
  EXPECT_EQ(j["act"], "gelu_tanh");
  EXPECT_EQ(j["stages"], 3);
  EXPECT_EQ(j.size(), 11u);
  // Groups, n, k, rows per group, alpha and skew stay run-time arguments (one artifact for all).
  GroupedGemmProblem q = f8;
  q.groups = 3, q.n = 256, q.k = 512, q.rows_per_group = 7, q.alpha = 2, q.skew = 0;
  EXPECT_EQ(grouped_params(Config{64, 128, 1, 1}, q), grouped_params(Config{64, 128, 1, 1}, f8));
  const compile::Job job = grouped_job(Config{64, 128, 1, 1}, f8);
  EXPECT_EQ(job.toolchain, "cutedsl");
  EXPECT_EQ(job.params, grouped_params(Config{64, 128, 1, 1}, f8));
  EXPECT_NE(job.what.find("grouped 64x128c1x1"), std::string::npos) << job.what;
}

TEST(CutedslGrouped, VerdictGivesReasons) {
  auto reason = [](const GroupedGemmProblem& p) { return grouped_verdict(p).reason; };
  EXPECT_TRUE(grouped_verdict(mixtral(512)));
  EXPECT_TRUE(grouped_verdict(fp8_masked()));
  GroupedGemmProblem tw = mixtral(64, DType::e4m3);
  tw.scale = ScaleMode::tensorwise, tw.d = DType::fp16;
  EXPECT_TRUE(grouped_verdict(tw)) << reason(tw);
  GroupedGemmProblem mixed = deepseek(64, DType::fp16);  // 16-bit D in another dtype than A's
  mixed.d = DType::bf16, mixed.bias = true, mixed.act = Activation::relu;
  EXPECT_TRUE(grouped_verdict(mixed)) << reason(mixed);

  GroupedGemmProblem f32 = mixtral(64);
  f32.d = DType::fp32;
  EXPECT_FALSE(grouped_verdict(f32));
  EXPECT_NE(reason(f32).find("16-bit outputs"), std::string::npos) << reason(f32);
  GroupedGemmProblem block = mixtral(64, DType::e4m3);
  block.scale = ScaleMode::block;
  EXPECT_NE(reason(block).find("block scales"), std::string::npos) << reason(block);
  GroupedGemmProblem odd_k = GroupedGemmProblem::make(4, 256, 100, 64);  // 200 bytes
  EXPECT_FALSE(grouped_verdict(odd_k));
  EXPECT_NE(reason(odd_k).find("k = 100"), std::string::npos) << reason(odd_k);
  EXPECT_TRUE(grouped_verdict(GroupedGemmProblem::make(4, 256, 104, 64)));
  GroupedGemmProblem odd_k8 = GroupedGemmProblem::make(4, 256, 104, 64, DType::e4m3);  // 104 bytes
  EXPECT_NE(reason(odd_k8).find("k = 104"), std::string::npos) << reason(odd_k8);
  GroupedGemmProblem odd_n = GroupedGemmProblem::make(4, 100, 256, 64);  // D rows of 200 bytes
  EXPECT_NE(reason(odd_n).find("n = 100"), std::string::npos) << reason(odd_n);
  GroupedGemmProblem wide = GroupedGemmProblem::make(1024, int64_t(1) << 22, 64, 1);
  EXPECT_NE(reason(wide).find("groups * n"), std::string::npos) << reason(wide);
}

TEST(CutedslGrouped, CheckRestatesTheKernelRules) {
  const GroupedGemmProblem p = mixtral(512);
  EXPECT_TRUE(grouped_check(Config{128, 256, 1, 2}, p));
  EXPECT_TRUE(grouped_check(Config{64, 64, 1, 1}, p));
  EXPECT_TRUE(grouped_check(Config{128, 128, 1, 1, 6}, p));  // 6 stages fit (the GEMM's arithmetic)
  auto why = [&](const Config& c, const GroupedGemmProblem& q) { return grouped_check(c, q).reason; };
  EXPECT_NE(why(Config{128, 128, 1, 1, 7}, p).find("stages"), std::string::npos);
  EXPECT_NE(why(Config{128, 128, 1, 1, 0, true}, p).find("swap-AB"), std::string::npos);
  EXPECT_NE(why(Config{128, 128, 2, 1}, p).find("along N only"), std::string::npos);
  EXPECT_NE(why(Config{128, 32}, p).find("tile N"), std::string::npos);
  EXPECT_NE(why(Config{256, 128}, p).find("tile M"), std::string::npos);
  const GroupedGemmProblem f8 = fp8_masked();
  EXPECT_TRUE(grouped_check(Config{128, 128, 1, 2}, f8));
  EXPECT_NE(why(Config{128, 256, 1, 1}, f8).find("registers"), std::string::npos) << why(Config{128, 256, 1, 1}, f8);
  // A problem the kernel does not take fails every config with the problem's reason.
  GroupedGemmProblem f32 = p;
  f32.d = DType::fp32;
  EXPECT_NE(why(Config{128, 128}, f32).find("16-bit outputs"), std::string::npos);
}

TEST(CutedslGrouped, ConfigsRankMoeShapes) {
  const GroupedGemmProblem shapes[] = {mixtral(64), mixtral(4096), mixtral(64, DType::e4m3), mixtral(4096, DType::e4m3),
                                       deepseek(64), deepseek(200), deepseek(512), fp8_masked()};
  for (const GroupedGemmProblem& p : shapes) {
    SCOPED_TRACE(p.str());
    const std::vector<Config> cs = grouped_configs(p);
    ASSERT_GE(cs.size(), 4u);
    EXPECT_LE(cs.size(), 16u);
    std::set<std::string> ids;
    for (const Config& c : cs) {
      EXPECT_TRUE(grouped_check(c, p)) << c.id() << ": " << grouped_check(c, p).reason;
      EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate " << c.id();
      EXPECT_EQ(Config::parse(c.id()), c) << c.id();
      EXPECT_EQ(c.cluster_m, 1);
      EXPECT_FALSE(c.swap_ab);
      EXPECT_EQ(c.stages, 0);
    }
    // Short groups: a 64-row tile first; long ones: 128-row tiles with a 1x2 cluster first.
    if (p.rows_bucket() <= 64) EXPECT_EQ(cs.front().tile_m, 64) << cs.front().id();
    if (p.rows_bucket() > 256) EXPECT_EQ(cs.front().tile_m, 128) << cs.front().id();
    if (p.rows_bucket() > 256) EXPECT_EQ(cs.front().cluster_n, 2) << cs.front().id();
  }
  EXPECT_EQ(grouped_configs(mixtral(64)).front().id(), "64x256c1x1");
  EXPECT_EQ(grouped_configs(mixtral(4096)).front().id(), "128x256c1x2");
  EXPECT_EQ(grouped_configs(mixtral(4096, DType::e4m3)).front().id(), "128x128c1x2");  // fp8: tile N <= 128
  EXPECT_EQ(grouped_configs(deepseek(200)).front().id(), "128x128c1x1");
  // n of one 64-wide tile: no wider tiles, no cluster along N.
  for (const Config& c : grouped_configs(GroupedGemmProblem::make(4, 64, 256, 4096))) {
    EXPECT_EQ(c.tile_n, 64) << c.id();
    EXPECT_EQ(c.cluster_n, 1) << c.id();
  }
  EXPECT_FALSE(grouped_configs(GroupedGemmProblem::make(4, 64, 256, 4096)).empty());
  // The cap keeps the best; `admit` (load-only) filters before it, in rank order.
  const std::vector<Config> all = grouped_configs(mixtral(4096));
  const std::vector<Config> two = grouped_configs(mixtral(4096), 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(std::equal(two.begin(), two.end(), all.begin()));
  const std::vector<Config> m64 = grouped_configs(mixtral(4096), 16, [](const Config& c) { return c.tile_m == 64; });
  ASSERT_FALSE(m64.empty());
  for (const Config& c : m64) EXPECT_EQ(c.tile_m, 64) << c.id();
  // Problems the kernel does not take have none.
  GroupedGemmProblem block = mixtral(64, DType::e4m3);
  block.scale = ScaleMode::block;
  EXPECT_TRUE(grouped_configs(block).empty());
}

TEST(CutedslGrouped, BackendIsWiredAndRefusesWithReasons) {
  BackendContext ctx;
  ctx.device.index = 0, ctx.device.cc_major = 8, ctx.device.cc_minor = 0, ctx.device.sm_count = 108;
  auto b = make_cutedsl_grouped_backend(ctx);
  EXPECT_EQ(b->name(), "cutedsl");
  EXPECT_FALSE(b->available());
  EXPECT_NE(b->available().reason.find("sm_90a"), std::string::npos) << b->available().reason;
  EXPECT_EQ(b->version(), "unavailable");
  EXPECT_TRUE(b->supports(mixtral(512))) << b->supports(mixtral(512)).reason;
  GroupedGemmProblem block = mixtral(64, DType::e4m3);
  block.scale = ScaleMode::block;
  EXPECT_NE(b->supports(block).reason.find("block scales"), std::string::npos) << b->supports(block).reason;
  EXPECT_THROW(b->candidates(mixtral(512)), Error);  // not available here
}

// The GPU test's problems (gpu/cutedsl_grouped_problems.hpp) are valid and the kernel takes them
// (checked here, not first on the GPU machine), with several configs each.
TEST(CutedslGrouped, GpuTestProblemsAreValidAndSupported) {
  size_t configs = 0;
  for (const GroupedGemmProblem& p : cutedsl_grouped_test::problems()) {
    EXPECT_NO_THROW(p.validate()) << p.str();
    EXPECT_TRUE(grouped_verdict(p)) << p.str() << ": " << grouped_verdict(p).reason;
    EXPECT_GE(grouped_configs(p).size(), 3u) << p.str();
    configs += grouped_configs(p).size();
  }
  EXPECT_GE(configs, 40u);
}

// ---- the compile path, for real, when .venv has the DSL ------------------------------------------

TEST(CutedslGroupedCompiler, CompilesLoadsAndServesLoadOnly) {
  host_test::TempDir s("gemmtune-cutedsl-grouped-test-");
  auto c = host_test::artifact_cache(host_test::compile_options(s.root, 1));
  if (Verdict v = c->available("cutedsl"); !v) GTEST_SKIP() << "no CuTe DSL compile worker: " << v.reason;

  const GroupedGemmProblem p = fp8_masked();
  const Config cfg{64, 128, 1, 2};
  const compile::Job j = grouped_job(cfg, p);
  compile::Built built = c->build(j);
  EXPECT_FALSE(built.hit);
  std::printf("cutedsl grouped compile of %s: %.2f s\n", cfg.id().c_str(), built.seconds);
  ASSERT_EQ(built.deps.size(), 1u);

  // The .so loads (no GPU needed), reports its params as its config, checks arguments, and fails
  // a launch cleanly without a driver.
  auto lib = GroupedLibrary::open(built, j.params.dump());
  EXPECT_STREQ(lib->config(), j.params.dump().c_str());
  GtCutedslGroupedArgs a{};
  a.abi_version = GT_CUTEDSL_GROUPED_ABI_VERSION;
  a.groups = p.groups, a.n = p.n, a.k = p.k, a.capacity = p.rows_per_group, a.alpha = 1;
  EXPECT_EQ(lib->can_implement(&a), GT_CUTEDSL_OK);  // sizes only, as prepare() asks
  GtCutedslGroupedArgs bad = a;
  bad.abi_version = GT_CUTEDSL_ABI_VERSION + 100;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_BAD_ABI);
  bad = a, bad.k = 2056;  // 2056 bytes: not a 16-byte multiple
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_MISALIGNED);
  bad = a, bad.flags = 1;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_BAD_ARGS);
  bad = a, bad.capacity = 0;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_BAD_ARGS);
  EXPECT_EQ(lib->run(&a, nullptr), GT_CUTEDSL_BAD_ARGS);  // no buffers
  if (access("/dev/nvidia0", F_OK) != 0) {
    alignas(16) static char dummy[64];
    GtCutedslGroupedArgs run = a;
    run.a = dummy, run.b = dummy, run.d = dummy, run.bias = dummy;
    run.rows = reinterpret_cast<const int32_t*>(dummy);
    run.scale_a = reinterpret_cast<const float*>(dummy), run.scale_b = reinterpret_cast<const float*>(dummy);
    const int st = lib->run(&run, nullptr);
    EXPECT_NE(st, GT_CUTEDSL_OK);
    EXPECT_STRNE(lib->status_text(st), "");
  }
  EXPECT_THROW(GroupedLibrary::open(built, "something else"), Error);

  // Load-only: a second cache on the same store that never compiles finds the artifact, and the
  // backend over it offers exactly the stored config.
  auto reader = host_test::artifact_cache(host_test::compile_options(s.root, 1, {"cutedsl"}));
  ASSERT_TRUE(reader->available("cutedsl")) << reader->available("cutedsl").reason;
  EXPECT_TRUE(reader->build(j).hit);
  BackendContext ctx;
  ctx.device = hopper_target();
  ctx.artifacts = reader.get();
  auto b = make_cutedsl_grouped_backend(ctx);
  ASSERT_TRUE(b->available()) << b->available().reason;
  EXPECT_NE(b->version().find(" src="), std::string::npos) << b->version();
  ASSERT_TRUE(b->supports(p)) << b->supports(p).reason;
  auto cands = b->candidates(p);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0]->id(), cfg.id());
  EXPECT_EQ(cands[0]->backend(), "cutedsl");
  EXPECT_EQ(cands[0]->name(), "grouped " + cfg.name());
  EXPECT_FALSE(cands[0]->can_overlap());
  ASSERT_EQ(cands[0]->jobs().size(), 1u);
  EXPECT_NO_THROW(cands[0]->prepare(std::vector<compile::Built>{reader->build(cands[0]->jobs()[0])}));
  EXPECT_EQ(b->load(p, cfg.id())->id(), cfg.id());
  EXPECT_THROW(b->load(p, "128x256c1x1"), Error);  // fp8: too many registers
  GroupedGemmProblem other = p;
  other.act = Activation::relu;
  EXPECT_FALSE(b->supports(other));
  EXPECT_NE(b->supports(other).reason.find("load-only"), std::string::npos) << b->supports(other).reason;
}

}  // namespace
}  // namespace gemmtune::cutedsl
