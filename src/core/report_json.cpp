// rank_results (include/gemmtune/report.hpp): the one order of candidate results.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "gemmtune/report.hpp"

namespace gemmtune {

namespace {

int group(const CandidateResult& r) {
  if (r.winner) return 0;
  switch (r.status) {
    case CandidateStatus::ok: return 1;
    case CandidateStatus::pruned: return 2;
    case CandidateStatus::wrong: return 3;
    case CandidateStatus::failed: return 4;
  }
  return 5;
}

double median_key(const CandidateResult& r) {
  return std::isnan(r.median_us) ? std::numeric_limits<double>::infinity() : r.median_us;
}

}  // namespace

void rank_results(std::vector<CandidateResult>& results) {
  std::stable_sort(results.begin(), results.end(), [](const CandidateResult& a, const CandidateResult& b) {
    return std::make_tuple(group(a), median_key(a), std::cref(a.backend), std::cref(a.id)) <
           std::make_tuple(group(b), median_key(b), std::cref(b.backend), std::cref(b.id));
  });
}

}  // namespace gemmtune
