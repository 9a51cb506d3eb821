// Every CuTe DSL candidate on the CuTe DSL problem matrix (gpu/cutedsl_problems.hpp), against the
// float64 host reference (many .so in one process); a persistent-kernel check (the same
// candidate twice, other streams, results identical); the engine with this backend alone.
//
// The GPU machine has no CuTe DSL: run with GEMMTUNE_ARTIFACTS pointing at a store precompiled
// on the build machine (docs/cutedsl.md "GPU tests"); the backend then runs load-only and offers
// the configs whose artifacts are there. Skipped when the backend is not available.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "backends/backend.hpp"
#include "core/device.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gpu/cutedsl_problems.hpp"
#include "gpu/helpers.hpp"
#include "support/host_reference.hpp"
#include "tune/operands.hpp"

using namespace gemmtune;

namespace {

std::unique_ptr<Backend> cutedsl_backend() {
  BackendContext ctx = gpu_test::context(query_device(0), [](const std::string& m) { std::fprintf(stderr, "[cutedsl] %s\n", m.c_str()); });
  return make_cutedsl_backend(ctx);
}

}  // namespace

TEST(Cutedsl, EveryCandidateIsCorrectOnTheProblemMatrix) {
  auto b = cutedsl_backend();
  if (Verdict v = b->available(); !v) GTEST_SKIP() << "cutedsl not available: " << v.reason;
  std::printf("cutedsl %s\n", b->version().c_str());
  Stream s;
  int checked = 0, covered = 0, problems = 0;
  std::ostringstream unsupported;
  std::set<std::string> configs_seen;
  for (auto& [what, p] : cutedsl_test::problem_matrix()) {
    ++problems;
    SCOPED_TRACE(what + ": " + p.str());
    ASSERT_NO_THROW(p.validate());
    if (Verdict v = b->supports(p); !v) {
      unsupported << "  " << what << " " << p.str() << ": " << v.reason << "\n";
      continue;
    }
    auto cands = b->candidates(p);
    ASSERT_FALSE(cands.empty()) << "supported but no candidates";
    OperandSet ops(p, 0x5eed + uint64_t(p.m * 31 + p.n * 7 + p.k), s.get());
    s.sync();
    const auto ref = host::host_gemm(p, host::download(p, ops.args()));
    std::vector<std::string> failed = gpu_test::prepare_all(cands, 0);
    for (size_t i = 0; i < cands.size(); ++i) {
      auto& c = cands[i];
      SCOPED_TRACE("cutedsl " + c->id());
      EXPECT_EQ(failed[i], "") << "a candidate the backend offered does not compile / load";
      if (!failed[i].empty()) continue;
      ops.poison_d(s.get());
      ASSERT_NO_THROW(c->run(ops.args(), s.get()));
      s.sync();
      CheckResult r = gpu_test::check_d(p, ops.args(), ref);
      EXPECT_TRUE(r.ok) << r.reason;
      ++checked;
      configs_seen.insert(c->id());
    }
    ++covered;
  }
  std::printf("cutedsl: %d candidate runs checked on %d of %d problems, %zu distinct configs\n", checked, covered,
              problems, configs_seen.size());
  if (!unsupported.str().empty()) std::printf("not supported (load-only: not precompiled?):\n%s", unsupported.str().c_str());
  EXPECT_GT(checked, 0);
  EXPECT_EQ(covered, problems) << "every problem of the matrix is one the backend supports";
}

// A persistent kernel keeps no state between launches: the same candidate twice, interleaved
// with another, on two streams, gives bit-identical results.
TEST(Cutedsl, RepeatedRunsAreIdenticalAcrossStreams) {
  auto b = cutedsl_backend();
  if (Verdict v = b->available(); !v) GTEST_SKIP() << "cutedsl not available: " << v.reason;
  GemmProblem p = GemmProblem::linear(2048, 2048, 256);
  if (!b->supports(p)) GTEST_SKIP() << "not in the artifact store";
  auto cands = b->candidates(p);
  ASSERT_GE(cands.size(), 2u);
  for (size_t i = 0; i < 2; ++i) ASSERT_NO_THROW(gpu_test::prepare(*cands[i])) << cands[i]->id();
  Stream s1, s2;
  OperandSet ops(p, 7, s1.get());
  s1.sync();
  std::vector<uint8_t> first;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < 2; ++i) {
      const Stream& s = (round + int(i)) % 2 ? s2 : s1;
      ops.poison_d(s.get());
      cands[i]->run(ops.args(), s.get());
      s.sync();
      auto bytes = host::download_bytes(ops.args().d, size_t(p.elems_d()) * size_of(p.d.dtype));
      if (i == 0 && round == 0) first = bytes;
      if (i == 0 && round == 1) EXPECT_EQ(bytes, first) << cands[0]->id() << " changed between runs";
    }
}

// The engine with the CuTe DSL backend alone: candidates verified and raced, the pick correct,
// cached, and reloaded by a second engine (load-only on the GPU machine: from the same store).
TEST(Cutedsl, EngineTunesCachesAndReloads) {
  if (Verdict v = cutedsl_backend()->available(); !v) GTEST_SKIP() << "cutedsl not available: " << v.reason;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gemmtune-cutedsl-gpu-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EngineOptions o = gpu_test::quick(dir / "cache.sqlite");
  o.backends = {"cutedsl"};
  GemmProblem p = GemmProblem::linear(2048, 2048, 256);
  std::string id;
  {
    Engine e(o);
    TuneReport r;
    Kernel k = e.select(p, &r);
    ASSERT_TRUE(k);
    EXPECT_FALSE(r.from_cache);
    EXPECT_EQ(k.backend(), "cutedsl");
    id = k.id();
    Stream s;
    OperandSet ops(p, 4242, s.get());
    ops.poison_d(s.get());
    k.run(ops.args(), s.get());
    s.sync();
    auto ref = host::host_gemm(p, host::download(p, ops.args()));
    CheckResult c = gpu_test::check_d(p, ops.args(), ref);
    EXPECT_TRUE(c.ok) << k.name() << ": " << c.reason;
    std::printf("cutedsl engine pick for %s: %s\n", p.str().c_str(), k.name().c_str());
  }
  {
    Engine e(o);
    TuneReport r;
    Kernel k = e.select(p, &r);
    EXPECT_TRUE(r.from_cache);
    EXPECT_EQ(k.id(), id);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
