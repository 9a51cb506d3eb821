// The CUTLASS backend on the GPU, from a kernel pack: every instance in the artifact store that
// can run a test problem is run on it (and one in two other tile orders) and checked against the
// float64 host reference (D
// poisoned with NaN first, random inputs, tolerance by dtype, element-wise bound; NaN fails);
// several .so in one process, interleaved; the engine's select() with CUTLASS in the race.
//
// The GPU machine has no nvcc or CUTLASS headers: the instances are built elsewhere by
// scripts/precompile.sh (its "tests" part is this file's kCases, FIXED config ids: keep
// the two in sync) and found through $GEMMTUNE_ARTIFACTS (load-only mode, docs/cutlass.md).
// Without the backend (no pack, not Hopper) every test skips with the reason; an instance that
// is absent is skipped, unless GEMMTUNE_TEST_CUTLASS_PACK=1 says the pack is complete (then a
// missing fixed instance, or a bench-suite candidate missing from the pack, fails). An instance
// that is present but fails to load, refuses a problem it should run, or computes a wrong D
// always fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutlass/configs.hpp"
#include "backends/cutlass/cutlass_backend.hpp"
#include "core/device.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gpu/helpers.hpp"
#include "support/gpu.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;
namespace cb = gemmtune::cutlass_backend;
namespace fs = std::filesystem;

namespace {

bool pack_expected_complete() {
  const char* v = std::getenv("GEMMTUNE_TEST_CUTLASS_PACK");
  return v && *v && std::string(v) != "0";
}

struct Case {
  std::string what;
  GemmProblem p;
  // Configs the pack must hold for this problem's instance class (built by the script's "tests"
  // part); every other config of the pack that can run the problem is run as well.
  std::vector<std::string> fixed;
};

GemmProblem linear(int64_t m, int64_t n, int64_t k, DType in, DType out, Layout d = Layout::row) {
  GemmProblem p = GemmProblem::linear(m, n, k, in, out);
  p.c.layout = p.d.layout = d;
  return p;
}

// Sizes: none a multiple of the tiles (partial tiles in m, n and k), m != n everywhere; the
// instances do not depend on them (the script builds them at other sizes).
std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string what, GemmProblem p, std::vector<std::string> fixed) {
    out.push_back({std::move(what), p, std::move(fixed)});
  };
  // The bench set's instance classes (20 configs each at the default cap): every one runs here.
  add("bench bf16 (A row, B = W col, D row)", linear(1000, 1544, 1000, DType::bf16, DType::bf16), {});
  add("bench e4m3 tensorwise -> bf16", linear(1000, 1544, 1008, DType::e4m3, DType::bf16), {});
  {
    GemmProblem p = linear(333, 776, 328, DType::bf16, DType::bf16);
    p.bias = true, p.act = Activation::gelu_tanh;
    add("bf16 bias+gelu", p, {"co128x128x64c1x1"});
  }
  {
    GemmProblem p = linear(333, 776, 328, DType::bf16, DType::bf16);
    p.alpha = 0.5f, p.beta = 0.75f;
    p.a.ld = 328 + 8, p.c.ld = 776 + 16, p.d.ld = 776 + 8;  // padded leading dimensions
    add("bf16 alpha + beta*C, padded ld", p, {"pp64x128x64c1x1"});
  }
  {
    GemmProblem p = linear(336, 776, 328, DType::bf16, DType::bf16, Layout::col);
    p.act = Activation::relu;
    add("bf16 column-major D, relu, cluster 1x2", p, {"co128x128x64c1x2"});
  }
  {
    GemmProblem p = linear(336, 776, 328, DType::bf16, DType::bf16, Layout::col);
    p.beta = -1.0f, p.bias = true;
    add("bf16 column-major C and D, beta*C + bias, cluster 2x1", p, {"co256x128x64c2x1"});
  }
  {
    GemmProblem p = linear(336, 776, 328, DType::fp16, DType::fp16);
    p.a.layout = Layout::col, p.b.layout = Layout::row;
    p.bias = true, p.act = Activation::silu;
    add("fp16 A col B row, bias+silu, ping-pong cluster 2x1", p, {"pp128x64x64c2x1"});
  }
  {
    GemmProblem p = linear(333, 776, 328, DType::fp16, DType::fp16);
    p.alpha = 1.5f, p.beta = 0.5f;
    add("fp16 alpha + beta*C", p, {"co128x256x64c1x1"});
  }
  {
    GemmProblem p = linear(333, 784, 336, DType::e4m3, DType::fp16);
    p.scale = ScaleMode::tensorwise, p.bias = true, p.act = Activation::relu;
    add("e4m3 tensorwise -> fp16, bias+relu, tile N 192, cluster 1x2", p, {"co128x192x128c1x2"});
  }
  {
    GemmProblem p = linear(333, 784, 336, DType::e4m3, DType::bf16);
    p.scale = ScaleMode::rowwise;
    add("e4m3 rowwise -> bf16 (m != n)", p, {"co128x128x128c2x1", "pp64x128x128c1x1"});
  }
  // swap-AB at m = 16 (also runs the bench instances at m = 16)
  add("bf16 m=16 (swap-AB)", linear(16, 1000, 512, DType::bf16, DType::bf16), {"pp64x64x64c1x1s", "co128x64x64c1x1s"});
  {
    GemmProblem p = linear(16, 1000, 512, DType::bf16, DType::bf16);
    p.bias = true, p.act = Activation::silu;
    add("bf16 m=16 bias+silu (swap-AB: bias on the kernel's rows)", p, {"co128x64x64c1x1s"});
  }
  {
    GemmProblem p = linear(16, 1000, 512, DType::e4m3, DType::bf16);
    p.scale = ScaleMode::rowwise;
    add("e4m3 rowwise m=16 (swap-AB: scales swap broadcasts)", p, {"pp64x64x128c1x1s"});
  }
  return out;
}

// The backend over the tests' artifact cache (to ask which instances are in its store); skips
// the calling test when the backend is not available here.
struct Fixture {
  DeviceInfo dev;
  std::unique_ptr<Backend> backend;
  std::string skip;  // non-empty: why the test cannot run
};

Fixture open_backend() {
  Fixture f;
  std::string why;
  if (!cuda_device_present(&why)) {
    f.skip = "no CUDA device: " + why;
    return f;
  }
  f.dev = query_device(0);
  f.backend = make_cutlass_backend(gpu_test::context(f.dev));
  if (Verdict v = f.backend->available(); !v) {
    f.skip = "cutlass not available: " + v.reason;
    return f;
  }
  compile::ArtifactCache& a = gpu_test::artifacts();
  std::printf("cutlass: %s, store %s (%s)\n", a.version("cutlass").c_str(), a.store().root().c_str(),
              a.load_only("cutlass") ? "load-only" : "can build");
  return f;
}

#define OPEN_BACKEND(f)                        \
  Fixture f = open_backend();                  \
  if (!f.skip.empty()) GTEST_SKIP() << f.skip

// The pack's configs that can run `p`, in valid_configs order.
std::vector<cb::Config> cached_configs(const GemmProblem& p) {
  std::vector<cb::Config> out;
  for (const cb::Config& c : cb::valid_configs(p))
    if (gpu_test::artifacts().has(cb::job(cb::InstanceSpec::of(c, p)))) out.push_back(c);
  return out;
}

// Runs candidate `id` on `ops` (D poisoned first) and compares with `ref`; the failure message
// when it does not load, run or match.
std::string run_and_check(Backend& backend, const GemmProblem& p, const std::string& id, const OperandSet& ops,
                          const std::vector<double>& ref, Stream& s) {
  try {
    auto cand = backend.load(p, id);
    gpu_test::prepare(*cand);
    ops.poison_d(s.get());
    cand->run(ops.args(), s.get());
    s.sync();
  } catch (const Error& e) {
    return "failed to load or run: " + e.message();
  }
  CheckResult r = gpu_test::check_d(p, ops.args(), ref);
  return r.ok ? "" : "wrong: " + r.reason;
}

}  // namespace

// Every instance of the pack on every test problem it can run.
TEST(Cutlass, EveryInstanceInThePackIsCorrect) {
  OPEN_BACKEND(f);
  Stream s;
  int runs = 0, problems_run = 0;
  std::set<std::string> keys;
  for (const Case& c : cases()) {
    const GemmProblem& p = c.p;
    SCOPED_TRACE(c.what + ": " + p.str());
    ASSERT_NO_THROW(p.validate());
    ASSERT_TRUE(cb::problem_verdict(p)) << "a test problem the backend should support: " << cb::problem_verdict(p).reason;
    std::vector<cb::Config> configs = cached_configs(p);
    for (const std::string& id : c.fixed) {
      cb::Config want = cb::Config::parse(id);
      ASSERT_TRUE(cb::check(want, p)) << cb::check(want, p).reason;
      bool have = std::find(configs.begin(), configs.end(), want) != configs.end();
      if (!have && pack_expected_complete())
        ADD_FAILURE() << id << " (" << cb::InstanceSpec::of(want, p).text()
                      << ") is not in the pack (scripts/precompile.sh builds it)";
      else if (!have)
        std::printf("  skip %s / %s: not in the pack\n", c.what.c_str(), id.c_str());
    }
    if (configs.empty()) {
      std::printf("  skip %s: the pack holds no instance for it\n", c.what.c_str());
      continue;
    }
    EXPECT_TRUE(f.backend->supports(p)) << f.backend->supports(p).reason;
    OperandSet ops(p, 0xc07 + uint64_t(p.m * 131 + p.n * 17 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    for (const cb::Config& cfg : configs) {
      SCOPED_TRACE("cutlass " + cfg.id());
      std::string err = run_and_check(*f.backend, p, cfg.id(), ops, ref, s);
      EXPECT_EQ(err, "") << cb::InstanceSpec::of(cfg, p).text();
      keys.insert(gpu_test::artifacts().key(cb::job(cb::InstanceSpec::of(cfg, p))));
      ++runs;
    }
    // Tile orders are run-time arguments of the same instance: the first config again along M
    // in bands of 2 and along N in bands of 8 (partial tiles and clusters at the bands' edges).
    for (auto [raster, swizzle] : {std::pair{cb::Raster::along_m, 2}, std::pair{cb::Raster::along_n, 8}}) {
      cb::Config o = configs.front();
      o.raster = raster, o.swizzle = swizzle;
      SCOPED_TRACE("cutlass " + o.id());
      EXPECT_EQ(run_and_check(*f.backend, p, o.id(), ops, ref, s), "") << cb::InstanceSpec::of(o, p).text();
      ++runs;
    }
    ++problems_run;
  }
  std::printf("cutlass: %d runs of %zu distinct instances on %d problems\n", runs, keys.size(), problems_run);
  if (runs == 0) GTEST_SKIP() << "the pack holds no instance for any test problem";
}

// The check above can fail: a candidate's D computed with another alpha does not pass.
TEST(Cutlass, TheCheckRejectsAWrongResult) {
  OPEN_BACKEND(f);
  GemmProblem p = linear(333, 776, 328, DType::bf16, DType::bf16);
  auto configs = cached_configs(p);
  if (configs.empty()) GTEST_SKIP() << "no instance for " << p.str() << " in the pack";
  Stream s;
  GemmProblem q = p;
  q.alpha = 1.25f;  // the kernel runs q; the reference is p's
  OperandSet ops(q, 99, s.get());
  s.sync();
  const auto ref = host::host_gemm(p, host::download(p, ops.args()));
  std::string err = run_and_check(*f.backend, q, configs[0].id(), ops, ref, s);
  EXPECT_NE(err.find("wrong"), std::string::npos) << "a D scaled by 1.25 passed the check: " << err;
}

// Several instances (each its own .so with its own static CUDA runtime) loaded in one process
// and run interleaved on one stream, each result checked every time.
TEST(Cutlass, SeveralInstancesInOneProcess) {
  OPEN_BACKEND(f);
  std::vector<std::pair<GemmProblem, std::string>> picks;  // (problem, config id)
  for (const Case& c : cases()) {
    auto configs = cached_configs(c.p);
    for (size_t i = 0; i < configs.size() && i < 2; ++i) picks.push_back({c.p, configs[i].id()});
    if (picks.size() >= 6) break;
  }
  if (picks.size() < 2) GTEST_SKIP() << "fewer than two instances in the pack";
  Stream s;
  using CandPtr = decltype(f.backend->load(std::declval<const GemmProblem&>(), std::string()));
  struct Loaded {
    GemmProblem p;
    CandPtr cand;
    std::unique_ptr<OperandSet> ops;
    std::vector<double> ref;
  };
  std::vector<Loaded> loaded;
  for (auto& [p, id] : picks) {
    Loaded l{p, nullptr, std::make_unique<OperandSet>(p, 4242 + loaded.size(), s.get()), {}};
    s.sync();
    l.ref = host::host_gemm(p, host::download(p, l.ops->args()));
    ASSERT_NO_THROW({
      l.cand = f.backend->load(p, id);
      gpu_test::prepare(*l.cand);
    }) << id;
    loaded.push_back(std::move(l));
  }
  for (int round = 0; round < 3; ++round)
    for (auto& l : loaded) {
      SCOPED_TRACE("round " + std::to_string(round) + ": " + l.cand->id() + " on " + l.p.str());
      l.ops->poison_d(s.get());
      ASSERT_NO_THROW(l.cand->run(l.ops->args(), s.get()));
      s.sync();
      CheckResult r = gpu_test::check_d(l.p, l.ops->args(), l.ref);
      EXPECT_TRUE(r.ok) << r.reason;
    }
  std::printf("cutlass: %zu instances interleaved over 3 rounds\n", loaded.size());
}

// With GEMMTUNE_TEST_CUTLASS_PACK=1: every CUTLASS candidate of the llm-layers bench (bf16 and
// fp8 tensorwise, m >= 2048) is in the pack, so the bench's CUTLASS columns are complete.
TEST(Cutlass, PackCoversTheBenchSuite) {
  if (!pack_expected_complete()) GTEST_SKIP() << "GEMMTUNE_TEST_CUTLASS_PACK is not set";
  OPEN_BACKEND(f);
  const int64_t nk[][2] = {{6144, 4096},  {4096, 4096},  {28672, 4096}, {4096, 14336}, {128256, 4096}, {10240, 8192},
                           {8192, 8192},  {57344, 8192}, {8192, 28672}, {1280, 8192},  {8192, 1024},   {7168, 8192},
                           {8192, 3584},  {28672, 4096}, {4096, 14336}, {6144, 4096}};
  int missing = 0, checked = 0;
  for (DType t : {DType::bf16, DType::e4m3})
    for (int64_t m : {2048, 4096, 8192})
      for (auto& [n, k] : nk) {
        GemmProblem p = GemmProblem::linear(m, n, k, t, DType::bf16);
        for (const cb::Config& c : cb::configs_for(p, f.dev.sm_count, 16)) {
          ++checked;
          if (!gpu_test::artifacts().has(cb::job(cb::InstanceSpec::of(c, p)))) {
            ++missing;
            ADD_FAILURE() << "not in the pack: " << c.id() << " for " << p.str();
          }
        }
      }
  std::printf("cutlass: %d bench candidates checked, %d missing\n", checked, missing);
}

// The engine with CUTLASS in the race: select() over all backends (bf16) and over cuBLASLt +
// CUTLASS (fp8); every CUTLASS candidate must be correct and run (none wrong or failed), and
// the pick, whichever backend, must be correct. 2048 x 1024 x 1024 keeps the float64 host
// reference at a few seconds; its candidates (the default cap of ranked configs) are in the
// bench set's instance classes, so the pack holds most of them.
TEST(Cutlass, EngineSelectRacesCutlass) {
  OPEN_BACKEND(f);
  fs::path dir = fs::temp_directory_path() / ("gemmtune-cutlass-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int raced = 0;
  for (auto [t, backends] : std::vector<std::pair<DType, std::vector<std::string>>>{
           {DType::bf16, {}}, {DType::e4m3, {"cublaslt", "cutlass"}}}) {
    GemmProblem p = GemmProblem::linear(2048, 1024, 1024, t, DType::bf16);
    SCOPED_TRACE(p.str());
    if (!f.backend->supports(p)) {
      std::printf("  skip engine %s: %s\n", p.str().c_str(), f.backend->supports(p).reason.c_str());
      continue;
    }
    EngineOptions o;
    o.cache_path = dir / (std::string("select-") + to_string(t) + ".sqlite");
    fs::remove(o.cache_path);
    o.backends = backends;
    o.tune.warmup_ms = 10, o.tune.min_rounds = 3, o.tune.max_rounds = 5, o.tune.tie_rounds = 3;
    Engine e(o);
    TuneReport r;
    Kernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    for (auto& note : r.notes) std::printf("  note: %s\n", note.c_str());
    int cutlass = 0;
    double best_cutlass = 0, best_lt = 0;
    for (auto& c : r.results) {
      if (c.backend == "cutlass") {
        ++cutlass;
        EXPECT_TRUE(c.status == CandidateStatus::ok || c.status == CandidateStatus::pruned)
            << c.id << ": " << to_string(c.status) << ": " << c.reason;
        if (c.status == CandidateStatus::ok && (best_cutlass == 0 || c.median_us < best_cutlass)) best_cutlass = c.median_us;
      }
      if (c.backend == "cublaslt" && c.status == CandidateStatus::ok && (best_lt == 0 || c.median_us < best_lt))
        best_lt = c.median_us;
    }
    EXPECT_GT(cutlass, 0) << "the engine raced no CUTLASS candidate although the backend supports the problem";
    std::printf("  %s: pick %s %s; best cutlass %.1f us, best cublaslt %.1f us (%d cutlass candidates)\n",
                p.str().c_str(), k.backend().c_str(), k.name().c_str(), best_cutlass, best_lt, cutlass);
    // The pick is correct on fresh operands.
    Stream s;
    OperandSet ops(p, 777, s.get());
    k.run(ops.args(), s.get());
    s.sync();
    auto ref = host::host_gemm(p, host::download(p, ops.args()));
    CheckResult cr = gpu_test::check_d(p, ops.args(), ref);
    EXPECT_TRUE(cr.ok) << k.backend() << " " << k.name() << ": " << cr.reason;
    ++raced;
  }
  if (raced == 0) GTEST_SKIP() << "the pack holds no instance for the engine's problems";
}
