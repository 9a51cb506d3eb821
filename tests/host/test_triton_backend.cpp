// The Triton backend without a GPU: its toolchain through the artifact cache (store hit or
// worker compile, then publish) against a fake worker, and against the real `python -m
// gemmtune.worker` when the project's Python has Triton (else skipped); the backend's
// candidates, ids, jobs and load() rules.
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "compile/python_worker.hpp"
#include "compile/source_hash.hpp"
#include "core/settings.hpp"
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

DeviceInfo fake_h200() {
  DeviceInfo d = hopper_target(kSms);
  d.name = "NVIDIA H200 (fake)";
  return d;
}

// The Triton toolchain over a fake worker: CompileOptions::python is a wrapper script that runs
// the fake (it ignores "-m gemmtune.worker").
class FakeCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not found";
    fs::create_directories(tree_.path() / "py" / "gemmtune" / "kernels");
    template_text("# template v1\n");
    std::ofstream(tree_.path() / "fake.py") << kFakeCompiler;
  }
  void template_text(const std::string& text) {
    std::ofstream(tree_.path() / "py" / "gemmtune" / "kernels" / "triton_gemm.py") << text;
  }
  CompileOptions options(const std::string& mode = "ok") const {
    const fs::path wrapper = tree_.path() / ("python-" + mode);
    std::ofstream(wrapper) << "#!/bin/sh\nexec python3 " << (tree_.path() / "fake.py").string() << " " << mode << " "
                           << log().string() << "\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    CompileOptions o;
    o.python = wrapper.string();
    o.fork_server = false;
    o.workers = 4;
    o.artifacts = tree_.path() / "artifacts";
    o.python_dir = tree_.path() / "py";
    o.timeout_s = 30;
    return resolve(o);
  }
  std::unique_ptr<compile::ArtifactCache> cache(const CompileOptions& o) const {
    return std::make_unique<compile::ArtifactCache>(o, compile::make_toolchains(o, Log()), Log());
  }
  // The compile jobs of config `id` for p, as the backend names them.
  std::vector<compile::Job> jobs(compile::ArtifactCache& c, const GemmProblem& p, const std::string& id) const {
    auto b = make_triton_backend(BackendContext{fake_h200(), Log(), &c, 0});
    return b->load(p, id)->jobs();
  }
  // The sources hash the Triton compiler has always keyed with: the template (required), its
  // compile step and the worker, in this order.
  std::string hash_of_sources() const {
    static const char* const kSources[] = {"gemmtune/kernels/triton_gemm.py", "gemmtune/triton_compile.py",
                                           "gemmtune/worker.py"};
    return hash_sources(tree_.path() / "py", kSources,
                        [](std::string_view rel) { return rel == "gemmtune/kernels/triton_gemm.py"; })
        .hex;
  }
  fs::path log() const { return tree_.path() / "requests.log"; }
  TempTree tree_;
};

TEST_F(FakeCompilerTest, MissCompilesAndPublishesThenHits) {
  auto p = GemmProblem::linear(256, 256, 256);
  std::string key;
  {
    auto c = cache(options());
    ASSERT_TRUE(c->available("triton")) << c->available("triton").reason;
    EXPECT_EQ(c->version("triton"), "9.9.9");
    const auto js = jobs(*c, p, "t64x64x64w4s3g8");
    ASSERT_EQ(js.size(), 1u);
    EXPECT_EQ(js[0].params, gemm_params(Config::parse("t64x64x64w4s3g8"), p, kSms));
    compile::Built a = c->build(js[0]);
    EXPECT_FALSE(a.hit);
    EXPECT_DOUBLE_EQ(a.seconds, 0.2);
    EXPECT_EQ(a.artifact.meta["kernel"], "gemm_tiled");
    EXPECT_EQ(a.artifact.meta["function"], "gemm_tiled");
    EXPECT_EQ(a.artifact.meta["launch"]["shared"], 1024);
    EXPECT_EQ(a.artifact.bytes->substr(0, 4), "\x7f" "ELF");
    key = a.artifact.key;
    EXPECT_EQ(key, c->key(js[0]));
    EXPECT_TRUE(fs::exists(c->store().bin_path(key)));
    EXPECT_TRUE(fs::exists(c->store().json_path(key)));
    EXPECT_TRUE(c->build(js[0]).hit);  // from memory
  }
  auto again = cache(options());  // a new process, as it were: the files serve it
  compile::Built b = again->build(jobs(*again, p, "t64x64x64w4s3g8")[0]);
  EXPECT_TRUE(b.hit);
  EXPECT_EQ(b.seconds, 0.0);
  EXPECT_EQ(b.artifact.key, key);
  EXPECT_EQ(b.artifact.meta["launch"]["num_warps"], 4);
  EXPECT_EQ(lines_in(log()), 1);  // one compile request in all
  // Compile output went to a private folder under the store, removed after the compile.
  EXPECT_TRUE(fs::is_empty(tree_.path() / "artifacts" / "triton" / "tmp"));
}

TEST_F(FakeCompilerTest, KeyCoversTemplateParamsAndVersions) {
  auto p = GemmProblem::linear(256, 256, 256);
  auto c1 = cache(options());
  const compile::Job j = jobs(*c1, p, "t64x64x64w4s3g8")[0];
  std::string k1 = c1->key(j);
  EXPECT_EQ(k1.size(), 64u);
  // The key material is exactly what the Triton compiler has always hashed.
  EXPECT_EQ(k1, ArtifactStore::make_key("gemmtune-triton-artifact 1\nprotocol 1\ntriton 9.9.9\ntarget cuda sm_90a\nsources " +
                                        hash_of_sources() + "\nparams " + j.params.dump() + "\n"));
  EXPECT_NE(c1->key(jobs(*c1, p, "t64x64x64w4s4g8")[0]), k1);
  template_text("# template v2\n");
  auto c2 = cache(options());
  EXPECT_NE(c2->key(j), k1);
  EXPECT_NE(c2->sources_digest("triton"), c1->sources_digest("triton"));
}

// The softmax and grouped templates are not in the toolchain's sources hash: each job carries its
// template's digest, so an edit to triton_grouped.py or triton_softmax.py rekeys that op's
// artifacts (and no other op's), and a backend without its template says where it looked.
TEST_F(FakeCompilerTest, SoftmaxAndGroupedJobsKeyTheirOwnTemplates) {
  const fs::path kernels = tree_.path() / "py" / "gemmtune" / "kernels";
  const auto g = GroupedGemmProblem::make(8, 4096, 4096, 512);
  const auto s = SoftmaxProblem::make(1000, 4096);
  const auto gemm = GemmProblem::linear(256, 256, 256);
  auto c = cache(options());
  const BackendContext ctx{fake_h200(), Log(), c.get(), 0};
  EXPECT_FALSE(make_triton_grouped_backend(ctx)->available());
  EXPECT_NE(make_triton_grouped_backend(ctx)->available().reason.find("triton_grouped.py"), std::string::npos);
  EXPECT_NE(make_triton_softmax_backend(ctx)->available().reason.find("triton_softmax.py"), std::string::npos);

  auto keys = [&] {  // grouped, softmax and GEMM job keys, backends made after the edits
    auto gb = make_triton_grouped_backend(ctx);
    auto sb = make_triton_softmax_backend(ctx);
    EXPECT_TRUE(gb->available()) << gb->available().reason;
    EXPECT_TRUE(sb->available()) << sb->available().reason;
    return std::array<std::string, 3>{c->key(gb->candidates(g)[0]->jobs()[0]), c->key(sb->candidates(s)[0]->jobs()[0]),
                                      c->key(jobs(*c, gemm, "t64x64x64w4s3g8")[0])};
  };
  std::ofstream(kernels / "triton_grouped.py") << "# grouped v1\n";
  std::ofstream(kernels / "triton_softmax.py") << "# softmax v1\n";
  const auto k1 = keys();
  std::ofstream(kernels / "triton_grouped.py") << "# grouped v2\n";
  const auto k2 = keys();
  EXPECT_NE(k2[0], k1[0]);
  EXPECT_EQ(k2[1], k1[1]);
  EXPECT_EQ(k2[2], k1[2]);
  std::ofstream(kernels / "triton_softmax.py") << "# softmax v2\n";
  const auto k3 = keys();
  EXPECT_EQ(k3[0], k2[0]);
  EXPECT_NE(k3[1], k2[1]);
  EXPECT_EQ(k3[2], k2[2]);
  EXPECT_EQ(lines_in(log()), 0);  // keys compile nothing
}

TEST_F(FakeCompilerTest, CompileFailureNamesKindAndError) {
  auto c = cache(options());
  auto p = GemmProblem::linear(4096, 4096, 4096);
  try {
    c->build(jobs(*c, p, "t256x128x64w8s3g8")[0]);
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("triton: compile failed (resource): OutOfResources: shared memory ... Required: 300000"),
              std::string::npos)
        << e.message();
  }
  EXPECT_TRUE(c->build(jobs(*c, p, "t128x128x64w8s3g8")[0]).artifact.bytes);
}

TEST_F(FakeCompilerTest, ConcurrentCompilesOfOneKeyShareOneRequest) {
  auto c = cache(options());
  ASSERT_TRUE(c->available("triton"));
  const compile::Job j = jobs(*c, GemmProblem::linear(256, 256, 256), "t64x64x64w4s3g8")[0];
  std::vector<std::thread> threads;
  std::vector<std::string> keys(6);
  for (int i = 0; i < 6; ++i) threads.emplace_back([&, i] { keys[i] = c->build(j).artifact.key; });
  for (auto& t : threads) t.join();
  for (auto& k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ(lines_in(log()), 1);
}

TEST_F(FakeCompilerTest, SplitKSharesTheReduceKernel) {
  auto c = cache(options());
  auto p = GemmProblem::linear(16, 4096, 8192);
  std::vector<compile::Job> all;
  std::vector<size_t> first;
  for (const char* id : {"t16x64x128w4s4g8k4", "t16x128x64w4s4g8k4", "t16x64x64w4s3g8", "t256x128x64w8s3g8"}) {
    first.push_back(all.size());
    for (auto& j : jobs(*c, p, id)) all.push_back(std::move(j));
  }
  ASSERT_EQ(all.size(), 6u);  // two split-k configs name a reduce kernel each
  int progress = 0;
  auto out = c->build_all(all, [&](size_t, const compile::ArtifactCache::Outcome&) { ++progress; });
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(out[i].built) << i << ": " << out[i].error;
  EXPECT_EQ(out[1].built->artifact.meta["kernel"], "splitk_reduce");
  EXPECT_EQ(out[1].built->artifact.key, out[3].built->artifact.key);  // one reduce for both
  EXPECT_FALSE(out[5].built);
  EXPECT_NE(out[5].error.find("(resource)"), std::string::npos) << out[5].error;
  EXPECT_EQ(progress, 5);          // distinct artifacts once
  EXPECT_EQ(lines_in(log()), 5);  // 3 GEMMs + 1 reduce + the failing one
  // All in the store now: a fresh cache answers every one of them without a request.
  auto warm = cache(options());
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(warm->build(all[i]).hit);
  EXPECT_EQ(lines_in(log()), 5);
}

TEST_F(FakeCompilerTest, UnavailableWithAReason) {
  Verdict v = cache(options("no_triton"))->available("triton");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("No module named 'triton'"), std::string::npos) << v.reason;

  v = cache(options("old"))->available("triton");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("protocol 0, expected 1"), std::string::npos) << v.reason;

  CompileOptions o = options();
  o.python_dir = tree_.path() / "nowhere";
  v = cache(o)->available("triton");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("triton kernel sources not found"), std::string::npos) << v.reason;

  o = options();
  o.python = "/nonexistent/python";
  auto missing = cache(o);
  v = missing->available("triton");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("cannot start compile worker '/nonexistent/python'"), std::string::npos) << v.reason;
  EXPECT_THROW(missing->build({"triton", "x", {}, json::object()}), Error);
  // The backend says the same.
  auto b = make_triton_backend(BackendContext{fake_h200(), Log(), missing.get(), 0});
  EXPECT_FALSE(b->available());
  EXPECT_EQ(b->version(), "triton (unavailable)");
}

TEST_F(FakeCompilerTest, CandidatesIdsJobsAndLoad) {
  auto c = cache(options());
  auto b = make_triton_backend(BackendContext{fake_h200(), Log(), c.get(), 0});
  EXPECT_EQ(b->name(), "triton");
  ASSERT_TRUE(b->available()) << b->available().reason;
  EXPECT_EQ(b->version(), "triton 9.9.9 (templates " + c->sources_digest("triton") + ")");
  auto p = GemmProblem::linear(4096, 4096, 4096);
  ASSERT_TRUE(b->supports(p)) << b->supports(p).reason;
  auto cands = b->candidates(p);
  EXPECT_EQ(cands.size(), configs_for(p, kSms).size());
  for (auto& cand : cands) {
    EXPECT_EQ(cand->backend(), "triton");
    EXPECT_FALSE(cand->is_default());
    const Config cfg = Config::parse(cand->id());
    EXPECT_EQ(cand->jobs().size(), cfg.split_k > 1 ? 2u : 1u);
    auto again = b->load(p, cand->id());
    EXPECT_EQ(again->id(), cand->id());
    EXPECT_EQ(again->name(), cand->name());
  }
  EXPECT_EQ(lines_in(log()), 0);  // candidates() and jobs() compile nothing
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

// ---- the real worker (the project's .venv with Triton) -------------------------------------

TEST(TritonRealWorker, CompilesCandidatesOnTheCpuAndHitsTheStore) {
  TempTree tree;
  CompileOptions o;
  o.artifacts = tree.path() / "artifacts";
  o.workers = 2;
  o = resolve(o);
  auto first = std::make_unique<compile::ArtifactCache>(o, compile::make_toolchains(o, Log()), Log());
  if (Verdict v = first->available("triton"); !v) GTEST_SKIP() << "no Triton compile worker: " << v.reason;

  auto p = GemmProblem::linear(256, 512, 8192);  // bf16 nn.Linear: tiled, persistent and split-k configs
  std::vector<compile::Job> all;
  {
    auto b = make_triton_backend(BackendContext{fake_h200(), Log(), first.get(), 0});
    for (const char* id : {"t64x64x64w4s3g8", "p128x128x64w8s3g8", "t64x128x64w4s4g8k4"}) {
      ASSERT_TRUE(check(Config::parse(id), p, kSms)) << id;
      for (auto& j : b->load(p, id)->jobs()) all.push_back(std::move(j));
    }
  }
  ASSERT_EQ(all.size(), 4u);  // 3 GEMMs + 1 reduce
  auto t0 = std::chrono::steady_clock::now();
  auto results = first->build_all(all);
  double cold_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(all[i].what);
    ASSERT_TRUE(results[i].built) << results[i].error;
    const compile::Built& a = *results[i].built;
    EXPECT_FALSE(a.hit);
    EXPECT_GT(a.seconds, 0.0);
    EXPECT_EQ(a.artifact.bytes->substr(0, 4), "\x7f" "ELF");
    EXPECT_EQ(a.artifact.meta["function"], a.artifact.meta["kernel"]);
    EXPECT_LE(a.artifact.meta["launch"]["shared"].get<int64_t>(), kMaxSharedBytes);
    EXPECT_EQ(a.artifact.meta["launch"]["num_ctas"], 1);
    EXPECT_TRUE(fs::exists(first->store().bin_path(a.artifact.key)));
  }
  EXPECT_EQ(results[0].built->artifact.meta["launch"]["num_warps"], 4);
  // in-kernel TMA descriptors
  EXPECT_GT(results[1].built->artifact.meta["launch"]["global_scratch_size"].get<int64_t>(), 0);
  first.reset();

  compile::ArtifactCache second(o, compile::make_toolchains(o, Log()), Log());
  t0 = std::chrono::steady_clock::now();
  auto again = second.build_all(all);
  double warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < again.size(); ++i) {
    ASSERT_TRUE(again[i].built) << again[i].error;
    EXPECT_TRUE(again[i].built->hit) << all[i].what;
    EXPECT_EQ(again[i].built->seconds, 0.0);
  }
  std::printf("[ triton ] cold compile of 4 artifacts %.1f s; store hits %.2f s (incl. worker start)\n", cold_s,
              warm_s);
}

TEST(TritonBackend, OnlyForSm90) {
  DeviceInfo ampere = fake_h200();
  ampere.cc_major = 8;
  auto b = make_triton_backend(BackendContext{ampere, Log()});
  Verdict v = b->available();
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("compiled for sm_90a; this device is sm_80"), std::string::npos) << v.reason;
}

}  // namespace
}  // namespace gemmtune::triton
