// The Triton backend without a GPU: the compile side (Compiler: artifact store hit or worker
// compile, then publish) against a fake worker, and against the real `python -m
// gemmtune.worker` when the project's Python has Triton (else skipped); the backend's
// candidates, ids and load() rules.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "backends/backend.hpp"
#include "backends/triton/compiler.hpp"
#include "backends/triton/configs.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::triton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSms = 132;

// Answers compile requests with a fake cubin (its params) after 0.2 s, logs every request's
// params to argv[2]; block_m 256 fails with a resource error. argv[1]: ok, no_triton, old.
constexpr const char* kFakeCompiler = R"PY(
import json, os, sys, time
mode, log = sys.argv[1], sys.argv[2]
ready = {"ready": True, "worker": 1, "python": "3", "versions": {"triton": "9.9.9"}}
if mode == "no_triton":
    ready["versions"] = {}
    ready["missing"] = {"triton": "ModuleNotFoundError: No module named 'triton'"}
if mode == "old":
    ready["worker"] = 0
print(json.dumps(ready), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    p = req["params"]
    with open(log, "a") as f:
        f.write(json.dumps(p, sort_keys=True) + "\n")
    if p.get("block_m") == 256:
        print(json.dumps({"id": req["id"], "ok": False, "kind": "resource",
                          "error": "OutOfResources: shared memory\nRequired: 300000, limit 232448"}), flush=True)
        continue
    time.sleep(0.2)
    path = os.path.join(req["out_dir"], req["kernel"] + "-fake.cubin")
    with open(path, "wb") as f:
        f.write(b"\x7fELF" + json.dumps(p, sort_keys=True).encode())
    meta = {"shared": 1024, "num_warps": p.get("num_warps", 4), "num_ctas": 1, "global_scratch_size": 0,
            "global_scratch_align": 1, "profile_scratch_size": 0, "profile_scratch_align": 1}
    print(json.dumps({"id": req["id"], "ok": True, "artifact": path, "name": req["kernel"], "meta": meta,
                      "compile_s": 0.2}), flush=True)
)PY";

class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/gemmtune-triton-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

int lines_in(const fs::path& p) {
  std::ifstream in(p);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class FakeCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not found";
    fs::create_directories(tree_.path() / "py" / "gemmtune" / "kernels");
    std::ofstream(tree_.path() / "py" / "gemmtune" / "kernels" / "triton_gemm.py") << "# template v1\n";
    std::ofstream(tree_.path() / "fake.py") << kFakeCompiler;
  }
  CompilerOptions options(const std::string& mode = "ok") const {
    CompilerOptions o;
    o.pool.command = {"python3", (tree_.path() / "fake.py").string(), mode, log().string()};
    o.pool.max_workers = 4;
    o.artifacts = tree_.path() / "artifacts";
    o.python_dir = tree_.path() / "py";
    o.timeout_s = 30;
    return o;
  }
  fs::path log() const { return tree_.path() / "requests.log"; }
  TempTree tree_;
};

TEST_F(FakeCompilerTest, MissCompilesAndPublishesThenHits) {
  auto p = GemmProblem::linear(256, 256, 256);
  json params = gemm_params(Config::parse("t64x64x64w4s3g8"), p, kSms);
  // Compile output goes to a private temporary directory, removed after each compile.
  fs::create_directories(tree_.path() / "tmp");
  const char* old_tmp = std::getenv("TMPDIR");
  std::string saved_tmp = old_tmp ? old_tmp : "";
  setenv("TMPDIR", (tree_.path() / "tmp").c_str(), 1);
  std::string key;
  {
    Compiler c(options());
    ASSERT_TRUE(c.available()) << c.available().reason;
    EXPECT_EQ(c.triton_version(), "9.9.9");
    CompiledArtifact a = c.compile(params);
    EXPECT_FALSE(a.store_hit);
    EXPECT_DOUBLE_EQ(a.compile_s, 0.2);
    EXPECT_EQ(a.kernel, "gemm_tiled");
    EXPECT_EQ(a.function, "gemm_tiled");
    EXPECT_EQ(a.launch["shared"], 1024);
    EXPECT_EQ(a.artifact.bytes->substr(0, 4), "\x7f" "ELF");
    key = a.artifact.key;
    EXPECT_EQ(key, c.key(params));
    EXPECT_TRUE(fs::exists(c.store().bin_path(key)));
    EXPECT_TRUE(fs::exists(c.store().json_path(key)));
    EXPECT_TRUE(c.compile(params).store_hit);  // from memory
  }
  Compiler again(options());  // a new process, as it were: the files serve it
  CompiledArtifact b = again.compile(params);
  EXPECT_TRUE(b.store_hit);
  EXPECT_EQ(b.compile_s, 0.0);
  EXPECT_EQ(b.artifact.key, key);
  EXPECT_EQ(b.launch["num_warps"], 4);
  EXPECT_EQ(lines_in(log()), 1);  // one compile request in all
  EXPECT_TRUE(fs::is_empty(tree_.path() / "tmp"));
  if (old_tmp) setenv("TMPDIR", saved_tmp.c_str(), 1);
  else unsetenv("TMPDIR");
}

TEST_F(FakeCompilerTest, KeyCoversTemplateParamsAndVersions) {
  auto p = GemmProblem::linear(256, 256, 256);
  json params = gemm_params(Config::parse("t64x64x64w4s3g8"), p, kSms);
  Compiler c1(options());
  std::string k1 = c1.key(params);
  EXPECT_EQ(k1.size(), 64u);
  EXPECT_NE(c1.key(gemm_params(Config::parse("t64x64x64w4s4g8"), p, kSms)), k1);
  std::ofstream(tree_.path() / "py" / "gemmtune" / "kernels" / "triton_gemm.py") << "# template v2\n";
  Compiler c2(options());
  EXPECT_NE(c2.key(params), k1);
  EXPECT_NE(c2.sources_digest(), c1.sources_digest());
}

TEST_F(FakeCompilerTest, CompileFailureNamesKindAndError) {
  Compiler c(options());
  auto p = GemmProblem::linear(4096, 4096, 4096);
  try {
    c.compile(gemm_params(Config::parse("t256x128x64w8s3g8"), p, kSms));
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("triton: compile failed (resource): OutOfResources: shared memory ... Required: 300000"),
              std::string::npos)
        << e.message();
  }
  EXPECT_TRUE(c.compile(gemm_params(Config::parse("t128x128x64w8s3g8"), p, kSms)).artifact.bytes);
}

TEST_F(FakeCompilerTest, ConcurrentCompilesOfOneKeyShareOneRequest) {
  Compiler c(options());
  ASSERT_TRUE(c.available());
  json params = gemm_params(Config::parse("t64x64x64w4s3g8"), GemmProblem::linear(256, 256, 256), kSms);
  std::vector<std::thread> threads;
  std::vector<std::string> keys(6);
  for (int i = 0; i < 6; ++i) threads.emplace_back([&, i] { keys[i] = c.compile(params).artifact.key; });
  for (auto& t : threads) t.join();
  for (auto& k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ(lines_in(log()), 1);
}

TEST_F(FakeCompilerTest, PrecompileSplitKSharesTheReduceKernel) {
  Compiler c(options());
  auto p = GemmProblem::linear(16, 4096, 8192);
  std::vector<Config> configs = {Config::parse("t16x64x128w4s4g8k4"), Config::parse("t16x128x64w4s4g8k4"),
                                 Config::parse("t16x64x64w4s3g8"), Config::parse("t256x128x64w8s3g8")};
  auto results = precompile(c, p, configs, kSms);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].artifacts.size(), 2u) << results[0].error;
  EXPECT_EQ(results[0].artifacts[1].kernel, "splitk_reduce");
  EXPECT_EQ(results[1].artifacts.size(), 2u) << results[1].error;
  EXPECT_EQ(results[0].artifacts[1].artifact.key, results[1].artifacts[1].artifact.key);
  EXPECT_EQ(results[2].artifacts.size(), 1u) << results[2].error;
  EXPECT_TRUE(results[3].artifacts.empty());
  EXPECT_NE(results[3].error.find("(resource)"), std::string::npos) << results[3].error;
  EXPECT_EQ(lines_in(log()), 5);  // 3 GEMMs + 1 reduce + the failing one
}

bool eventually(const std::function<bool()>& cond, double seconds = 20) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!cond() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return cond();
}

TEST_F(FakeCompilerTest, PrestartStartsWorkersOnlyForStoreMisses) {
  auto p = GemmProblem::linear(16, 4096, 8192);
  std::vector<Config> configs = {Config::parse("t16x64x128w4s4g8k4"), Config::parse("t16x128x64w4s4g8k4"),
                                 Config::parse("t16x64x64w4s3g8")};
  std::vector<json> params;
  for (const Config& c : configs) {
    params.push_back(gemm_params(c, p, kSms));
    if (c.split_k > 1) params.push_back(reduce_params(c, p));
  }
  {
    CompilerOptions o = options();
    o.pool.max_workers = 3;
    Compiler c(o);
    EXPECT_EQ(c.prestart(params), 4);  // 3 GEMMs + the shared reduce; capped at 3 workers
    EXPECT_EQ(c.pool().live_workers(), 3);
    ASSERT_TRUE(eventually([&] { return c.pool().idle_workers() == 3; }));
    for (auto& r : precompile(c, p, configs, kSms)) EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(c.pool().live_workers(), 3);  // the compiles used the prestarted workers
  }
  // All in the store now: a fresh compiler starts none beyond its availability probe's.
  Compiler warm(options());
  EXPECT_EQ(warm.prestart(params), 0);
  EXPECT_EQ(warm.pool().live_workers(), 1);
  // Without Triton: nothing is started.
  Compiler none(options("no_triton"));
  EXPECT_EQ(none.prestart(params), 0);
  EXPECT_EQ(none.pool().live_workers(), 1);
}

TEST_F(FakeCompilerTest, UnavailableWithAReason) {
  Verdict v = Compiler(options("no_triton")).available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("No module named 'triton'"), std::string::npos) << v.reason;

  v = Compiler(options("old")).available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("protocol 0, expected 1"), std::string::npos) << v.reason;

  CompilerOptions o = options();
  o.python_dir = tree_.path() / "nowhere";
  v = Compiler(o).available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("Triton templates not found"), std::string::npos) << v.reason;

  o = options();
  o.pool.command = {"/nonexistent/python"};
  Compiler missing(o);
  v = missing.available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("cannot start compile worker '/nonexistent/python'"), std::string::npos) << v.reason;
  EXPECT_THROW(missing.compile(json::object()), Error);
}

// ---- the real worker (the project's .venv with Triton) -------------------------------------

TEST(TritonRealWorker, CompilesCandidatesOnTheCpuAndHitsTheStore) {
  TempTree tree;
  CompilerOptions o = CompilerOptions::defaults();
  o.artifacts = tree.path() / "artifacts";
  o.pool.max_workers = 2;
  auto first = std::make_unique<Compiler>(o);
  if (Verdict v = first->available(); !v) GTEST_SKIP() << "no Triton compile worker: " << v.reason;

  auto p = GemmProblem::linear(256, 512, 8192);  // bf16 nn.Linear: tiled, persistent and split-k configs
  std::vector<Config> configs = {Config::parse("t64x64x64w4s3g8"), Config::parse("p128x128x64w8s3g8"),
                                 Config::parse("t64x128x64w4s4g8k4")};
  for (const Config& c : configs) ASSERT_TRUE(check(c, p, kSms)) << c.id();
  auto t0 = std::chrono::steady_clock::now();
  auto results = precompile(*first, p, configs, kSms);
  double cold_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t artifacts = 0;
  for (const Precompiled& r : results) {
    SCOPED_TRACE(r.config.id());
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const CompiledArtifact& a : r.artifacts) {
      ++artifacts;
      EXPECT_FALSE(a.store_hit);
      EXPECT_GT(a.compile_s, 0.0);
      EXPECT_EQ(a.artifact.bytes->substr(0, 4), "\x7f" "ELF");
      EXPECT_EQ(a.function, a.kernel);
      EXPECT_LE(a.launch["shared"].get<int64_t>(), kMaxSharedBytes);
      EXPECT_EQ(a.launch["num_ctas"], 1);
      EXPECT_TRUE(fs::exists(first->store().bin_path(a.artifact.key)));
    }
  }
  EXPECT_EQ(artifacts, 4u);  // 3 GEMMs + 1 reduce
  // The workers were forked from the fork server, which is still serving (not dropped).
  const char* fork_env = std::getenv("GEMMTUNE_COMPILE_FORK_SERVER");
  if (!(fork_env && std::string(fork_env) == "0")) {
    EXPECT_TRUE(o.pool.fork_server);
    EXPECT_GT(first->pool().fork_server_pid(), 0);
  }
  EXPECT_EQ(results[0].artifacts[0].launch["num_warps"], 4);
  EXPECT_GT(results[1].artifacts[0].launch["global_scratch_size"].get<int64_t>(), 0);  // in-kernel TMA descriptors
  first.reset();

  Compiler second(o);
  t0 = std::chrono::steady_clock::now();
  auto again = precompile(second, p, configs, kSms);
  double warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const Precompiled& r : again) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const CompiledArtifact& a : r.artifacts) {
      EXPECT_TRUE(a.store_hit) << r.config.id();
      EXPECT_EQ(a.compile_s, 0.0);
    }
  }
  std::printf("[ triton ] cold compile of 4 artifacts %.1f s; store hits %.2f s (incl. worker start)\n", cold_s,
              warm_s);
}

// ---- the backend (no GPU needed for candidates and ids) -------------------------------------

DeviceInfo fake_h200() {
  DeviceInfo d;
  d.name = "NVIDIA H200 (fake)";
  d.sm_count = kSms;
  d.cc_major = 9, d.cc_minor = 0;
  return d;
}

TEST(TritonBackend, CandidatesIdsAndLoad) {
  auto b = make_triton_backend({fake_h200(), [](const std::string&) {}});
  EXPECT_EQ(b->name(), "triton");
  auto p = GemmProblem::linear(4096, 4096, 4096);
  ASSERT_TRUE(b->supports(p)) << b->supports(p).reason;
  auto cands = b->candidates(p);
  EXPECT_EQ(cands.size(), configs_for(p, kSms).size());
  for (auto& c : cands) {
    EXPECT_EQ(c->backend(), "triton");
    EXPECT_FALSE(c->is_default());
    auto again = b->load(p, c->id());
    EXPECT_EQ(again->id(), c->id());
    EXPECT_EQ(again->name(), c->name());
  }
  EXPECT_THROW(b->load(p, "not-an-id"), Error);
  auto misaligned = GemmProblem::linear(4096, 4096, 4100);
  try {
    b->load(misaligned, "p128x128x64w8s3g8");
    FAIL() << "loaded a persistent config for unaligned rows";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("multiples of 16"), std::string::npos) << e.message();
  }
  Verdict v = b->supports(GemmProblem::linear(int64_t(1) << 31, 16, 16));
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("32-bit"), std::string::npos) << v.reason;
}

TEST(TritonBackend, OnlyForSm90) {
  DeviceInfo ampere = fake_h200();
  ampere.cc_major = 8;
  auto b = make_triton_backend({ampere, [](const std::string&) {}});
  Verdict v = b->available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("compiled for sm_90a; this device is sm_80"), std::string::npos) << v.reason;
}

}  // namespace
}  // namespace gemmtune::triton
