// rank_results (include/gemmtune/report.hpp) and to_json (report_json.hpp): the one order and
// the one JSON encoding of candidate results.
#include "core/report_json.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

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

nlohmann::json to_json(const CandidateResult& r) {
  return {{"backend", r.backend},
          {"id", r.id},
          {"name", r.name},
          {"status", to_string(r.status)},
          {"reason", r.reason},
          {"rel_err", r.rel_err < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.rel_err)},
          {"median_us", r.median_us},
          {"p20_us", r.p20_us},
          {"p80_us", r.p80_us},
          {"samples", r.samples},
          {"compile_s", r.compile_s},
          {"winner", r.winner},
          {"is_default", r.is_default}};
}

}  // namespace gemmtune
