// Engine::versus_torch's reading of a tune's results (gt_kernel_describe's median_us and
// torch_baseline_us, on which gemmtune.torch defers to torch's op): from rows as the tuning cache
// stores and returns them, so a cache hit in a later process knows what the tune measured.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "engine/torch_standing.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

CandidateResult row(std::string backend, std::string id, CandidateStatus status, double median_us, bool winner = false) {
  CandidateResult r;
  r.backend = std::move(backend);
  r.id = std::move(id);
  r.name = r.id;
  r.status = status;
  r.rel_err = status == CandidateStatus::failed ? -1 : 1e-3;
  r.median_us = median_us;
  r.p20_us = median_us * 0.99, r.p80_us = median_us * 1.01;
  r.samples = status == CandidateStatus::failed ? 0 : 8;
  r.winner = winner;
  return r;
}

const std::string kTorchId = "torch-" + std::string(128, '0') + "-" + std::string(128, '1');

struct TorchStandingTest : ::testing::Test {
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "gemmtune-standing-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // What versus_torch computes, on the rows `report` leaves in a tuning cache (a fresh process's
  // cache hit reads the same rows).
  TorchStanding standing(const std::vector<CandidateResult>& rows, const std::string& backend, const std::string& id) {
    TuneReport report;
    report.problem = GemmProblem::linear(2048, 14336, 4096);
    report.results = rows;
    report.rank();
    {
      TuningCache writer(dir_ / "tuning.sqlite");
      writer.store("key", "env", report);
    }
    TuningCache reader(dir_ / "tuning.sqlite");
    BackendContext ctx;
    ctx.device.cc_major = 9;
    std::unique_ptr<Backend> lt = make_cublaslt_backend(ctx);  // its torch- ids are torch's call (no GPU needed)
    return detail::torch_standing(reader.results("key"), backend, id, [&](const CandidateResult& r) {
      return r.backend == lt->name() && lt->reproduces_torch(r.id);
    });
  }
  fs::path dir_;
};

TEST_F(TorchStandingTest, PickAndBaselineMediansOfOneTune) {
  // The s12 H200 run's gate/up at 2048 tokens: a cuBLASLt algo 2.1% faster than torch's.
  std::vector<CandidateResult> rows = {row("cublaslt", "algo176", CandidateStatus::ok, 321.6, true),
                                       row("cublaslt", kTorchId, CandidateStatus::ok, 328.4),
                                       row("triton", "t1", CandidateStatus::pruned, 900.0)};
  TorchStanding s = standing(rows, "cublaslt", "algo176");
  EXPECT_DOUBLE_EQ(s.median_us, 321.6);
  EXPECT_DOUBLE_EQ(s.torch_us, 328.4);
  // The baseline itself: both medians are its own.
  s = standing(rows, "cublaslt", kTorchId);
  EXPECT_DOUBLE_EQ(s.median_us, 328.4);
  EXPECT_DOUBLE_EQ(s.torch_us, 328.4);
  // A kernel of another backend with the same id is not the pick's row.
  EXPECT_EQ(standing(rows, "native", "algo176").median_us, 0);
}

TEST_F(TorchStandingTest, UntimedRowsGiveNothing) {
  // The baseline wrong or failed: no median to compare with (never a deferral on the margin).
  for (CandidateStatus st : {CandidateStatus::wrong, CandidateStatus::failed}) {
    std::vector<CandidateResult> rows = {row("native", "d1", CandidateStatus::ok, 10.0, true),
                                         row("cublaslt", kTorchId, st, st == CandidateStatus::failed ? 0 : 11.0)};
    TorchStanding s = standing(rows, "native", "d1");
    EXPECT_DOUBLE_EQ(s.median_us, 10.0);
    EXPECT_EQ(s.torch_us, 0) << to_string(st);
  }
  // Pruned: timed, far slower than the best; its median is kept.
  std::vector<CandidateResult> rows = {row("native", "d1", CandidateStatus::ok, 10.0, true),
                                       row("cublaslt", kTorchId, CandidateStatus::pruned, 30.0)};
  EXPECT_DOUBLE_EQ(standing(rows, "native", "d1").torch_us, 30.0);
  // No baseline in the tune (cuBLASLt answered no torch query): only the pick's median.
  rows = {row("native", "d1", CandidateStatus::ok, 10.0, true), row("cublaslt", "algo1", CandidateStatus::ok, 12.0)};
  EXPECT_EQ(standing(rows, "native", "d1").torch_us, 0);
  // A kernel the tune did not time (loaded from a bucket of another m): no median of its own.
  EXPECT_EQ(standing(rows, "native", "d9").median_us, 0);
}

}  // namespace
}  // namespace gemmtune
