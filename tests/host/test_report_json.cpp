// rank_results: the one order of candidate results (engine, tuning cache, CLI).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/report_json.hpp"
#include "gemmtune/report.hpp"

using namespace gemmtune;

namespace {

CandidateResult result(const std::string& backend, const std::string& id, CandidateStatus st, double median,
                       bool winner = false) {
  CandidateResult r;
  r.backend = backend;
  r.id = id;
  r.status = st;
  r.median_us = median;
  r.winner = winner;
  return r;
}

std::string order(const std::vector<CandidateResult>& rs) {
  std::string s;
  for (auto& r : rs) s += (s.empty() ? "" : " ") + r.backend + "/" + r.id;
  return s;
}

}  // namespace

TEST(RankResults, WinnerOkByMedianPrunedWrongFailed) {
  std::vector<CandidateResult> rs = {
      result("a", "failed", CandidateStatus::failed, 0),
      result("a", "wrong", CandidateStatus::wrong, 1),
      result("a", "pruned9", CandidateStatus::pruned, 9),
      result("a", "pruned5", CandidateStatus::pruned, 5),
      result("a", "ok3", CandidateStatus::ok, 3),
      result("a", "ok2", CandidateStatus::ok, 2),
      result("a", "win", CandidateStatus::ok, 2.5, true),  // not the fastest median: still first
      result("a", "oknan", CandidateStatus::ok, std::nan("")),
  };
  rank_results(rs);
  EXPECT_EQ(order(rs), "a/win a/ok2 a/ok3 a/oknan a/pruned5 a/pruned9 a/wrong a/failed");
}

TEST(RankResults, TiesByBackendThenIdWhateverTheInputOrder) {
  std::vector<CandidateResult> rs = {
      result("triton", "b", CandidateStatus::failed, 0),
      result("cublaslt", "z", CandidateStatus::failed, 0),
      result("triton", "a", CandidateStatus::failed, 0),
  };
  std::vector<CandidateResult> reversed(rs.rbegin(), rs.rend());
  rank_results(rs);
  rank_results(reversed);
  EXPECT_EQ(order(rs), "cublaslt/z triton/a triton/b");
  EXPECT_EQ(order(reversed), order(rs));
}

TEST(CandidateJson, EveryFieldOneSpelling) {
  CandidateResult r = result("cutlass", "x1", CandidateStatus::wrong, 12.5);
  r.name = "128x128";
  r.reason = "rel_err 0.5 > 0.01";
  r.rel_err = 0.5;
  r.p20_us = 12, r.p80_us = 13, r.samples = 7, r.compile_s = 2.5, r.is_default = true;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"backend": "cutlass", "id": "x1", "name": "128x128", "status": "wrong",
      "reason": "rel_err 0.5 > 0.01", "rel_err": 0.5, "median_us": 12.5, "p20_us": 12, "p80_us": 13, "samples": 7,
      "compile_s": 2.5, "winner": false, "is_default": true})"))
      << j.dump();
}

TEST(CandidateJson, UnmeasuredRelErrIsNull) {
  CandidateResult r = result("triton", "y", CandidateStatus::failed, 0);
  ASSERT_LT(r.rel_err, 0);  // the struct's "not checked"
  EXPECT_TRUE(to_json(r)["rel_err"].is_null());
  r.rel_err = 0;  // checked and exact: a number
  EXPECT_EQ(to_json(r)["rel_err"], 0.0);
}
