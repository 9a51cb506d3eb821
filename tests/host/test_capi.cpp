// The C API's JSON layer (problem / options / report), and the shared library's error paths
// that need no GPU, through dlopen of the real libgemmtune_c.so (its exported symbols).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/backend.hpp"
#include "core/cuda.hpp"
#include "core/problem_json.hpp"
#include "core/report_json.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/gemmtune_c.h"

using namespace gemmtune;
using nlohmann::json;

namespace {

// The message problem_from_json throws for `text`, or "" if it parses.
std::string problem_error(const std::string& text) {
  try {
    problem_from_json(text);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

std::string options_error(const std::string& text) {
  try {
    engine_options_from_json(text);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

// ---- problem JSON ----------------------------------------------------------------------------

TEST(ProblemJson, DefaultsAreNnLinear) {
  GemmProblem p = problem_from_json(R"({"m": 16, "n": 10240, "k": 8192})");
  EXPECT_EQ(p.canonical(), GemmProblem::linear(16, 10240, 8192).canonical());
  EXPECT_EQ(p.a.layout, Layout::row);
  EXPECT_EQ(p.b.layout, Layout::col);
  EXPECT_EQ(p.d.layout, Layout::row);
  EXPECT_EQ(p.alpha, 1.0f);
  EXPECT_EQ(p.beta, 0.0f);
}

TEST(ProblemJson, Fp8DefaultsToBf16OutAndTensorwise) {
  GemmProblem p = problem_from_json(R"({"m": 128, "n": 256, "k": 512, "dtype": "e4m3"})");
  EXPECT_EQ(p.canonical(), GemmProblem::linear(128, 256, 512, DType::e4m3).canonical());
  EXPECT_EQ(p.d.dtype, DType::bf16);
  EXPECT_EQ(p.scale, ScaleMode::tensorwise);
  GemmProblem r = problem_from_json(R"({"m": 128, "n": 256, "k": 512, "dtype": "fp8", "scale": "rowwise",
                                       "out_dtype": "fp32", "b_dtype": "e5m2"})");
  EXPECT_EQ(r.scale, ScaleMode::rowwise);
  EXPECT_EQ(r.b.dtype, DType::e5m2);
  EXPECT_EQ(r.d.dtype, DType::fp32);
  EXPECT_EQ(r.c.dtype, DType::fp32);
}

TEST(ProblemJson, EveryFieldIsRead) {
  GemmProblem p = problem_from_json(R"({"m": 64, "n": 96, "k": 128, "dtype": "fp16", "layout": "CR",
      "d_layout": "col", "lda": 80, "ldb": 100, "ldc": 70, "ldd": 72, "alpha": 0.5, "beta": 2,
      "bias": true, "act": "gelu", "tf32": false})");
  EXPECT_EQ(p.a.dtype, DType::fp16);
  EXPECT_EQ(p.a.layout, Layout::col);
  EXPECT_EQ(p.b.layout, Layout::row);
  EXPECT_EQ(p.d.layout, Layout::col);
  EXPECT_EQ(p.c.layout, Layout::col);
  EXPECT_EQ(p.a.ld, 80);
  EXPECT_EQ(p.b.ld, 100);
  EXPECT_EQ(p.c.ld, 70);
  EXPECT_EQ(p.d.ld, 72);
  EXPECT_EQ(p.alpha, 0.5f);
  EXPECT_EQ(p.beta, 2.0f);
  EXPECT_TRUE(p.bias);
  EXPECT_EQ(p.act, Activation::gelu_tanh);
  GemmProblem t = problem_from_json(R"({"m": 8, "n": 8, "k": 8, "dtype": "fp32", "tf32": true})");
  EXPECT_TRUE(t.tf32);
  // Integral floats are accepted as integers; null means "absent".
  EXPECT_EQ(problem_from_json(R"({"m": 16.0, "n": 32, "k": 64, "lda": null})").m, 16);
}

TEST(ProblemJson, RoundTripsThroughProblemToJson) {
  for (const char* text :
       {R"({"m": 16, "n": 10240, "k": 8192})", R"({"m": 7, "n": 9, "k": 24, "dtype": "e4m3", "b_dtype": "e5m2"})",
        R"({"m": 64, "n": 96, "k": 128, "layout": "cr", "d_layout": "c", "lda": 80, "ldd": 72, "beta": 1, "ldc": 64,
            "bias": true, "act": "silu", "alpha": 0.25})",
        R"({"m": 8, "n": 8, "k": 8, "dtype": "fp32", "tf32": true, "layout": "rr"})"}) {
    GemmProblem p = problem_from_json(text);
    GemmProblem q = problem_from_json(problem_to_json(p));
    EXPECT_EQ(p.canonical(), q.canonical()) << text;
    EXPECT_EQ(p.alpha, q.alpha) << text;
    EXPECT_EQ(p.beta, q.beta) << text;
  }
}

TEST(ProblemJson, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* prefix;
  } cases[] = {
      {R"({"n": 1, "k": 1})", "problem.m: required"},
      {R"({"m": "16", "n": 1, "k": 1})", "problem.m: must be an integer"},
      {R"({"m": 1.5, "n": 1, "k": 1})", "problem.m: must be an integer"},
      {R"({"m": 16, "n": 0, "k": 1})", "problem.n: must be >= 1"},
      {R"({"m": 16, "n": 16, "k": -3})", "problem.k: must be >= 1"},
      {R"({"m": 16, "n": 16, "k": 16, "dtype": "int8"})", "problem.dtype: unknown value 'int8'"},
      {R"({"m": 16, "n": 16, "k": 16, "dtype": 3})", "problem.dtype: must be a string"},
      {R"({"m": 16, "n": 16, "k": 16, "b_dtype": "x"})", "problem.b_dtype: unknown value"},
      {R"({"m": 16, "n": 16, "k": 16, "out_dtype": "q"})", "problem.out_dtype: unknown value"},
      {R"({"m": 16, "n": 16, "k": 16, "layout": "rx"})", "problem.layout: 'rx' is not two layout letters"},
      {R"({"m": 16, "n": 16, "k": 16, "layout": "row"})", "problem.layout:"},
      {R"({"m": 16, "n": 16, "k": 16, "d_layout": "diag"})", "problem.d_layout: unknown value"},
      {R"({"m": 16, "n": 16, "k": 128, "lda": 100})", "problem.lda:"},
      {R"({"m": 16, "n": 16, "k": 16, "ldb": -1})", "problem.ldb: must be >= 0"},
      {R"({"m": 16, "n": 16, "k": 16, "alpha": "x"})", "problem.alpha: must be a number"},
      {R"({"m": 16, "n": 16, "k": 16, "bias": 1})", "problem.bias: must be true or false"},
      {R"({"m": 16, "n": 16, "k": 16, "act": "tanh"})", "problem.act: unknown value 'tanh'"},
      {R"({"m": 16, "n": 16, "k": 16, "scale": "rowwise"})", "problem.scale:"},
      {R"({"m": 16, "n": 16, "k": 16, "scale": "blockwise", "dtype": "e4m3"})", "problem.scale: unknown value"},
      {R"({"m": 16, "n": 16, "k": 16, "tf32": true})", "problem.tf32:"},
      {R"({"m": 16, "n": 16, "k": 16, "dtype": "bf16", "b_dtype": "fp16"})", "problem.b.dtype:"},
      {R"({"m": 16, "n": 16, "k": 16, "dtpye": "bf16"})", "problem.dtpye: unknown field"},
      {R"({"m": 16, "n": 16, "k": 16, "m_values": [1]})", "problem.m_values: unknown field"},
      {R"([16, 16, 16])", "problem: expected a JSON object, got an array"},
      {R"({"m": 16,)", "problem: invalid JSON"},
      {"", "problem: invalid JSON"},
  };
  for (auto& c : cases) {
    std::string why = problem_error(c.json);
    EXPECT_TRUE(starts_with(why, c.prefix)) << c.json << "\n  got: " << why << "\n  want prefix: " << c.prefix;
  }
}

TEST(ProblemJson, UnknownFieldListsTheKnownOnes) {
  std::string why = problem_error(R"({"m": 16, "n": 16, "k": 16, "epilogue": "relu"})");
  EXPECT_NE(why.find("known: m, n, k, dtype"), std::string::npos) << why;
  EXPECT_NE(why.find("tf32"), std::string::npos) << why;
}

// ---- engine options JSON ---------------------------------------------------------------------

TEST(OptionsJson, EmptyMeansDefaults) {
  for (const char* text : {"", "  \n", "{}"}) {
    EngineOptions o = engine_options_from_json(text);
    EXPECT_EQ(o.device, 0);
    EXPECT_TRUE(o.use_cache);
    EXPECT_TRUE(o.cache_path.empty());
    EXPECT_TRUE(o.backends.empty());
    EXPECT_FALSE(o.log);
    EXPECT_EQ(o.tune.min_rounds, TuneOptions{}.min_rounds);
  }
}

TEST(OptionsJson, EveryFieldIsRead) {
  EngineOptions o = engine_options_from_json(R"({"cache_path": "/tmp/x.sqlite", "use_cache": false,
      "backends": ["cublaslt"], "device": 1, "log_to_stderr": true,
      "tune": {"warmup_ms": 5, "min_rounds": 2, "max_rounds": 4, "round_budget_ms": 0.5, "prune_ratio": 1.5,
               "tie_tolerance": 0.02, "tie_rounds": 3, "seed": 18446744073709551615}})");
  EXPECT_EQ(o.cache_path, "/tmp/x.sqlite");
  EXPECT_FALSE(o.use_cache);
  ASSERT_EQ(o.backends.size(), 1u);
  EXPECT_EQ(o.backends[0], "cublaslt");
  EXPECT_EQ(o.device, 1);
  EXPECT_TRUE(bool(o.log));
  EXPECT_EQ(o.tune.warmup_ms, 5);
  EXPECT_EQ(o.tune.min_rounds, 2);
  EXPECT_EQ(o.tune.max_rounds, 4);
  EXPECT_EQ(o.tune.round_budget_ms, 0.5);
  EXPECT_EQ(o.tune.prune_ratio, 1.5);
  EXPECT_EQ(o.tune.tie_tolerance, 0.02);
  EXPECT_EQ(o.tune.tie_rounds, 3);
  EXPECT_EQ(o.tune.seed, 18446744073709551615ull);
  EngineOptions s = engine_options_from_json(R"({"backends": " cublaslt, other "})");
  ASSERT_EQ(s.backends.size(), 2u);
  EXPECT_EQ(s.backends[1], "other");
}

TEST(OptionsJson, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* prefix;
  } cases[] = {
      {R"({"device": -1})", "options.device: must be a device index"},
      {R"({"device": "0"})", "options.device: must be an integer"},
      {R"({"use_cache": "yes"})", "options.use_cache: must be true or false"},
      {R"({"cache_path": 3})", "options.cache_path: must be a string"},
      {R"({"backends": ["cublaslt", 7]})", "options.backends[1]: must be a backend name"},
      {R"({"backends": 7})", "options.backends: must be a list"},
      {R"({"tune": 1})", "options.tune: must be an object"},
      {R"({"tune": {"min_rounds": 0}})", "options.tune.min_rounds: must be in [1, 100000], got 0"},
      {R"({"tune": {"min_rounds": 5, "max_rounds": 2}})", "options.tune.max_rounds:"},
      {R"({"tune": {"prune_ratio": 0.5}})", "options.tune.prune_ratio:"},
      {R"({"tune": {"seed": -1}})", "options.tune.seed: must be >= 0"},
      {R"({"tune": {"rounds": 3}})", "options.tune.rounds: unknown field"},
      {R"({"cache": "/tmp/x"})", "options.cache: unknown field"},
      {R"(["cublaslt"])", "options: expected a JSON object"},
      {R"({)", "options: invalid JSON"},
  };
  for (auto& c : cases) {
    std::string why = options_error(c.json);
    EXPECT_TRUE(starts_with(why, c.prefix)) << c.json << "\n  got: " << why << "\n  want prefix: " << c.prefix;
  }
}

// ---- report JSON -----------------------------------------------------------------------------

TEST(ReportJson, MirrorsTheReport) {
  TuneReport r;
  r.problem = GemmProblem::linear(16, 10240, 8192);
  r.key = "0123456789abcdef";
  r.seconds = 1.5;
  r.spread = 0.02;
  r.notes = {"other: not available: no GPU"};
  CandidateResult w;
  w.backend = "cublaslt", w.id = "ab", w.name = "algo=1", w.status = CandidateStatus::ok, w.rel_err = 1e-3;
  w.median_us = 40, w.p20_us = 39, w.p80_us = 41, w.samples = 10, w.compile_s = 0.01, w.winner = true;
  CandidateResult d = w;
  d.id = "cd", d.status = CandidateStatus::pruned, d.reason = "over 1.30x the best median", d.winner = false,
  d.is_default = true, d.median_us = 60;
  r.results = {w, d};

  json j = json::parse(report_to_json(r));
  EXPECT_EQ(j["op"], "gemm");
  EXPECT_EQ(j["problem"], r.problem.str());
  EXPECT_EQ(j["key"], r.key);
  EXPECT_EQ(j["canonical"], r.problem.canonical());
  EXPECT_EQ(j["from_cache"], false);
  EXPECT_DOUBLE_EQ(j["seconds"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["spread"].get<double>(), 0.02);
  ASSERT_EQ(j["notes"].size(), 1u);
  ASSERT_EQ(j["results"].size(), 2u);
  const json& a = j["results"][0];
  EXPECT_EQ(a["backend"], "cublaslt");
  EXPECT_EQ(a["id"], "ab");
  EXPECT_EQ(a["name"], "algo=1");
  EXPECT_EQ(a["status"], "ok");
  EXPECT_EQ(a["winner"], true);
  EXPECT_EQ(a["is_default"], false);
  EXPECT_EQ(a["samples"], 10);
  for (const char* f : {"rel_err", "median_us", "p20_us", "p80_us", "compile_s", "reason"})
    EXPECT_TRUE(a.contains(f)) << f;
  EXPECT_EQ(j["results"][1]["status"], "pruned");
  EXPECT_EQ(j["results"][1]["is_default"], true);
  // The embedded problem reads back as the same problem.
  EXPECT_EQ(problem_from_json(j["problem_json"].dump()).canonical(), r.problem.canonical());
}

// A softmax report: the same encoding of results, plus bytes and each result's tbps.
TEST(ReportJson, SoftmaxAddsBytesAndTbps) {
  TuneReport r;
  r.op = SoftmaxOp::name;
  r.softmax = SoftmaxProblem::make(1000, 1000);  // bf16 in and out: 4 MB moved
  r.key = "fedcba9876543210";
  CandidateResult w;
  w.backend = "native", w.id = "warp", w.name = "warp", w.status = CandidateStatus::ok, w.rel_err = 1e-3;
  w.median_us = 1, w.samples = 5, w.winner = true;
  CandidateResult f;
  f.backend = "triton", f.id = "t1", f.name = "t1", f.reason = "compile failed";  // failed, never ran
  r.results = {w, f};

  const json j = json::parse(report_to_json(r));
  EXPECT_EQ(j["op"], "softmax");
  EXPECT_EQ(j["problem"], r.softmax.str());
  EXPECT_EQ(j["canonical"], r.softmax.canonical());
  EXPECT_DOUBLE_EQ(j["bytes"].get<double>(), 4e6);
  EXPECT_EQ(softmax_problem_from_json(j["problem_json"].dump()).canonical(), r.softmax.canonical());
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_NEAR(j["results"][0]["tbps"].get<double>(), 4.0, 1e-12);  // 4 MB in 1 us
  EXPECT_FALSE(j["results"][0].contains("TBps"));
  EXPECT_EQ(j["results"][1]["tbps"], 0.0);
  EXPECT_TRUE(j["results"][1]["rel_err"].is_null());
  // Every field of the one encoding, as in a GEMM report.
  const json fields = gemmtune::to_json(w);
  for (const auto& [k, v] : fields.items()) EXPECT_TRUE(j["results"][0].contains(k)) << k;
}

// ---- kernel JSON -----------------------------------------------------------------------------

namespace {
// A candidate that only names itself (never run).
class NamedCandidate final : public detail::CandidateFor<GemmOp> {
 public:
  explicit NamedCandidate(bool overlap) : overlap_(overlap) {}
  std::string backend() const override { return "fake"; }
  std::string id() const override { return overlap_ ? "pdl" : "plain"; }
  std::string name() const override { return "fake " + id(); }
  void run(const GemmArgs&, cudaStream_t) override {}
  bool can_overlap() const override { return overlap_; }

 private:
  bool overlap_;
};
}  // namespace

// gt_kernel_describe's kernel part: who the kernel is, its problem, and whether an overlapped
// launch (GT_RUN_OVERLAP_PREVIOUS) takes effect.
TEST(KernelJson, NamesTheKernelAndWhetherItOverlaps) {
  const GemmProblem p = GemmProblem::linear(16, 4096, 4096);
  for (bool overlap : {false, true}) {
    const Kernel k(p, std::make_shared<NamedCandidate>(overlap));
    const json j = json::parse(kernel_to_json(k));
    EXPECT_EQ(j.at("backend"), "fake");
    EXPECT_EQ(j.at("id"), overlap ? "pdl" : "plain");
    EXPECT_EQ(j.at("name"), overlap ? "fake pdl" : "fake plain");
    EXPECT_EQ(j.at("can_overlap"), overlap);
    EXPECT_EQ(j.at("problem"), p.str());
    EXPECT_EQ(problem_from_json(j.at("problem_json").dump()).canonical(), p.canonical());
  }
}

// Kernel::run checks its arguments before any backend sees them: block scales must be 16-byte
// aligned (CUTLASS's and the CuTe DSL's kernels load them by TMA), other scales need only exist.
TEST(KernelRun, BlockScalesMustBe16ByteAligned) {
  alignas(16) static float buf[16];
  GemmArgs args;
  args.a = buf, args.b = buf, args.d = buf, args.scale_a = buf, args.scale_b = buf + 4;
  GemmProblem p = GemmProblem::linear(16, 4096, 4096, DType::e4m3);
  p.scale = ScaleMode::block;
  const Kernel k(p, std::make_shared<NamedCandidate>(false));
  EXPECT_NO_THROW(k.run(args, nullptr));
  args.scale_b = buf + 1;
  try {
    k.run(args, nullptr);
    ADD_FAILURE() << "a misaligned scale_b ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale_b"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16-byte"), std::string::npos) << e.what();
  }
  p.scale = ScaleMode::tensorwise;  // read as one float each
  EXPECT_NO_THROW(Kernel(p, std::make_shared<NamedCandidate>(false)).run(args, nullptr));
}

// ---- the shared library ----------------------------------------------------------------------

namespace {

// libgemmtune_c.so from the build folder (next to the CLI), loaded once; null if not built.
struct CApi {
  void* handle = nullptr;
  std::string path, why;
  decltype(&gt_last_error) last_error = nullptr;
  decltype(&gt_version) version = nullptr;
  decltype(&gt_free) free = nullptr;
  decltype(&gt_engine_create) engine_create = nullptr;
  decltype(&gt_engine_destroy) engine_destroy = nullptr;
  decltype(&gt_engine_info) engine_info = nullptr;
  decltype(&gt_select) select = nullptr;
  decltype(&gt_load) load = nullptr;
  decltype(&gt_kernel_run) kernel_run = nullptr;
  decltype(&gt_kernel_run_abd) kernel_run_abd = nullptr;
  decltype(&gt_kernel_destroy) kernel_destroy = nullptr;
  decltype(&gt_kernel_describe) kernel_describe = nullptr;

  CApi() {
#ifdef GEMMTUNE_CLI
    path = (std::filesystem::path(GEMMTUNE_CLI).parent_path() / "libgemmtune_c.so").string();
#else
    why = "GEMMTUNE_CLI not defined";
    return;
#endif
    if (!std::filesystem::exists(path)) {
      why = path + " not built";
      return;
    }
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      why = dlerror();
      return;
    }
    bind(last_error, "gt_last_error");
    bind(version, "gt_version");
    bind(free, "gt_free");
    bind(engine_create, "gt_engine_create");
    bind(engine_destroy, "gt_engine_destroy");
    bind(engine_info, "gt_engine_info");
    bind(select, "gt_select");
    bind(load, "gt_load");
    bind(kernel_run, "gt_kernel_run");
    bind(kernel_run_abd, "gt_kernel_run_abd");
    bind(kernel_destroy, "gt_kernel_destroy");
    bind(kernel_describe, "gt_kernel_describe");
  }
  template <class F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(handle, name));
    if (!f) why += std::string(why.empty() ? "" : "; ") + name + " not exported";
  }
  bool ok() const { return handle && why.empty(); }
};

const CApi& capi() {
  static CApi api;
  return api;
}

#define REQUIRE_CAPI()                                                                     \
  do {                                                                                     \
    if (!capi().handle) GTEST_SKIP() << "libgemmtune_c.so unavailable: " << capi().why;   \
    ASSERT_TRUE(capi().ok()) << capi().why;                                                \
  } while (0)

}  // namespace

TEST(CApi, ReportsItsVersion) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  EXPECT_STREQ(c.version(), gemmtune::version());
  EXPECT_NE(c.last_error(), nullptr);
  c.free(nullptr);
}

// Only gt_* is exported: the static library's symbols (gemmtune::, SQLite, nlohmann) are linked
// in with --exclude-libs, so they cannot interpose on, or be interposed by, other copies in the
// process (Python's own libsqlite3, for one).
TEST(CApi, StaticLibrarySymbolsAreHidden) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  EXPECT_EQ(dlsym(c.handle, "_ZN8gemmtune17problem_from_jsonERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"),
            nullptr)
      << "gemmtune::problem_from_json is exported: link gemmtune_c with -Wl,--exclude-libs,ALL";
  EXPECT_EQ(dlsym(c.handle, "_ZN8gemmtune7versionEv"), nullptr) << "gemmtune::version is exported";
}

TEST(CApi, NullArgumentsFailCleanly) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  EXPECT_EQ(c.engine_create("{}", nullptr), GT_ERR_ARGUMENT);
  EXPECT_NE(std::string(c.last_error()).find("gt_engine_create"), std::string::npos);
  gt_kernel* k = reinterpret_cast<gt_kernel*>(0x1);
  char* report = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(c.select(nullptr, R"({"m": 1, "n": 1, "k": 1})", 0, &k, &report), GT_ERR_ARGUMENT);
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(report, nullptr);
  EXPECT_NE(std::string(c.last_error()).find("engine is NULL"), std::string::npos);
  EXPECT_EQ(c.load(nullptr, "{}", "cublaslt", "x", &k), GT_ERR_ARGUMENT);
  EXPECT_EQ(c.kernel_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
            GT_ERR_ARGUMENT);
  EXPECT_NE(std::string(c.last_error()).find("gt_kernel_run"), std::string::npos);
  EXPECT_EQ(c.kernel_run_abd(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), GT_ERR_ARGUMENT);
  EXPECT_NE(std::string(c.last_error()).find("kernel is NULL"), std::string::npos);
  char* json_out = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(c.kernel_describe(nullptr, &json_out), GT_ERR_ARGUMENT);
  EXPECT_EQ(json_out, nullptr);
  json_out = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(c.engine_info(nullptr, &json_out), GT_ERR_ARGUMENT);
  EXPECT_EQ(json_out, nullptr);
  EXPECT_EQ(c.engine_destroy(nullptr), GT_OK);
  EXPECT_EQ(c.kernel_destroy(nullptr), GT_OK);
}

TEST(CApi, BadOptionsNameTheFieldBeforeAnyDeviceIsNeeded) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  gt_engine* e = reinterpret_cast<gt_engine*>(0x1);
  EXPECT_EQ(c.engine_create(R"({"device": "zero"})", &e), GT_ERR_INVALID);
  EXPECT_EQ(e, nullptr);
  EXPECT_TRUE(starts_with(c.last_error(), "options.device: must be an integer")) << c.last_error();
  EXPECT_EQ(c.engine_create("{not json", &e), GT_ERR_INVALID);
  EXPECT_TRUE(starts_with(c.last_error(), "options: invalid JSON")) << c.last_error();
}

TEST(CApi, EngineCreateWithoutDeviceOrBadProblemFailsReadably) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  gt_engine* e = nullptr;
  int st = c.engine_create(R"({"use_cache": false})", &e);
  if (!cuda_device_present()) {
    EXPECT_EQ(st, GT_ERR_NO_DEVICE);
    EXPECT_EQ(e, nullptr);
    EXPECT_TRUE(starts_with(c.last_error(), "no CUDA device")) << c.last_error();
    return;
  }
  // With a device: the engine exists, and a bad problem is refused before any tuning.
  ASSERT_EQ(st, GT_OK) << c.last_error();
  ASSERT_NE(e, nullptr);
  gt_kernel* k = reinterpret_cast<gt_kernel*>(0x1);
  char* report = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(c.select(e, R"({"m": 16, "n": 16, "k": 16, "layout": "xy"})", 0, &k, &report), GT_ERR_INVALID);
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(report, nullptr);
  EXPECT_TRUE(starts_with(c.last_error(), "problem.layout:")) << c.last_error();
  EXPECT_EQ(c.load(e, R"({"m": 16, "n": 16})", "cublaslt", "00", &k), GT_ERR_INVALID);
  EXPECT_TRUE(starts_with(c.last_error(), "problem.k: required")) << c.last_error();
  char* info = nullptr;
  ASSERT_EQ(c.engine_info(e, &info), GT_OK) << c.last_error();
  json j = json::parse(info);
  EXPECT_TRUE(j.contains("device"));
  EXPECT_TRUE(j["cache_path"].is_null());
  c.free(info);
  EXPECT_EQ(c.engine_destroy(e), GT_OK);
}

// ---- hostile input (audit of 2026-12-01) -------------------------------------------------------

namespace {
std::string nested(const std::string& field, int depth) {
  return "{\"" + field + "\": " + std::string(size_t(depth), '[') + std::string(size_t(depth), ']') + "}";
}
}  // namespace

// D1: a value nested 200k deep crashed the error path (recursive dump of the value to quote it).
// The depth is now capped while parsing, and the error names the field.
TEST(HostileJson, DeepNestingIsRejectedNamingTheField) {
  EXPECT_TRUE(starts_with(options_error(nested("device", 200000)), "options.device: nested deeper than 32 levels"))
      << options_error(nested("device", 200000)).substr(0, 200);
  EXPECT_TRUE(starts_with(problem_error(nested("m", 200000)), "problem.m: nested deeper than 32 levels"));
  EXPECT_TRUE(starts_with(problem_error(R"({"m": {"a": )" + std::string(40, '[')), "problem.m.a: nested deeper"));
  try {
    softmax_problem_from_json(nested("rows", 200000));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid);
    EXPECT_TRUE(starts_with(e.message(), "softmax.rows: nested deeper")) << e.message();
  }
  // Shallow nesting still gets the ordinary type error.
  EXPECT_TRUE(starts_with(options_error(nested("device", 20)), "options.device: must be an integer"));
}

TEST(CApi, DeeplyNestedJsonFailsInvalidNotACrash) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  for (const char* field : {"device", "backends", "cache_path"}) {
    gt_engine* e = reinterpret_cast<gt_engine*>(0x1);
    EXPECT_EQ(c.engine_create(nested(field, 200000).c_str(), &e), GT_ERR_INVALID);
    EXPECT_EQ(e, nullptr);
    EXPECT_TRUE(starts_with(c.last_error(), std::string("options.") + field + ": nested deeper")) << c.last_error();
  }
}

// D10: 1e400 escaped as an internal error with nlohmann's text; a float outside int64's range was
// cast before its range check (undefined behaviour).
TEST(HostileJson, NumberOverflowIsInvalidNamingTheField) {
  EXPECT_EQ(options_error(R"({"device": 1e400})"), "options.device: number out of range");
  EXPECT_EQ(problem_error(R"({"m": 16, "n": 16, "k": 16, "alpha": -1e400})"), "problem.alpha: number out of range");
  EXPECT_TRUE(starts_with(problem_error(R"({"m": 1e300, "n": 16, "k": 16})"), "problem.m: must be an integer"));
  EXPECT_TRUE(starts_with(problem_error(R"({"m": -1e19, "n": 16, "k": 16})"), "problem.m: must be an integer"));
}

TEST(CApi, NumberOverflowIsInvalidNotInternal) {
  REQUIRE_CAPI();
  const CApi& c = capi();
  gt_engine* e = nullptr;
  EXPECT_EQ(c.engine_create(R"({"device": 1e400})", &e), GT_ERR_INVALID);
  EXPECT_EQ(std::string(c.last_error()), "options.device: number out of range");
}

// D11: tune counts were narrowed from int64 to int unchecked (4294967297 rounds became 1), and the
// time knobs had no ceiling.
TEST(HostileJson, TuneCountsAreRangeCheckedBeforeNarrowing) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {R"({"tune": {"min_rounds": 4294967297}})", "options.tune.min_rounds: must be in [1, 100000], got 4294967297"},
      {R"({"tune": {"tie_rounds": 4294967296}})", "options.tune.tie_rounds: must be in [0, 100000], got 4294967296"},
      {R"({"tune": {"duels": 4294967296}})", "options.tune.duels: must be in [0, 100000], got 4294967296"},
      {R"({"tune": {"duel_rounds": -4294967295}})", "options.tune.duel_rounds: must be in [0, 100000], got -4294967295"},
      {R"({"tune": {"input_sets": 4294967297}})", "options.tune.input_sets: must be in [0, 64], got 4294967297"},
      {R"({"tune": {"warmup_ms": 1e308}})", "options.tune.warmup_ms: must be in [0, 60000] ms"},
      {R"({"tune": {"round_budget_ms": 1e308}})", "options.tune.round_budget_ms: must be in (0, 60000] ms"},
  };
  for (auto& c : cases) EXPECT_EQ(options_error(c.json), c.want) << c.json;
  EXPECT_EQ(engine_options_from_json(R"({"tune": {"min_rounds": 7, "duels": 0}})").tune.min_rounds, 7);
}
