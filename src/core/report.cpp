// TuneReport helpers.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "gemmtune/error.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

const char* to_string(CandidateStatus s) {
  switch (s) {
    case CandidateStatus::ok: return "ok";
    case CandidateStatus::wrong: return "wrong";
    case CandidateStatus::failed: return "failed";
    case CandidateStatus::pruned: return "pruned";
  }
  return "?";
}

namespace {
int rank_of(const CandidateResult& r) {
  if (r.winner) return 0;
  switch (r.status) {
    case CandidateStatus::ok: return 1;
    case CandidateStatus::pruned: return 2;
    case CandidateStatus::wrong: return 3;
    case CandidateStatus::failed: return 4;
  }
  return 5;
}
}  // namespace

bool best_first(const CandidateResult& a, const CandidateResult& b) {
  auto median = [](const CandidateResult& r) {
    return std::isnan(r.median_us) ? std::numeric_limits<double>::infinity() : r.median_us;
  };
  return std::make_tuple(rank_of(a), median(a), std::cref(a.backend), std::cref(a.id)) <
         std::make_tuple(rank_of(b), median(b), std::cref(b.backend), std::cref(b.id));
}

void TuneReport::rank() { std::stable_sort(results.begin(), results.end(), best_first); }

const CandidateResult* TuneReport::winner() const {
  for (auto& r : results)
    if (r.winner) return &r;
  return nullptr;
}

const CandidateResult* TuneReport::default_pick() const {
  for (auto& r : results)
    if (r.is_default) return &r;
  return nullptr;
}

std::string TuneReport::problem_str() const {
  if (op == GroupedOp::name) return grouped.str();
  return op == SoftmaxOp::name ? softmax.str() : problem.str();
}
std::string TuneReport::problem_canonical() const {
  if (op == GroupedOp::name) return grouped.canonical();
  return op == SoftmaxOp::name ? softmax.canonical() : problem.canonical();
}
double TuneReport::min_bytes() const {
  if (op == GroupedOp::name) return grouped.min_bytes();
  return op == SoftmaxOp::name ? softmax.min_bytes() : problem.min_bytes();
}

}  // namespace gemmtune
