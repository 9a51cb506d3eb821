// rank_results: the one order of candidate results (engine, tuning cache, CLI).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

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
