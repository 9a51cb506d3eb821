// The engine end to end: tune, verify, cache, reload in a second engine, run, errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gemmtune/gemmtune.hpp"
#include "gpu/helpers.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;
namespace fs = std::filesystem;
using gpu_test::expect_winner_within_race_reach;
using gpu_test::quick;
using gpu_test::temp_cache;

namespace {

// Runs `k` on fresh random operands and checks D against the float64 host reference.
void expect_correct(const Kernel& k) {
  const GemmProblem& p = k.problem();
  Stream s;
  OperandSet ops(p, 777, s.get());
  k.run(ops.args(), s.get());
  s.sync();
  auto ref = host::host_gemm(p, host::download(p, ops.args()));
  CheckResult r = gpu_test::check_d(p, ops.args(), ref);
  EXPECT_TRUE(r.ok) << k.backend() << " " << k.name() << ": " << r.reason;
}

}  // namespace

TEST(Engine, TunesCachesAndReloads) {
  fs::path cache = temp_cache("reload.sqlite");
  auto p = GemmProblem::linear(129, 512, 1024);
  p.bias = true;
  p.act = Activation::gelu_tanh;

  std::string id, backend;
  {
    Engine e(quick(cache));
    TuneReport r;
    Kernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    EXPECT_FALSE(r.from_cache);
    ASSERT_NE(r.winner(), nullptr);
    EXPECT_EQ(r.winner()->id, k.id());
    EXPECT_EQ(r.winner()->status, CandidateStatus::ok);
    EXPECT_GT(r.winner()->median_us, 0);
    EXPECT_NE(r.default_pick(), nullptr) << "cuBLASLt's heuristic #0 must be among the candidates";
    EXPECT_GE(r.results.size(), 2u);
    for (auto& c : r.results) EXPECT_NE(c.status, CandidateStatus::wrong) << c.name << ": " << c.reason;
    // The winner is the fastest correct candidate up to the race's near-tie reach (not
    // strictly: a duel on paired ratios may prefer one whose marginal median is a hair higher).
    expect_winner_within_race_reach(r, quick(cache).tune);
    expect_correct(k);
    id = k.id(), backend = k.backend();

    TuneReport again;
    Kernel k2 = e.select(p, &again);  // same process: in-memory
    EXPECT_TRUE(again.from_cache);
    EXPECT_EQ(k2.id(), id);
  }
  {
    Engine e(quick(cache));  // a fresh engine on the same file: answers from the cache
    TuneReport r;
    Kernel k = e.select(p, &r);
    EXPECT_TRUE(r.from_cache);
    EXPECT_EQ(k.id(), id);
    EXPECT_EQ(k.backend(), backend);
    EXPECT_FALSE(r.results.empty()) << "the cache keeps every candidate's timing";
    expect_correct(k);

    // Same key, other alpha/beta values: the kernel must use the new ones.
    GemmProblem q = p;
    q.alpha = -2.0f;
    Kernel kq = e.select(q);
    EXPECT_EQ(kq.id(), id);
    expect_correct(kq);
  }
}

TEST(Engine, LoadPinsACandidate) {
  Engine e(quick(temp_cache("load.sqlite")));
  auto p = GemmProblem::linear(64, 256, 256, DType::e4m3);
  TuneReport r;
  e.select(p, &r);
  ASSERT_NE(r.default_pick(), nullptr);
  Kernel k = e.load(p, r.default_pick()->backend, r.default_pick()->id);
  expect_correct(k);
  EXPECT_THROW(e.load(p, "cublaslt", "not-a-hex-id"), Error);
  EXPECT_THROW(e.load(p, "nope", "00"), Error);
}

TEST(Engine, ErrorsAreClear) {
  Engine e(quick(temp_cache("errors.sqlite")));
  auto bad = GemmProblem::linear(64, 64, 64);
  bad.k = 0;
  try {
    e.select(bad);
    ADD_FAILURE() << "accepted k = 0";
  } catch (const Error& err) {
    EXPECT_EQ(err.message().rfind("problem.k:", 0), 0u) << err.message();
  }
  auto p = GemmProblem::linear(64, 64, 64);
  Kernel k = e.select(p);
  GemmArgs args{};  // all null
  try {
    k.run(args);
    ADD_FAILURE() << "ran with null pointers";
  } catch (const Error& err) {
    EXPECT_NE(err.message().find("args.a"), std::string::npos) << err.message();
  }
  EngineOptions o = quick(temp_cache("errors2.sqlite"));
  o.backends = {"no-such-backend"};
  EXPECT_THROW(Engine{o}, Error);
}

// A cached choice is verified once per process, on its first load (one reference run, beside the
// caller: the first run waits for it): a second engine on the cache checks it, a second select in
// that engine does not.
TEST(Engine, CachedChoiceIsVerifiedOnItsFirstLoad) {
  fs::path cache = temp_cache("verify-on-load.sqlite");
  auto p = GemmProblem::linear(96, 256, 512);
  EngineOptions o = quick(cache);
  o.backends = {"cublaslt"};
  { Engine(o).select(p); }
  std::vector<std::string> lines;
  o.log = [&](const std::string& m) { lines.push_back(m); };
  o.log_level = LogLevel::debug;
  Engine e(o);
  auto verified = [&] {
    size_t n = 0;
    for (const auto& l : lines) n += l.find("verified on its first load") != std::string::npos;
    return n;
  };
  TuneReport r;
  Kernel k = e.select(p, &r);
  EXPECT_TRUE(r.from_cache);
  expect_correct(k);  // its first run waits for the check
  EXPECT_EQ(verified(), 1u);
  Kernel k2 = e.select(p, &r);
  EXPECT_TRUE(r.from_cache);
  expect_correct(k2);
  EXPECT_EQ(verified(), 1u) << "verified again in the same process";
  for (const auto& l : lines)
    if (l.find("first load") != std::string::npos || l.find("first-load") != std::string::npos)
      std::printf("[ first load ] %s\n", l.c_str());
}

// A cache that cannot be opened (its directory cannot be made: a file is in the way) leaves the
// engine working without one, with a warning (reliability audit D13).
TEST(Engine, WorksWithoutACacheThatCannotBeOpened) {
  fs::path blocker = temp_cache("blocker-file");
  { std::ofstream(blocker) << "a file, not a directory"; }
  EngineOptions o = quick(blocker / "sub" / "tuning.sqlite");
  o.backends = {"cublaslt"};
  std::vector<std::string> warnings;
  o.log = [&](const std::string& m) {
    if (m.rfind("warning", 0) == 0) warnings.push_back(m);
  };
  Engine e(o);
  EXPECT_EQ(e.cache(), nullptr);
  bool said = false;
  for (const auto& w : warnings) said = said || w.find("working without a tuning cache") != std::string::npos;
  EXPECT_TRUE(said);
  Kernel k = e.select(GemmProblem::linear(64, 128, 256));
  ASSERT_TRUE(k);
  expect_correct(k);
}
