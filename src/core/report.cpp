// TuneReport helpers.
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

std::string TuneReport::problem_str() const { return op == SoftmaxOp::name ? softmax.str() : problem.str(); }
std::string TuneReport::problem_canonical() const {
  return op == SoftmaxOp::name ? softmax.canonical() : problem.canonical();
}
double TuneReport::min_bytes() const { return op == SoftmaxOp::name ? softmax.min_bytes() : problem.min_bytes(); }

}  // namespace gemmtune
