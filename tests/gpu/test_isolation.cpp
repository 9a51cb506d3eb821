// Crash isolation on the GPU (docs/isolation.md): each injected fault (fault_backend.hpp) costs
// only its candidate, the tune picks a correct kernel, this process then runs 1,000 GEMMs with
// it correctly, and a second tune never retries a quarantined candidate. This binary is its own
// tuning helper (main.cpp). Excluded from compute-sanitizer runs (scripts/gpu/memcheck.sh): the
// faults are deliberate.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda.hpp"
#include "fault_backend.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "helpers.hpp"
#include "tune/ops.hpp"

namespace gemmtune::gpu_test {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const GemmProblem kProblem = GemmProblem::linear(256, 512, 384);
constexpr double kDeadlineS = 4;  // the watchdog's limit for the hang kind

// Engine options over the fault backends `backends`, a fresh cache `cache_name`, a short
// watchdog, and a log kept in `lines`.
struct Logged {
  std::mutex mu;
  std::vector<std::string> lines;
  bool has(const std::string& text) {
    std::lock_guard lock(mu);
    for (auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};
EngineOptions fault_options(const std::vector<std::string>& backends, const std::filesystem::path& cache, Logged& log) {
  EngineOptions o = quick(cache);
  o.backends = backends;
  o.isolation.mode = Isolation::process;
  o.isolation.candidate_timeout_s = kDeadlineS;
  o.log = [&log](const std::string& line) {
    std::lock_guard lock(log.mu);
    log.lines.push_back(line);
  };
  return o;
}

// Runs `k` 1,000 times in this process on fresh operands and checks D against the GPU
// reference after the last run (and after the first), then that the context reports no error.
void run_thousand(const Kernel& k) {
  Stream s;
  OperandSet ops(k.problem(), 1234, s.get());
  OpTraits<GemmOp>::Checker checker(k.problem(), ops, s.get());
  k.run(ops.args(), s.get());
  CheckResult first = checker.check(s.get());
  EXPECT_TRUE(first.ok) << first.reason;
  for (int i = 0; i < 1000; ++i) k.run(ops.args(), s.get());
  GT_CUDA(cudaStreamSynchronize(s.get()));
  CheckResult last = checker.check(s.get());
  EXPECT_TRUE(last.ok) << last.reason;
  EXPECT_EQ(ops.guard_violation(s.get()), "");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

const CandidateResult* find(const TuneReport& r, const std::string& backend, const std::string& id) {
  for (auto& c : r.results)
    if (c.backend == backend && c.id == id) return &c;
  return nullptr;
}

struct Expect {
  std::string kind;
  CandidateStatus status;
  std::string reason;  // a part of the faulty candidate's reason in the first tune
  bool scope_all;      // quarantined for every problem (a fault) rather than for this one (wrong)
};

// $GEMMTUNE_ISOLATION=in-process applies to engines whose options leave the mode at its default
// (process), as these do: the faults would then hit this process.
#define SKIP_WHEN_IN_PROCESS()                                                                  \
  do {                                                                                          \
    const char* v = std::getenv("GEMMTUNE_ISOLATION");                                         \
    if (v && std::string(v) != "process") GTEST_SKIP() << "GEMMTUNE_ISOLATION=" << v;           \
  } while (0)

class FaultKind : public ::testing::TestWithParam<Expect> {};

TEST_P(FaultKind, CostsOnlyItsCandidate) {
  SKIP_WHEN_IN_PROCESS();
  const Expect& x = GetParam();
  const std::string backend = "fault_" + x.kind;
  const auto cache = temp_cache(("isolation-" + x.kind + ".sqlite").c_str());
  Logged log;
  std::string env, key;
  {
    Engine engine(fault_options({backend}, cache, log));
    TuneReport r;
    const auto t0 = Clock::now();
    Kernel k = engine.select(kProblem, &r);
    std::printf("[ fault %s ] first tune %.2f s\n", x.kind.c_str(), since(t0));
    ASSERT_TRUE(k);
    EXPECT_EQ(k.backend(), backend);
    EXPECT_EQ(k.id(), "good");
    const CandidateResult* bad = find(r, backend, x.kind);
    ASSERT_NE(bad, nullptr);
    EXPECT_EQ(bad->status, x.status) << bad->reason;
    EXPECT_NE(bad->reason.find(x.reason), std::string::npos) << bad->reason;
    EXPECT_FALSE(bad->winner);
    run_thousand(k);
    env = engine.environment();
    key = engine.cache_key(kProblem);
    // Remembered in the cache.
    std::vector<Quarantined> q = engine.cache()->quarantined(env, key);
    ASSERT_EQ(q.size(), 1u);
    EXPECT_EQ(q[0].backend, backend);
    EXPECT_EQ(q[0].candidate_id, x.kind);
    EXPECT_EQ(q[0].scope.empty(), x.scope_all);
  }
  // A second tune (forced, new engine, same cache) holds the quarantined candidate back.
  Logged log2;
  Engine engine(fault_options({backend}, cache, log2));
  TuneReport r;
  const auto t0 = Clock::now();
  Kernel k = engine.tune(kProblem, &r);
  const double second = since(t0);
  std::printf("[ fault %s ] second tune %.2f s\n", x.kind.c_str(), second);
  EXPECT_EQ(k.id(), "good");
  const CandidateResult* bad = find(r, backend, x.kind);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->reason.rfind("quarantined: ", 0), 0u) << bad->reason;
  EXPECT_FALSE(log2.has("the tune goes on in a new helper"));
  if (x.kind == "hang") EXPECT_LT(second, kDeadlineS);
  run_thousand(k);
}

INSTANTIATE_TEST_SUITE_P(
    Isolation, FaultKind,
    ::testing::Values(Expect{"illegal_address", CandidateStatus::failed, "illegal memory access", true},
                      Expect{"trap", CandidateStatus::failed, "faulted", true},
                      Expect{"hang", CandidateStatus::failed, "hung: no progress", true},
                      Expect{"prepare_crash", CandidateStatus::failed, "SIGABRT", true},
                      Expect{"oob", CandidateStatus::wrong, "wrote past the end of D", false},
                      Expect{"wrong", CandidateStatus::wrong, "", false}),
    [](const ::testing::TestParamInfo<Expect>& i) { return i.param.kind; });

// Every fault in one tune: each costs only itself; the good candidate wins.
TEST(Isolation, EveryFaultInOneTune) {
  SKIP_WHEN_IN_PROCESS();
  Logged log;
  Engine engine(fault_options({"fault_all"}, temp_cache("isolation-all.sqlite"), log));
  TuneReport r;
  const auto t0 = Clock::now();
  Kernel k = engine.select(kProblem, &r);
  std::printf("[ fault all ] tune %.2f s\n", since(t0));
  EXPECT_EQ(k.id(), "good");
  for (const std::string& kind : fault_kinds()) {
    const CandidateResult* c = find(r, "fault_all", kind);
    ASSERT_NE(c, nullptr) << kind;
    if (kind == "spin") {
      EXPECT_TRUE(c->status == CandidateStatus::ok || c->status == CandidateStatus::pruned) << c->reason;
      EXPECT_GT(c->median_us, 5000) << "spins ~20 ms";
    } else {
      EXPECT_TRUE(c->status == CandidateStatus::failed || c->status == CandidateStatus::wrong) << kind << ": " << c->reason;
    }
  }
  run_thousand(k);
}

// A slow candidate (~20 ms per run) under the deadline is timed, not killed.
TEST(Isolation, SpinIsSlowNotAFault) {
  Logged log;
  Engine engine(fault_options({"fault_spin"}, temp_cache("isolation-spin.sqlite"), log));
  TuneReport r;
  Kernel k = engine.select(kProblem, &r);
  EXPECT_EQ(k.id(), "good");
  const CandidateResult* spin = find(r, "fault_spin", "spin");
  ASSERT_NE(spin, nullptr);
  EXPECT_NE(spin->status, CandidateStatus::failed) << spin->reason;
  EXPECT_TRUE(engine.cache()->quarantined(engine.environment(), engine.cache_key(kProblem)).empty());
}

// A cache hit starts no helper: with a helper path that does not exist, select still answers.
TEST(Isolation, CacheHitStartsNoHelper) {
  Logged log;
  const auto cache = temp_cache("isolation-hit.sqlite");
  {
    Engine engine(fault_options({"fault_wrong"}, cache, log));
    engine.select(kProblem);
  }
  EngineOptions o = fault_options({"fault_wrong"}, cache, log);
  o.isolation.helper = "/nonexistent/gemmtune";
  Engine engine(o);
  TuneReport r;
  Kernel k = engine.select(kProblem, &r);
  EXPECT_TRUE(r.from_cache);
  EXPECT_EQ(k.id(), "good");
  // ... while a tune does need it.
  try {
    engine.tune(kProblem);
    ADD_FAILURE() << "a tune with a missing helper succeeded";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("isolation.helper"), std::string::npos) << e.message();
  }
}

// A cached choice that is wrong on this machine (a planted or imported cache) never runs: the
// select answers from the cache at once, the kernel's first run throws instead of launching it,
// and the next select quarantines it and re-tunes to a correct kernel.
TEST(Isolation, WrongCachedChoiceNeverRuns) {
  Logged log;
  EngineOptions o = fault_options({"fault_wrong"}, temp_cache("isolation-planted-tune.sqlite"), log);
  o.isolation.mode = Isolation::in_process;
  TuneReport tuned;
  std::string env, key;
  {
    Engine engine(o);
    engine.select(kProblem, &tuned);
    env = engine.environment();
    key = engine.cache_key(kProblem);
  }
  // The same tune with the wrong candidate as its winner, in a cache of its own.
  for (auto& c : tuned.results) {
    c.winner = c.id == "wrong";
    if (c.winner) c.status = CandidateStatus::ok, c.reason.clear();
  }
  const auto planted = temp_cache("isolation-planted.sqlite");
  TuningCache(planted).store(key, env, tuned);

  o.cache_path = planted;
  Engine engine(o);
  TuneReport r;
  Kernel k = engine.select(kProblem, &r);
  EXPECT_TRUE(r.from_cache);
  ASSERT_EQ(k.id(), "wrong");
  Stream s;
  OperandSet ops(kProblem, 77, s.get());
  try {
    k.run(ops.args(), s.get());
    ADD_FAILURE() << "the planted wrong choice ran";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("failed its check"), std::string::npos) << e.message();
  }
  GT_CUDA(cudaStreamSynchronize(s.get()));
  EXPECT_EQ(ops.guard_violation(s.get()), "");
  Kernel again = engine.select(kProblem, &r);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(again.id(), "good");
  std::vector<Quarantined> q = engine.cache()->quarantined(env, key);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].candidate_id, "wrong");
  run_thousand(again);
}

// In-process mode (the option) still tunes, without a helper.
TEST(Isolation, InProcessModeStillWorks) {
  Logged log;
  EngineOptions o = fault_options({"fault_wrong"}, temp_cache("isolation-inproc.sqlite"), log);
  o.isolation.mode = Isolation::in_process;
  o.isolation.helper = "/nonexistent/gemmtune";  // never looked for
  Engine engine(o);
  TuneReport r;
  Kernel k = engine.select(kProblem, &r);
  EXPECT_EQ(k.id(), "good");
  const CandidateResult* bad = find(r, "fault_wrong", "wrong");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->status, CandidateStatus::wrong);
  run_thousand(k);
}

// The helper stays warm: a second problem tunes without a new helper start, and quicker.
TEST(Isolation, HelperStaysWarm) {
  Logged log;
  EngineOptions o = fault_options({"cublaslt"}, temp_cache("isolation-warm.sqlite"), log);
  o.log_level = LogLevel::debug;
  o.isolation.helper = "";  // $GEMMTUNE_TUNER: this binary
  // A device index of its own so that the other tests' warm helper does not count.
  Engine engine(o);
  auto t0 = Clock::now();
  engine.select(GemmProblem::linear(512, 1024, 1024));
  const double first = since(t0);
  t0 = Clock::now();
  engine.select(GemmProblem::linear(512, 2048, 1024));
  const double second = since(t0);
  std::printf("[ warm ] cuBLASLt tunes: %.3f s then %.3f s\n", first, second);
  int starts = 0;
  for (auto& l : log.lines) starts += l.find("tuning helper started") != std::string::npos;
  EXPECT_LE(starts, 1);
}

}  // namespace
}  // namespace gemmtune::gpu_test
