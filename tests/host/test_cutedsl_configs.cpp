// Host-only tests of the CuTe DSL backend: config space, pruning, ids, params, and (when the
// DSL is installed in the project's .venv) one real compile through the worker into a temporary
// artifact store, loaded with dlopen (no GPU: run() must then fail cleanly), plus load-only mode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <set>

#include "backends/cutedsl/configs.hpp"
#include "backends/cutedsl/cutedsl_backend.hpp"
#include "gemmtune/error.hpp"
#include "host/cutedsl_compile.hpp"
#include "host/problems.hpp"

namespace gemmtune::cutedsl {
namespace {
namespace fs = std::filesystem;

constexpr int kSms = 132;

using host_test::sample_problems;

TEST(CutedslConfigs, IdRoundTripsForEveryValidConfig) {
  int n = 0;
  for (const GemmProblem& p : sample_problems())
    for (const Config& c : valid_configs(p)) {
      EXPECT_EQ(Config::parse(c.id()), c) << c.id();
      EXPECT_FALSE(c.name().empty());
      ++n;
    }
  EXPECT_GT(n, 100);
  EXPECT_EQ(Config::parse("128x256c2x1").tile_n, 256);
  EXPECT_EQ(Config::parse("128x256c2x1").cluster_m, 2);
  EXPECT_TRUE(Config::parse("64x32c1x2s").swap_ab);
  EXPECT_EQ(Config::parse("128x128c1x1p3").stages, 3);
  EXPECT_EQ(Config::parse("128x128c1x1p3s").id(), "128x128c1x1p3s");
}

TEST(CutedslConfigs, ParseRejectsMalformedIds) {
  for (const char* bad : {"", "128", "128x128", "128x128c1", "128x128c1x1x", "96x128c1x1", "128x48c1x1", "256x128c1x1",
                          "128x128c2x2", "128x128c4x1", "0128x128c1x1", "128x128c1x1ss", "128x128c1x1p1",
                          "128x128c1x1p0", "128x128c1x1sp3", "128x128c1x1p03", "co128x128x64c1x1"})
    EXPECT_THROW(Config::parse(bad), Error) << bad;
}

TEST(CutedslConfigs, SharedMemoryArithmeticMatchesTheKernel) {
  // python/gemmtune/cutedsl/gemm_sm90.py plan_smem, worked by hand:
  // bf16 128x128: stage = 256*64*2 = 32768, epilogue = 2*128*32*2 = 16384,
  // (232448 - 4096 - 16384) / 32768 = 6.47 -> 6 stages.
  GemmProblem bf16 = GemmProblem::linear(4096, 4096, 4096);
  EXPECT_EQ(tile_k(bf16), 64);
  EXPECT_EQ(stage_bytes(Config{128, 128}, bf16), 32768);
  EXPECT_EQ(epilogue_bytes(Config{128, 128}, bf16), 16384);
  EXPECT_EQ(max_stages(Config{128, 128}, bf16), 6);
  EXPECT_EQ(max_stages(Config{128, 256}, bf16), 4);  // (232448-4096-16384)/49152
  EXPECT_EQ(max_stages(Config{64, 32}, bf16), 17);   // epilogue 2*64*32*2 = 8192; stage 96*64*2
  // fp8: tile K 128 (128 bytes), same bytes per stage as bf16 at the same tile.
  GemmProblem fp8 = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  EXPECT_EQ(tile_k(fp8), 128);
  EXPECT_EQ(stage_bytes(Config{128, 128}, fp8), 32768);
  // Block scales have their own ring beside the stages: 2 stages of (tile rows x 4 k blocks +
  // 32) fp32 at the smallest chunk: 128 rows (128x128, 128x192), swap-AB 32 columns (64x32).
  GemmProblem blk = fp8;
  blk.scale = ScaleMode::block;
  EXPECT_EQ(stage_bytes(Config{128, 128}, blk), 32768);
  EXPECT_EQ(scale_ring_bytes(Config{128, 128}, blk), 2 * 4 * (128 * 4 + 32));
  EXPECT_EQ(scale_ring_bytes(Config{128, 128}, fp8), 0);
  EXPECT_EQ(max_stages(Config{128, 128}, blk), 6);  // (232448-4096-16384-4352)/32768
  EXPECT_EQ(max_stages(Config{128, 192}, blk), 5);  // (232448-4096-16384-4352)/40960
  Config swap{64, 32};
  swap.swap_ab = true;
  EXPECT_EQ(scale_ring_bytes(swap, blk), 2 * 4 * (32 * 4 + 32));
}

TEST(CutedslConfigs, CheckRestatesTheKernelRules) {
  GemmProblem p = GemmProblem::linear(4096, 4096, 4096);
  EXPECT_TRUE(check(Config{128, 128}, p));
  EXPECT_TRUE(check(Config{128, 256}, p));  // 128 accumulator registers per thread
  EXPECT_TRUE(check(Config{64, 256}, p));
  EXPECT_TRUE(check(Config{128, 128, 2, 1}, p));
  EXPECT_TRUE(check(Config{128, 128, 1, 1, 6}, p));
  EXPECT_FALSE(check(Config{128, 128, 1, 1, 7}, p));   // 7 stages do not fit
  EXPECT_FALSE(check(Config{256, 128}, p));            // tile M 64 or 128
  EXPECT_FALSE(check(Config{128, 48}, p));             // tile N
  EXPECT_FALSE(check(Config{128, 128, 2, 2}, p));      // cluster
  GemmProblem f8 = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  EXPECT_TRUE(check(Config{128, 128}, f8));
  EXPECT_EQ(accumulator_registers(Config{128, 128}, f8), 192);  // three tiles: overlapped promotion
  EXPECT_TRUE(check(Config{128, 192}, f8));
  EXPECT_EQ(accumulator_registers(Config{128, 192}, f8), 192);  // two tiles: promoted after each batch
  Verdict v = check(Config{128, 256}, f8);  // two tiles of 128: 256 registers
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("registers"), std::string::npos) << v.reason;
  // Block scales: tile N 192 straddles two 128-wide scale blocks (three 64-column bands).
  GemmProblem f8b = f8;
  f8b.scale = ScaleMode::block;
  EXPECT_TRUE(check(Config{128, 192}, f8b));
  EXPECT_TRUE(check(Config{128, 192, 2, 1}, f8b));
}

TEST(CutedslConfigs, Tile192IsOfferedForFp8Only) {
  auto has_192 = [](const GemmProblem& p) {
    for (const Config& c : valid_configs(p))
      if (c.tile_n == 192) return true;
    return false;
  };
  EXPECT_TRUE(has_192(GemmProblem::linear(4096, 4096, 4096, DType::e4m3)));
  GemmProblem block = GemmProblem::linear(4096, 4096, 4096, DType::e4m3);
  block.scale = ScaleMode::block;
  EXPECT_TRUE(has_192(block));
  EXPECT_FALSE(has_192(GemmProblem::linear(4096, 4096, 4096)));  // bf16: 128 and 256
}

TEST(CutedslConfigs, ProblemVerdictGivesReasons) {
  EXPECT_TRUE(problem_verdict(GemmProblem::linear(4096, 4096, 4096)));
  EXPECT_TRUE(problem_verdict(GemmProblem::linear(4096, 4096, 4096, DType::e4m3)));
  EXPECT_TRUE(problem_verdict(GemmProblem::linear(7, 136, 64)));  // any m: TMA clips
  EXPECT_FALSE(problem_verdict(GemmProblem::linear(7, 129, 64)));  // ldd 129 bf16: 258 bytes
  auto reason = [](const GemmProblem& p) { return problem_verdict(p).reason; };
  EXPECT_NE(reason(GemmProblem::linear(64, 64, 64, DType::fp32)).find("inputs"), std::string::npos);
  EXPECT_NE(reason(GemmProblem::linear(64, 64, 64, DType::bf16, DType::fp32)).find("output"), std::string::npos);
  GemmProblem odd_k = GemmProblem::linear(64, 64, 7);  // lda = 7 bf16 = 14 bytes
  EXPECT_NE(reason(odd_k).find("lda"), std::string::npos) << reason(odd_k);
  GemmProblem e5 = GemmProblem::linear(64, 64, 64, DType::e5m2);
  EXPECT_NE(reason(e5).find("e5m2"), std::string::npos);
  GemmProblem f8col = GemmProblem::linear(64, 64, 64, DType::e4m3);
  f8col.a.layout = Layout::col;
  EXPECT_NE(reason(f8col).find("K-major"), std::string::npos);
  GemmProblem odd_c = GemmProblem::linear(64, 64, 64);  // C is read per element: any ldc
  odd_c.beta = 1, odd_c.c.ld = 67;
  EXPECT_TRUE(problem_verdict(odd_c)) << reason(odd_c);
  // Block scales: A's are loaded by TMA, each k block's m scales on 16 bytes.
  GemmProblem blk = GemmProblem::linear(132, 256, 512, DType::e4m3);
  blk.scale = ScaleMode::block;
  EXPECT_TRUE(problem_verdict(blk)) << reason(blk);
  blk.m = 130;
  EXPECT_NE(reason(blk).find("multiple of 4"), std::string::npos) << reason(blk);
}

TEST(CutedslConfigs, ConfigsForPrunesAndRanks) {
  for (const GemmProblem& p : sample_problems()) {
    SCOPED_TRACE(p.str());
    auto cs = configs_for(p, kSms, 16);
    ASSERT_FALSE(cs.empty());
    EXPECT_LE(cs.size(), 16u);
    std::set<std::string> ids;
    for (const Config& c : cs) {
      EXPECT_TRUE(check(c, p)) << c.id();
      EXPECT_TRUE(ids.insert(c.id()).second) << "duplicate " << c.id();
      if (c.swap_ab) EXPECT_LE(p.m, 128) << c.id();
      EXPECT_EQ(c.stages, 0) << "ranked configs use the automatic stage count";
    }
    for (size_t i = 1; i < cs.size(); ++i)
      EXPECT_LE(cost_estimate(cs[i - 1], p, kSms), cost_estimate(cs[i], p, kSms));
  }
  // Decode shape: swap-AB offered, tile N 32 (the kernel's N is m = 1) among them.
  auto dec = configs_for(GemmProblem::linear(1, 4096, 4096), kSms, 64);
  EXPECT_TRUE(std::any_of(dec.begin(), dec.end(), [](const Config& c) { return c.swap_ab && c.tile_n == 32; }));
  // No swap-AB for a large m; no cluster along a single-tile dimension.
  for (const Config& c : configs_for(GemmProblem::linear(4096, 4096, 4096), kSms, 64)) EXPECT_FALSE(c.swap_ab);
  for (const Config& c : configs_for(GemmProblem::linear(128, 128, 128), kSms, 64))
    EXPECT_FALSE(c.cluster_m > 1 && c.tile_m >= 128) << c.id();
  // Large problem: clustered configs kept represented.
  auto big = configs_for(GemmProblem::linear(8192, 8192, 8192), kSms, 4);
  EXPECT_TRUE(std::any_of(big.begin(), big.end(), [](const Config& c) { return c.cluster_m * c.cluster_n > 1; }));
  // Unsupported problems have no configs.
  EXPECT_TRUE(configs_for(GemmProblem::linear(64, 64, 64, DType::fp32), kSms).empty());
}

TEST(CutedslConfigs, ParamsCarryEverythingTheArtifactBakesIn) {
  GemmProblem p = GemmProblem::linear(100, 200, 64, DType::e4m3);
  p.scale = ScaleMode::rowwise, p.bias = true, p.act = Activation::silu, p.beta = 0.5f;
  p.c.layout = Layout::col;
  nlohmann::json j = params(Config{64, 128, 2, 1, 0, true}, p);
  EXPECT_EQ(j.dump(),
            R"({"a_dtype":"e4m3","a_row":true,"act":"silu","b_dtype":"e4m3","b_row":false,"bias":true,"c_row":false,)"
            R"("cluster_m":2,"cluster_n":1,"d_dtype":"bf16","d_row":true,"has_c":true,"scale":"rowwise","stages":0,)"
            R"("swap_ab":true,"tile_m":64,"tile_n":128})");
  // Sizes, leading dimensions, alpha and beta's value stay run-time arguments.
  GemmProblem q = p;
  q.m = 4096, q.n = 8, q.k = 1024, q.a.ld = 2048, q.alpha = 3, q.beta = -1;
  EXPECT_EQ(params(Config{64, 128, 2, 1, 0, true}, q), j);
  // Without C, c_row follows D (one artifact whatever C's unused layout).
  GemmProblem r = GemmProblem::linear(64, 64, 64);
  r.c.layout = Layout::col;
  EXPECT_EQ(params(Config{}, r)["c_row"], true);
}

// ---- the compile path, for real, when .venv has the DSL ------------------------------------------

TEST(CutedslCompiler, UnavailableWithBothReasons) {
  host_test::TempDir s("gemmtune-cutedsl-test-");
  CompileOptions o = host_test::compile_options(s.root, 1);
  o.python = "/nonexistent/python3";
  Verdict v = host_test::artifact_cache(o)->available("cutedsl");
  ASSERT_FALSE(v);
  EXPECT_NE(v.reason.find("/nonexistent/python3"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("toolchain.json"), std::string::npos) << v.reason;
}

TEST(CutedslCompiler, CompilesLoadsAndServesLoadOnly) {
  host_test::TempDir s("gemmtune-cutedsl-test-");
  auto c = host_test::artifact_cache(host_test::compile_options(s.root, 1));
  if (Verdict v = c->available("cutedsl"); !v) GTEST_SKIP() << "no CuTe DSL compile worker: " << v.reason;
  ASSERT_FALSE(c->load_only("cutedsl"));
  EXPECT_NE(c->version("cutedsl").find("arch=sm_90a"), std::string::npos) << c->version("cutedsl");

  GemmProblem p = GemmProblem::linear(300, 520, 136);
  p.bias = true, p.act = Activation::relu;
  const Config cfg{128, 64, 2, 1};
  const compile::Job j = job(cfg, p);
  EXPECT_EQ(j.params, params(cfg, p));
  compile::Built first = c->build(j);
  EXPECT_FALSE(first.hit);
  EXPECT_GT(first.seconds, 0);
  std::printf("cutedsl compile of %s: %.2f s\n", cfg.id().c_str(), first.seconds);
  EXPECT_TRUE(c->has(j));
  compile::Built again = c->build(j);
  EXPECT_TRUE(again.hit);
  EXPECT_EQ(again.artifact.key, first.artifact.key);
  EXPECT_EQ(*again.artifact.bytes, *first.artifact.bytes);

  // The .so loads (no GPU needed), reports its config, checks arguments, and fails a launch
  // cleanly without a driver.
  EXPECT_LT(first.artifact.bytes->size(), 200u * 1024) << "a kernel .so carries no CUDA runtime of its own";
  ASSERT_EQ(first.deps.size(), 1u);
  EXPECT_EQ(first.deps[0].key,
            compile::cutedsl_runtime_key(first.artifact.meta.at("runtime_soname").get<std::string>()));
  const std::string prm = j.params.dump();
  auto lib = Library::open(first, prm);
  GtCutedslArgs a{};
  a.abi_version = GT_CUTEDSL_ABI_VERSION;
  a.m = p.m, a.n = p.n, a.k = p.k, a.lda = p.lda(), a.ldb = p.ldb(), a.ldc = p.ldd(), a.ldd = p.ldd();
  alignas(16) static char dummy[64];
  a.a = dummy, a.b = dummy, a.d = dummy, a.bias = dummy, a.alpha = 1;
  EXPECT_EQ(lib->can_implement(&a), GT_CUTEDSL_OK);
  GtCutedslArgs bad = a;
  bad.abi_version = 99;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_BAD_ABI);
  bad = a, bad.lda = 137;  // 274 bytes: not a 16-byte multiple
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_MISALIGNED);
  bad = a, bad.a = dummy + 2;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_MISALIGNED);
  bad = a, bad.bias = nullptr;  // can_implement is asked before buffers exist; run needs them
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_OK);
  EXPECT_EQ(lib->run(&bad, nullptr), GT_CUTEDSL_BAD_ARGS);
  bad = a, bad.k = 0;
  EXPECT_EQ(lib->can_implement(&bad), GT_CUTEDSL_BAD_ARGS);
  if (access("/dev/nvidia0", F_OK) != 0) {
    int st = lib->run(&a, nullptr);
    EXPECT_NE(st, GT_CUTEDSL_OK);
    EXPECT_STRNE(lib->status_text(st), "");
  }
  EXPECT_THROW(Library::open(first, "something else"), Error);
  // A second kernel shares the runtime library already loaded.
  compile::Built second = c->build(job(Config{64, 64}, p));
  EXPECT_EQ(second.deps.at(0).key, first.deps[0].key);
  auto lib2 = Library::open(second, params(Config{64, 64}, p).dump());
  EXPECT_EQ(lib2->can_implement(&a), GT_CUTEDSL_OK);

  // Load-only: a second cache on the same store that never compiles finds the artifact.
  auto reader = host_test::artifact_cache(host_test::compile_options(s.root, 1, {"cutedsl"}));
  ASSERT_TRUE(reader->available("cutedsl")) << reader->available("cutedsl").reason;
  EXPECT_TRUE(reader->load_only("cutedsl"));
  EXPECT_EQ(reader->key(j), c->key(j));
  EXPECT_TRUE(reader->build(j).hit);
  const compile::Job other = job(Config{64, 128}, p);
  EXPECT_FALSE(reader->has(other));
  EXPECT_THROW(reader->build(other), Error);

  // A request the kernel refuses fails with the worker's kind.
  compile::Job broken = j;
  broken.params["tile_n"] = 48;
  try {
    c->build(broken);
    ADD_FAILURE() << "tile_n 48 compiled";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("bad_request"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace gemmtune::cutedsl

// ---- the GPU test's problem matrix ------------------------------------------------------------

#include "gpu/cutedsl_problems.hpp"

namespace gemmtune::cutedsl {
namespace {

// The GPU test's problem matrix holds only valid problems (problem_matrix() validates each entry
// and throws naming it; an invalid entry once stopped the GPU test at its first problem), and
// the backend supports every one of them (checked on the build machine, not first on the GPU).
TEST(CutedslProblems, EveryEntryIsValidAndSupported) {
  std::vector<cutedsl_test::Named> matrix;
  ASSERT_NO_THROW(matrix = cutedsl_test::problem_matrix());
  ASSERT_GT(matrix.size(), 30u);
  std::set<std::string> names;
  for (auto& [what, p] : matrix) {
    EXPECT_TRUE(names.insert(what + " " + p.str()).second) << "duplicate entry " << what << " " << p.str();
    EXPECT_NO_THROW(p.validate()) << what;
    EXPECT_TRUE(problem_verdict(p)) << what << " " << p.str() << ": " << problem_verdict(p).reason;
    EXPECT_FALSE(configs_for(p, kSms, 16).empty()) << what << " " << p.str();
  }
}

// The GPU test runs both fp8 mainloops: the overlapped promotion (tile N <= 128) and the one
// promoted after each batch (tile N 192) are both among some fp8 problem's candidates.
TEST(CutedslProblems, TheMatrixRunsBothFp8Promotions) {
  bool overlapped = false, serial = false;
  for (auto& [what, p] : cutedsl_test::problem_matrix()) {
    if (!is_fp8(p.a.dtype)) continue;
    for (const Config& c : configs_for(p, kSms, 16)) (c.tile_n > 128 ? serial : overlapped) = true;
  }
  EXPECT_TRUE(overlapped);
  EXPECT_TRUE(serial);
}

}  // namespace
}  // namespace gemmtune::cutedsl
