// The compile stage's artifact cache (compile/artifact_cache.hpp) over a fake toolchain whose
// probe, record/restore, keys, deps and compiles are scripted: misses compiled once and
// published, store hits (in this cache and in another one on the same store), single flight,
// remembered failures, the one timeout, build_all (isolation, order, duplicates, progress,
// warm), groups (formed only beyond the slots, by family; a failed group compiled alone; the
// single flight of a group), load-only from a toolchain's record, deps and extras, unknown
// toolchains; a backend's compile budget over it (ToolchainLink::within_compile_budget).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "compile/artifact_cache.hpp"
#include "compile/single_flight.hpp"
#include "compile/toolchain.hpp"
#include "core/verdict.hpp"
#include "gemmtune/error.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using compile::ArtifactCache;
using compile::Built;
using compile::Job;
using compile::Output;
using compile::Toolchain;
using nlohmann::json;

// What the fake toolchain does and what it saw. Shared with the test (the cache owns the
// toolchain itself).
struct Script {
  std::string version = "fake 1.0";  // what probe() finds (the record carries it)
  Verdict verdict = Verdict::yes();
  std::string probe_error;          // probe() throws Error with this when set
  std::chrono::milliseconds delay{0};
  std::map<std::string, std::string> fail;   // job.what -> compile() throws Error(message)
  std::set<std::string> crash;               // job.what -> compile() throws std::runtime_error
  std::function<void(const Job&, Output&)> shape;  // adds deps, extras, seconds to an output
  size_t group_limit = 1, slots = 1;         // what the toolchain says of groups
  std::set<std::string> group_fail;          // a group holding one of these throws Error

  std::atomic<int> probes{0}, restores{0}, compiles{0};
  std::mutex mu;
  json restored;
  std::vector<size_t> warms;
  std::vector<double> timeouts;
  std::vector<std::string> compiled;  // job.what, in call order
  std::vector<std::vector<std::string>> groups;  // each compile_group call's job.what
  std::vector<fs::path> tmps;
  std::vector<bool> tmp_was_dir;

  int compiles_of(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    return int(std::count(compiled.begin(), compiled.end(), what));
  }
};

class FakeToolchain : public Toolchain {
 public:
  FakeToolchain(std::string name, std::shared_ptr<Script> s) : name_(std::move(name)), s_(std::move(s)) {}

  std::string name() const override { return name_; }
  Verdict probe() override {
    ++s_->probes;
    if (!s_->probe_error.empty()) GT_THROW(s_->probe_error);
    if (s_->verdict) version_ = s_->version;
    return s_->verdict;
  }
  json record() const override { return {{"version", version_}}; }
  void restore(const json& r) override {
    ++s_->restores;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->restored = r;
    }
    version_ = r.at("version").get<std::string>();  // throws on a malformed record
  }
  std::string version() const override { return version_; }
  std::string key_material(const Job& job) const override { return material(name_, version_, job); }
  std::vector<std::string> deps(const Artifact& a) const override {
    std::vector<std::string> out;
    if (!a.meta.contains("deps")) return out;
    GT_CHECK(a.meta["deps"].is_array(), name_ + ": deps is not a list");
    for (const json& d : a.meta["deps"]) {
      GT_CHECK(d.is_string(), name_ + ": a dep is not a key");
      out.push_back(d.get<std::string>());
    }
    return out;
  }
  void warm(size_t misses) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->warms.push_back(misses);
  }
  Output compile(const Job& job, const fs::path& tmp, double timeout_s) override {
    ++s_->compiles;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->compiled.push_back(job.what);
      s_->timeouts.push_back(timeout_s);
      s_->tmps.push_back(tmp);
      s_->tmp_was_dir.push_back(fs::is_directory(tmp));
    }
    if (s_->delay.count()) std::this_thread::sleep_for(s_->delay);
    if (auto it = s_->fail.find(job.what); it != s_->fail.end()) GT_THROW(it->second);
    if (s_->crash.count(job.what)) throw std::runtime_error("not an Error: " + job.what);
    Output o;
    o.bytes = "bin:" + job.what;
    o.meta = {{"what", job.what}};
    if (s_->shape) s_->shape(job, o);
    return o;
  }

  size_t group_limit() const override { return s_->group_limit; }
  size_t slots() const override { return s_->slots; }
  std::vector<Output> compile_group(const std::vector<Job>& jobs, const fs::path& tmp, double timeout_s) override {
    std::vector<std::string> whats;
    for (const Job& j : jobs) whats.push_back(j.what);
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->groups.push_back(whats);
      s_->timeouts.push_back(timeout_s);
      s_->tmps.push_back(tmp);
      s_->tmp_was_dir.push_back(fs::is_directory(tmp));
    }
    for (const std::string& w : whats)
      if (s_->group_fail.count(w)) GT_THROW("the group failed at " + w);
    std::vector<Output> outs;
    for (const Job& j : jobs) {
      Output o;
      o.bytes = "bin:" + j.what;
      o.meta = {{"what", j.what}, {"group", jobs.size()}};
      outs.push_back(std::move(o));
    }
    return outs;
  }

  // The key material, computed the same way for the tests' expectations.
  static std::string material(const std::string& name, const std::string& version, const Job& job) {
    return name + "\n" + version + "\n" + job.source + "\n" + job.params.dump();
  }

 private:
  std::string name_;
  std::shared_ptr<Script> s_;
  std::string version_;
};

class TempStore {
 public:
  TempStore() {
    char tmpl[] = "/tmp/gemmtune-artifact-cache-XXXXXX";
    const char* p = mkdtemp(tmpl);
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempStore() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Options as resolve() would leave them, without reading the environment.
CompileOptions options(const fs::path& root) {
  CompileOptions o;
  o.artifacts = root;
  o.workers = 2;
  o.nvcc_jobs = 2;
  o.timeout_s = 600;
  return o;
}

std::unique_ptr<ArtifactCache> make_cache(const CompileOptions& o,
                                          std::vector<std::pair<std::string, std::shared_ptr<Script>>> toolchains) {
  std::vector<std::unique_ptr<Toolchain>> ts;
  for (auto& [name, s] : toolchains) ts.push_back(std::make_unique<FakeToolchain>(name, s));
  return std::make_unique<ArtifactCache>(o, std::move(ts), Log());
}
std::unique_ptr<ArtifactCache> make_cache(const CompileOptions& o, std::shared_ptr<Script> s) {
  return make_cache(o, {{"fake", std::move(s)}});
}

Job job(const std::string& what, const std::string& toolchain = "fake") {
  Job j;
  j.toolchain = toolchain;
  j.what = what;
  j.source = "source of " + what;
  j.params = {{"config", what}};
  return j;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no Error thrown)";
}

TEST(ArtifactCache, MissCompilesOnceAndPublishesThenStoreHits) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->shape = [](const Job&, Output& o) { o.seconds = 1.25; };
  const Job a = job("a");
  std::string key;
  {
    auto cache = make_cache(options(dir.path()), s);
    key = cache->key(a);
    EXPECT_FALSE(cache->has(a));
    EXPECT_FALSE(cache->find(a));

    Built b = cache->build(a);
    EXPECT_FALSE(b.hit);
    EXPECT_DOUBLE_EQ(b.seconds, 1.25);  // the compiler's own time
    EXPECT_EQ(b.artifact.key, key);
    ASSERT_TRUE(b.artifact.bytes);
    EXPECT_EQ(*b.artifact.bytes, "bin:a");
    EXPECT_EQ(b.artifact.meta["what"], "a");
    EXPECT_TRUE(b.deps.empty());
    EXPECT_EQ(s->compiles.load(), 1);
    // Published: both files in the store, and the private build folder is gone.
    EXPECT_EQ(text_of(cache->store().bin_path(key)), "bin:a");
    EXPECT_TRUE(fs::exists(cache->store().json_path(key)));
    EXPECT_TRUE(cache->has(a));
    ASSERT_EQ(s->tmps.size(), 1u);
    EXPECT_TRUE(s->tmp_was_dir[0]);
    EXPECT_EQ(s->tmps[0].parent_path(), dir.path() / "fake" / "tmp");
    EXPECT_FALSE(fs::exists(s->tmps[0]));

    Built again = cache->build(a);
    EXPECT_TRUE(again.hit);
    EXPECT_EQ(again.seconds, 0);
    EXPECT_EQ(again.artifact.key, key);
    EXPECT_EQ(*again.artifact.bytes, "bin:a");
    EXPECT_EQ(s->compiles.load(), 1);
  }
  // Another process: a new cache on the same store finds it without compiling.
  auto s2 = std::make_shared<Script>();
  auto other = make_cache(options(dir.path()), s2);
  EXPECT_TRUE(other->has(a));
  auto found = other->find(a);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->hit);
  Built b = other->build(a);
  EXPECT_TRUE(b.hit);
  EXPECT_EQ(b.seconds, 0);
  EXPECT_EQ(b.artifact.key, key);
  EXPECT_EQ(*b.artifact.bytes, "bin:a");
  EXPECT_EQ(s2->compiles.load(), 0);
}

TEST(ArtifactCache, WallTimeWhenTheCompilerReportsNone) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->delay = std::chrono::milliseconds(20);
  auto cache = make_cache(options(dir.path()), s);
  Built b = cache->build(job("a"));
  EXPECT_FALSE(b.hit);
  EXPECT_GE(b.seconds, 0.019);
  EXPECT_LT(b.seconds, 5.0);
}

TEST(ArtifactCache, KeepBuildKeepsTheBuildFolder) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  CompileOptions o = options(dir.path());
  o.keep_build = true;
  make_cache(o, s)->build(job("a"));
  ASSERT_EQ(s->tmps.size(), 1u);
  EXPECT_TRUE(fs::is_directory(s->tmps[0]));
}

TEST(ArtifactCache, KeyIsMakeKeyOfTheToolchainsMaterial) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  const Job a = job("a");
  EXPECT_EQ(cache->key(a), ArtifactStore::make_key(FakeToolchain::material("fake", "fake 1.0", a)));
  EXPECT_EQ(cache->key(a).size(), 64u);
  EXPECT_NE(cache->key(a), cache->key(job("b")));
  // What a job prints and its metadata are not keyed.
  Job same = a;
  same.what = "a, described otherwise";
  same.meta = {{"note", "not keyed"}};
  EXPECT_EQ(cache->key(same), cache->key(a));
  // Another compiler version is another key.
  TempStore dir2;
  auto s2 = std::make_shared<Script>();
  s2->version = "fake 2.0";
  EXPECT_NE(make_cache(options(dir2.path()), s2)->key(a), cache->key(a));
  EXPECT_EQ(cache->version("fake"), "fake 1.0");
  EXPECT_EQ(s->probes.load(), 1);  // probed once, however many keys
}

TEST(ArtifactCache, SingleFlightCompilesOnceForManyThreads) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->delay = std::chrono::milliseconds(50);
  auto cache = make_cache(options(dir.path()), s);
  const Job a = job("a");
  const std::string key = cache->key(a);
  constexpr int kThreads = 8;
  std::vector<Built> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        got[i] = cache->build(a);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(s->compiles.load(), 1);
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[i], "") << i;
    EXPECT_EQ(got[i].artifact.key, key) << i;
    ASSERT_TRUE(got[i].artifact.bytes) << i;
    EXPECT_EQ(*got[i].artifact.bytes, "bin:a") << i;
  }
}

// No delay in the compile, many rounds: a thread that missed the store just before another
// thread's compile published and left the flight must not compile the key again.
TEST(ArtifactCache, SingleFlightNeverCompilesAPublishedKeyAgain) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  constexpr int kRounds = 16, kThreads = 6;
  for (int r = 0; r < kRounds; ++r) {
    const Job j = job("round " + std::to_string(r));
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&] {
        start.arrive_and_wait();
        if (*cache->build(j).artifact.bytes == "bin:" + j.what) ++ok;
      });
    for (auto& t : threads) t.join();
    ASSERT_EQ(ok.load(), kThreads);
    ASSERT_EQ(s->compiles_of(j.what), 1) << "round " << r;
  }
  EXPECT_EQ(s->compiles.load(), kRounds);
}

TEST(ArtifactCache, FailedCompileReachesTheCallerAndIsRemembered) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->fail["bad"] = "fake: compile failed: error at line 3: no such intrinsic";
  auto cache = make_cache(options(dir.path()), s);
  const Job bad = job("bad");

  const std::string first = error_of([&] { cache->build(bad); });
  EXPECT_NE(first.find("error at line 3: no such intrinsic"), std::string::npos) << first;
  EXPECT_EQ(s->compiles.load(), 1);
  EXPECT_FALSE(cache->has(bad));
  EXPECT_FALSE(fs::exists(cache->store().json_path(cache->key(bad))));

  // Again: at once, the same message, no second compile.
  EXPECT_EQ(error_of([&] { cache->build(bad); }), first);
  EXPECT_EQ(s->compiles.load(), 1);

  auto out = cache->build_all({bad, job("good")});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[0].built);
  EXPECT_EQ(out[0].error, first);
  ASSERT_TRUE(out[1].built);
  EXPECT_EQ(*out[1].built->artifact.bytes, "bin:good");
  EXPECT_EQ(s->compiles_of("bad"), 1);

  // A failure is remembered by this cache only: another one (another process) tries again.
  auto s2 = std::make_shared<Script>();
  s2->fail = s->fail;
  auto other = make_cache(options(dir.path()), s2);
  EXPECT_EQ(error_of([&] { other->build(bad); }), first);
  EXPECT_EQ(s2->compiles.load(), 1);
}

TEST(ArtifactCache, BuildAllReportsACompileErrorInItsOutcome) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->fail["bad"] = "fake: timed out after 600 s";
  auto cache = make_cache(options(dir.path()), s);
  auto out = cache->build_all({job("bad")});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].built);
  EXPECT_NE(out[0].error.find("timed out after 600 s"), std::string::npos) << out[0].error;
}

TEST(ArtifactCache, CompileGetsTheOptionsTimeout) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  CompileOptions o = options(dir.path());
  o.timeout_s = 12.5;
  auto cache = make_cache(o, s);
  cache->build(job("a"));
  cache->build_all({job("b"), job("c")});
  ASSERT_EQ(s->timeouts.size(), 3u);
  for (double t : s->timeouts) EXPECT_DOUBLE_EQ(t, 12.5);
}

TEST(ArtifactCache, BuildAllIsolatesFailuresKeepsOrderAndBuildsDuplicatesOnce) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->delay = std::chrono::milliseconds(10);
  s->fail["bad"] = "fake: compile failed: boom";
  auto cache = make_cache(options(dir.path()), s);
  Job a_again = job("a");
  a_again.what = "a (listed twice)";  // same key as "a"
  const std::vector<Job> jobs = {job("a"), job("bad"), job("b"), a_again, job("x", "nope"), job("c"), job("b")};

  std::mutex mu;
  std::atomic<int> inside{0};
  bool overlapped = false;
  std::map<size_t, int> calls;
  std::map<size_t, std::string> errors;
  auto out = cache->build_all(jobs, [&](size_t i, const ArtifactCache::Outcome& o) {
    if (++inside != 1) overlapped = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++calls[i];
      if (!o.built) errors[i] = o.error;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --inside;
  });

  ASSERT_EQ(out.size(), jobs.size());
  auto bytes = [&](size_t i) { return out[i].built ? *out[i].built->artifact.bytes : "error: " + out[i].error; };
  EXPECT_EQ(bytes(0), "bin:a");
  EXPECT_FALSE(out[1].built);
  EXPECT_NE(out[1].error.find("boom"), std::string::npos) << out[1].error;
  EXPECT_EQ(bytes(2), "bin:b");
  EXPECT_EQ(bytes(3), "bin:a");  // the duplicate gets its first occurrence's artifact
  EXPECT_EQ(out[3].built->artifact.key, out[0].built->artifact.key);
  EXPECT_FALSE(out[4].built);
  EXPECT_NE(out[4].error.find("nope"), std::string::npos) << out[4].error;
  EXPECT_EQ(bytes(5), "bin:c");
  EXPECT_EQ(bytes(6), "bin:b");
  for (size_t i : {0, 2, 3, 5, 6}) EXPECT_EQ(out[i].error, "") << i;

  // Distinct keys compiled once each (the unknown toolchain's job never reaches a compile).
  EXPECT_EQ(s->compiles.load(), 4);
  for (const char* w : {"a", "bad", "b", "c"}) EXPECT_EQ(s->compiles_of(w), 1) << w;
  // Progress: once per distinct job, at its first occurrence, one call at a time.
  EXPECT_EQ(calls, (std::map<size_t, int>{{0, 1}, {1, 1}, {2, 1}, {4, 1}, {5, 1}}));
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[1], out[1].error);
  EXPECT_EQ(errors[4], out[4].error);

  // A second run: everything that built is a hit now, the failure fails at once.
  auto again = cache->build_all(jobs);
  for (size_t i : {0, 2, 3, 5, 6}) {
    ASSERT_TRUE(again[i].built) << i;
    EXPECT_TRUE(again[i].built->hit) << i;
  }
  EXPECT_EQ(again[1].error, out[1].error);
  EXPECT_EQ(s->compiles.load(), 4);
}

// A compile that throws something other than Error is not a compile failure: build_all lets the
// other jobs finish, then rethrows it.
Job family_job(const std::string& what, const std::string& family) {
  Job j = job(what);
  j.family = family;
  return j;
}

// A toolchain that builds groups gets them only when it has more misses than slots: then one
// group a slot at least, at most group_limit each, store hits left out; every member is
// published under its own key and found again.
TEST(ArtifactCache, GroupsOnlyWhenMissesExceedTheSlots) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->group_limit = 4, s->slots = 2;
  auto cache = make_cache(options(dir.path()), s);

  auto two = cache->build_all({job("a0"), job("a1")});  // 2 misses, 2 slots: compiled alone
  EXPECT_TRUE(two[0].built && two[1].built);
  EXPECT_EQ(s->compiles.load(), 2);
  EXPECT_TRUE(s->groups.empty());

  std::vector<Job> six;  // 6 misses (and a0, a store hit): 2 groups of 3
  for (int i = 0; i < 6; ++i) six.push_back(job("b" + std::to_string(i)));
  six.push_back(job("a0"));
  auto out = cache->build_all(six);
  ASSERT_EQ(s->groups.size(), 2u);
  EXPECT_EQ(s->groups[0].size(), 3u);
  EXPECT_EQ(s->groups[1].size(), 3u);
  EXPECT_EQ(s->compiles.load(), 2);  // nothing compiled alone
  for (size_t i = 0; i < six.size(); ++i) {
    ASSERT_TRUE(out[i].built) << out[i].error;
    EXPECT_EQ(*out[i].built->artifact.bytes, "bin:" + six[i].what);
  }
  EXPECT_TRUE(out[6].built->hit);
  EXPECT_FALSE(out[0].built->hit);
  EXPECT_EQ(out[0].built->artifact.meta.value("group", 0), 3);
  // The timeout is per job: the group's run gets it for each of its members.
  EXPECT_EQ(s->timeouts.back(), 600.0);

  std::vector<Job> many;  // 10 misses, limit 4: 4 + 4 + 2
  for (int i = 0; i < 10; ++i) many.push_back(job("c" + std::to_string(i)));
  out = cache->build_all(many);
  ASSERT_EQ(s->groups.size(), 5u);
  std::multiset<size_t> sizes;
  for (size_t g = 2; g < 5; ++g) sizes.insert(s->groups[g].size());
  EXPECT_EQ(sizes, (std::multiset<size_t>{2, 4, 4}));
  for (const auto& o : out) EXPECT_TRUE(o.built) << o.error;

  // Every member is in the store under its own key: a new cache finds them all.
  auto again = make_cache(options(dir.path()), s);
  for (const Job& j : many) EXPECT_TRUE(again->build(j).hit);
  EXPECT_EQ(s->compiles.load(), 2);
}

// Groups hold one family where they can: members of a family share the compiler's work.
TEST(ArtifactCache, GroupsFollowTheFamilies) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->group_limit = 8, s->slots = 2;
  auto cache = make_cache(options(dir.path()), s);
  auto out = cache->build_all({family_job("x0", "bf16"), family_job("y0", "fp8"), family_job("x1", "bf16"),
                               family_job("y1", "fp8")});
  for (const auto& o : out) EXPECT_TRUE(o.built) << o.error;
  ASSERT_EQ(s->groups.size(), 2u);
  std::set<std::vector<std::string>> groups(s->groups.begin(), s->groups.end());
  EXPECT_EQ(groups, (std::set<std::vector<std::string>>{{"x0", "x1"}, {"y0", "y1"}}));
}

// A group whose run fails is compiled again one job at a time: each job gets its own outcome
// (and a job that fails alone, its own message).
TEST(ArtifactCache, AFailedGroupCompilesEachAlone) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->group_limit = 8, s->slots = 1;
  s->group_fail = {"g1"};
  s->fail = {{"g1", "g1 does not compile"}};
  auto cache = make_cache(options(dir.path()), s);
  auto out = cache->build_all({job("g0"), job("g1"), job("g2")});
  ASSERT_EQ(s->groups.size(), 1u);
  EXPECT_EQ(s->compiles.load(), 3);  // each alone after the group failed
  EXPECT_TRUE(out[0].built && out[2].built);
  EXPECT_FALSE(out[1].built);
  EXPECT_NE(out[1].error.find("g1 does not compile"), std::string::npos) << out[1].error;
  // The failure is remembered like any other: asked again, it fails at once.
  EXPECT_NE(error_of([&] { cache->build(job("g1")); }).find("g1 does not compile"), std::string::npos);
  EXPECT_EQ(s->compiles.load(), 3);
}

// run_group: keys in flight elsewhere are awaited (their make never sees them), remembered
// failures come back at once, the rest are made in one call; what it leaves unset fails.
TEST(SingleFlightGroup, AwaitsOtherFlightsAndMakesTheRestOnce) {
  SingleFlight<int> flights(true);
  EXPECT_NE(error_of([&] { flights.run("bad", []() -> int { GT_THROW("bad does not build"); }); }), "");
  std::promise<void> started, release;
  std::thread other([&] {
    flights.run("k1", [&] {
      started.set_value();
      release.get_future().wait();
      return 1;
    });
  });
  started.get_future().wait();
  std::vector<size_t> made;
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.set_value();
  });
  using Result = SingleFlight<int>::Result;
  auto r = flights.run_group({"k1", "k2", "bad", "k3"}, [&](const std::vector<size_t>& owned, std::vector<Result>& res) {
    made = owned;
    res[1].value = 2;  // k3 left unset
  });
  other.join();
  releaser.join();
  EXPECT_EQ(made, (std::vector<size_t>{1, 3}));
  ASSERT_TRUE(r[0].value);
  EXPECT_EQ(*r[0].value, 1);  // awaited from the other flight
  ASSERT_TRUE(r[1].value);
  EXPECT_EQ(*r[1].value, 2);
  EXPECT_NE(r[2].error.find("bad does not build"), std::string::npos);
  EXPECT_FALSE(r[3].value);
  EXPECT_FALSE(r[3].error.empty());
  // k2 is not remembered (a value is never cached here: a new flight makes it again); k3's failure is.
  EXPECT_EQ(flights.run("k2", [] { return 5; }), 5);
  EXPECT_NE(error_of([&] { flights.run("k3", [] { return 6; }); }), "(no Error thrown)");
}

TEST(ArtifactCache, BuildAllRethrowsAnExceptionThatIsNotAnErrorAfterTheOthers) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->crash.insert("crash");
  auto cache = make_cache(options(dir.path()), s);
  EXPECT_THROW(cache->build_all({job("a"), job("crash"), job("b")}), std::runtime_error);
  EXPECT_TRUE(cache->has(job("a")));
  EXPECT_TRUE(cache->has(job("b")));
  EXPECT_FALSE(cache->has(job("crash")));
}

// A progress callback that throws (a caller cancelling) does not take the process down: the
// jobs under way finish, then build_all rethrows it.
TEST(ArtifactCache, BuildAllRethrowsWhatProgressThrows) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  std::atomic<int> calls{0};
  EXPECT_THROW(cache->build_all({job("a"), job("b"), job("c")},
                                [&](size_t, const ArtifactCache::Outcome&) {
                                  ++calls;
                                  throw std::runtime_error("cancelled by the caller");
                                }),
               std::runtime_error);
  EXPECT_GE(calls.load(), 1);
  for (const char* w : {"a", "b", "c"}) EXPECT_TRUE(cache->has(job(w))) << w;
}

// A store whose build folder cannot be made: every miss fails with an Error in its outcome.
TEST(ArtifactCache, NoBuildFolderIsAnErrorPerJob) {
  TempStore dir;
  std::ofstream(dir.path() / "fake") << "a file where <store>/fake/ should be\n";
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  ASSERT_TRUE(cache->available("fake"));  // the record cannot be written: a warning only
  const std::string why = error_of([&] { cache->build(job("a")); });
  EXPECT_NE(why.find("temporary directory"), std::string::npos) << why;
  std::vector<ArtifactCache::Outcome> out;
  ASSERT_NO_THROW(out = cache->build_all({job("b"), job("c")}));
  for (auto& o : out) {
    EXPECT_FALSE(o.built);
    EXPECT_NE(o.error.find("temporary directory"), std::string::npos) << o.error;
  }
  EXPECT_EQ(s->compiles.load(), 0);
}

TEST(ArtifactCache, BuildAllWarmsEachToolchainForItsMisses) {
  TempStore dir;
  auto fake = std::make_shared<Script>();
  auto other = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), {{"fake", fake}, {"other", other}});
  cache->build(job("stored"));
  ASSERT_TRUE(fake->warms.empty());  // build() alone does not warm

  cache->build_all({job("stored"), job("m1"), job("m2"), job("m1"), job("o1", "other"), job("x", "nope")});
  EXPECT_EQ(fake->warms, std::vector<size_t>{2});
  EXPECT_EQ(other->warms, std::vector<size_t>{1});
  EXPECT_EQ(fake->compiles.load(), 3);
  EXPECT_EQ(other->compiles.load(), 1);

  // Nothing to compile: no warm-up.
  cache->build_all({job("m1"), job("o1", "other")});
  EXPECT_EQ(fake->warms, std::vector<size_t>{2});
  EXPECT_EQ(other->warms, std::vector<size_t>{1});
}

TEST(ArtifactCache, LoadOnlyFromTheRecordAnEarlierCacheWrote) {
  TempStore dir;
  const Job a = job("a"), missing = job("missing");
  std::string key;
  {
    auto s = std::make_shared<Script>();
    auto cache = make_cache(options(dir.path()), s);
    key = cache->build(a).artifact.key;
    EXPECT_FALSE(cache->load_only("fake"));
  }
  const fs::path record = dir.path() / "fake" / "toolchain.json";
  ASSERT_TRUE(fs::exists(record));
  EXPECT_EQ(json::parse(text_of(record)), (json{{"version", "fake 1.0"}}));

  auto s = std::make_shared<Script>();
  s->version = "";  // this machine has no compiler: the keys can only come from the record
  s->verdict = Verdict::no("fakecc not found");
  auto cache = make_cache(options(dir.path()), s);
  cache->start_probes();
  Verdict v = cache->available("fake");
  EXPECT_TRUE(v) << v.reason;
  EXPECT_TRUE(cache->load_only("fake"));
  EXPECT_EQ(s->probes.load(), 1);
  EXPECT_EQ(s->restores.load(), 1);
  EXPECT_EQ(s->restored, (json{{"version", "fake 1.0"}}));
  EXPECT_EQ(cache->version("fake"), "fake 1.0");
  EXPECT_EQ(cache->key(a), key);

  Built b = cache->build(a);
  EXPECT_TRUE(b.hit);
  EXPECT_EQ(b.artifact.key, key);
  EXPECT_EQ(*b.artifact.bytes, "bin:a");

  EXPECT_FALSE(cache->has(missing));
  const std::string why = error_of([&] { cache->build(missing); });
  EXPECT_NE(why.find("load-only"), std::string::npos) << why;
  EXPECT_NE(why.find("missing"), std::string::npos) << why;  // names the job

  auto out = cache->build_all({a, missing});
  ASSERT_TRUE(out[0].built);
  EXPECT_TRUE(out[0].built->hit);
  EXPECT_NE(out[1].error.find("load-only"), std::string::npos) << out[1].error;
  EXPECT_TRUE(s->warms.empty());  // a load-only toolchain starts no workers
  EXPECT_EQ(s->compiles.load(), 0);
}

TEST(ArtifactCache, LoadOnlyByRequestDoesNotProbe) {
  TempStore dir;
  make_cache(options(dir.path()), std::make_shared<Script>())->build(job("a"));

  CompileOptions o = options(dir.path());
  o.load_only = {"fake"};
  auto s = std::make_shared<Script>();  // could compile, but is told not to
  auto cache = make_cache(o, s);
  EXPECT_TRUE(cache->available("fake"));
  EXPECT_TRUE(cache->load_only("fake"));
  EXPECT_EQ(s->probes.load(), 0);
  EXPECT_EQ(s->restores.load(), 1);
  EXPECT_TRUE(cache->build(job("a")).hit);
  EXPECT_NE(error_of([&] { cache->build(job("b")); }).find("load-only"), std::string::npos);
  EXPECT_EQ(s->compiles.load(), 0);

  // Without a record in the store: not available, and the verdict says why.
  TempStore empty;
  CompileOptions e = options(empty.path());
  e.load_only = {"fake"};
  auto s2 = std::make_shared<Script>();
  auto none = make_cache(e, s2);
  Verdict v = none->available("fake");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("load-only by request"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("no precompiled artifacts"), std::string::npos) << v.reason;
  EXPECT_EQ(s2->probes.load(), 0);
}

TEST(ArtifactCache, NotAvailableWithoutARecordSaysWhy) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  s->verdict = Verdict::no("fakecc not found on PATH");
  auto cache = make_cache(options(dir.path()), s);
  Verdict v = cache->available("fake");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("fakecc not found on PATH"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("no precompiled artifacts"), std::string::npos) << v.reason;
  EXPECT_FALSE(cache->load_only("fake"));
  EXPECT_EQ(cache->version("fake"), "");
  EXPECT_EQ(s->restores.load(), 0);
  EXPECT_FALSE(cache->has(job("a")));
  const std::string why = error_of([&] { cache->key(job("a")); });
  EXPECT_NE(why.find("fakecc not found on PATH"), std::string::npos) << why;
  EXPECT_THROW(cache->build(job("a")), Error);
  auto out = cache->build_all({job("a")});
  EXPECT_FALSE(out[0].built);
  EXPECT_NE(out[0].error.find("fakecc not found on PATH"), std::string::npos) << out[0].error;
  EXPECT_EQ(s->compiles.load(), 0);
  EXPECT_FALSE(fs::exists(dir.path() / "fake" / "toolchain.json"));  // nothing recorded

  // A probe that throws Error is a "no" with its message.
  TempStore dir2;
  auto s2 = std::make_shared<Script>();
  s2->probe_error = "fake worker died at start-up";
  v = make_cache(options(dir2.path()), s2)->available("fake");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("fake worker died at start-up"), std::string::npos) << v.reason;

  // A record that restore() rejects: not available, and the verdict says the record is unreadable.
  fs::create_directories(dir2.path() / "fake");
  std::ofstream(dir2.path() / "fake" / "toolchain.json") << "{\"no version\": 1}\n";
  auto s3 = std::make_shared<Script>();
  s3->verdict = Verdict::no("fakecc not found");
  v = make_cache(options(dir2.path()), s3)->available("fake");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("unreadable"), std::string::npos) << v.reason;
}

TEST(ArtifactCache, DepsComeWithTheArtifactAndAMissingDepIsAnError) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  const Job lib = job("lib"), main = job("main"), orphan = job("orphan"), garbled = job("garbled");
  std::string lib_key;
  const std::string nowhere = ArtifactStore::make_key("an artifact nobody published");
  s->shape = [&](const Job& j, Output& o) {
    if (j.what == "main") o.meta["deps"] = json::array({lib_key});
    if (j.what == "orphan") o.meta["deps"] = json::array({nowhere});
    if (j.what == "garbled") o.meta["deps"] = 5;
  };
  auto cache = make_cache(options(dir.path()), s);
  lib_key = cache->key(lib);
  cache->build(lib);

  Built b = cache->build(main);
  EXPECT_FALSE(b.hit);
  ASSERT_EQ(b.deps.size(), 1u);
  EXPECT_EQ(b.deps[0].key, lib_key);
  EXPECT_EQ(*b.deps[0].bytes, "bin:lib");
  EXPECT_TRUE(cache->has(main));

  // From the store, in another cache, the deps come along too.
  auto other = make_cache(options(dir.path()), std::make_shared<Script>());
  auto found = other->find(main);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->deps.size(), 1u);
  EXPECT_EQ(found->deps[0].key, lib_key);
  Built hit = other->build(main);
  EXPECT_TRUE(hit.hit);
  ASSERT_EQ(hit.deps.size(), 1u);
  EXPECT_EQ(*hit.deps[0].bytes, "bin:lib");

  // A dep the store lacks: an Error naming it, and has() is false.
  const std::string why = error_of([&] { cache->build(orphan); });
  EXPECT_NE(why.find(nowhere.substr(0, 16)), std::string::npos) << why;
  EXPECT_FALSE(cache->has(orphan));
  EXPECT_THROW(other->find(orphan), Error);
  EXPECT_THROW(other->build(orphan), Error);
  auto out = other->build_all({orphan, main});
  EXPECT_FALSE(out[0].built);
  EXPECT_NE(out[0].error.find(nowhere.substr(0, 16)), std::string::npos) << out[0].error;
  ASSERT_TRUE(out[1].built);

  // Metadata whose deps the toolchain cannot read: an Error, and has() is false.
  EXPECT_THROW(cache->build(garbled), Error);
  EXPECT_FALSE(cache->has(garbled));
}

// Reliability audit D6: a shared runtime (a dep published as an extra, as the CuTe DSL's) that
// is corrupt or missing makes its kernels misses, compiled again, which publishes the runtime
// again; before, every kernel failed from then on ("lacks the runtime").
TEST(ArtifactCache, ACorruptOrMissingRuntimeIsRebuilt) {
  for (const char* damage : {"corrupt", "missing"}) {
    SCOPED_TRACE(damage);
    TempStore dir;
    auto s = std::make_shared<Script>();
    const std::string runtime = ArtifactStore::make_key("the shared runtime");
    s->shape = [&](const Job&, Output& o) {
      o.extras.push_back({runtime, "runtime bytes", {{"what", "runtime"}}});
      o.meta["deps"] = json::array({runtime});
    };
    const Job kernel = job("kernel");
    make_cache(options(dir.path()), s)->build(kernel);
    ASSERT_EQ(s->compiles_of("kernel"), 1);
    {
      ArtifactStore probe(dir.path());
      if (std::string(damage) == "corrupt") std::ofstream(probe.bin_path(runtime), std::ios::trunc) << "runtime bytez";
      else fs::remove(probe.bin_path(runtime));
    }
    for (int round = 0; round < 2; ++round) {  // rebuilt once, then a store hit again
      auto cache = make_cache(options(dir.path()), s);
      Built b = cache->build(kernel);
      ASSERT_EQ(b.deps.size(), 1u);
      EXPECT_EQ(*b.deps[0].bytes, "runtime bytes");
      EXPECT_EQ(s->compiles_of("kernel"), 2) << "round " << round;
      EXPECT_EQ(text_of(cache->store().bin_path(runtime)), "runtime bytes");
    }
  }
}

TEST(ArtifactCache, ExtrasArePublishedBeforeTheMainArtifact) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  const std::string runtime = ArtifactStore::make_key("the fake runtime library");
  s->shape = [&](const Job& j, Output& o) {
    const std::string key = j.what == "bad extra" ? std::string("not-a-key") : runtime;
    o.extras.push_back({key, "runtime bytes", {{"what", "runtime"}}});
    o.meta["deps"] = json::array({key});
  };
  auto cache = make_cache(options(dir.path()), s);
  Built b = cache->build(job("dsl"));
  ASSERT_EQ(b.deps.size(), 1u);
  EXPECT_EQ(b.deps[0].key, runtime);
  EXPECT_EQ(*b.deps[0].bytes, "runtime bytes");
  EXPECT_EQ(text_of(cache->store().bin_path(runtime)), "runtime bytes");
  EXPECT_EQ(*cache->store().get(runtime)->bytes, "runtime bytes");

  // A second artifact with the same extra: the stored one is kept.
  Built b2 = cache->build(job("dsl 2"));
  ASSERT_EQ(b2.deps.size(), 1u);
  EXPECT_EQ(b2.deps[0].key, runtime);

  // An extra that cannot be published fails the build before the main artifact is published.
  const Job bad = job("bad extra");
  EXPECT_THROW(cache->build(bad), Error);
  EXPECT_FALSE(fs::exists(cache->store().json_path(cache->key(bad))));
  EXPECT_FALSE(fs::exists(cache->store().bin_path(cache->key(bad))));
}

TEST(ArtifactCache, UnknownToolchain) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  Verdict v = cache->available("nope");
  EXPECT_FALSE(v);
  EXPECT_NE(v.reason.find("nope"), std::string::npos) << v.reason;
  EXPECT_FALSE(cache->load_only("nope"));
  EXPECT_EQ(cache->version("nope"), "");
  EXPECT_EQ(cache->sources_digest("nope"), "");
  const Job j = job("x", "nope");
  EXPECT_NE(error_of([&] { cache->key(j); }).find("nope"), std::string::npos);
  EXPECT_FALSE(cache->has(j));
  EXPECT_THROW(cache->build(j), Error);
  EXPECT_TRUE(cache->available("fake"));  // the known one is unaffected
}

TEST(ArtifactCache, VerdictNoNeedsAReason) {
  EXPECT_THROW(Verdict::no(""), Error);
  Verdict v = Verdict::no("why not");
  EXPECT_FALSE(v);
  EXPECT_EQ(v.reason, "why not");
  EXPECT_TRUE(Verdict::yes());
  EXPECT_EQ(Verdict::yes().reason, "");
}

// The compile budget (ToolchainLink::within_compile_budget): of ranked configs, every stored one
// stays and only the first `budget` of the others (they would compile); order kept; < 0 keeps all;
// load-only keeps all (they are the store's already); one info line says what was left out.
TEST(ArtifactCache, CompileBudgetKeepsStoredAndTheBestMisses) {
  TempStore dir;
  auto s = std::make_shared<Script>();
  auto cache = make_cache(options(dir.path()), s);
  cache->build(job("c4"));  // a lower-ranked config already in the store
  cache->build(job("c6"));
  std::vector<std::string> lines;
  BackendContext ctx;
  ctx.artifacts = cache.get();
  ctx.log = Log([&](const std::string& m) { lines.push_back(m); }, LogLevel::info);
  const std::vector<int> ranked = {0, 1, 2, 3, 4, 5, 6, 7};
  auto jobs_of = [](int c) { return std::vector<Job>{job("c" + std::to_string(c))}; };

  ctx.compile_budget = 2;
  EXPECT_EQ(ToolchainLink(ctx, "fake").within_compile_budget(ranked, jobs_of), (std::vector<int>{0, 1, 4, 6}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("compile budget 2: 4 of the model's lower-ranked"), std::string::npos) << lines[0];

  ctx.compile_budget = 6;  // enough for every miss: all kept, nothing said
  lines.clear();
  EXPECT_EQ(ToolchainLink(ctx, "fake").within_compile_budget(ranked, jobs_of), ranked);
  EXPECT_TRUE(lines.empty());

  ctx.compile_budget = -1;  // no budget (precompile, --exhaustive)
  EXPECT_EQ(ToolchainLink(ctx, "fake").within_compile_budget(ranked, jobs_of), ranked);

  ctx.compile_budget = 1;  // a config is stored only when every job of it is
  auto two_jobs = [](int c) { return std::vector<Job>{job("c" + std::to_string(c)), job("c" + std::to_string(c + 2))}; };
  EXPECT_EQ(ToolchainLink(ctx, "fake").within_compile_budget(ranked, two_jobs), (std::vector<int>{0, 4}));
  EXPECT_EQ(s->compiles.load(), 2);  // the budget only reads the store: it compiles nothing
}

}  // namespace
}  // namespace gemmtune
