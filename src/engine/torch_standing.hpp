// Engine::versus_torch's reading of one tune's results (pure; host-tested).
#pragma once

#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/report.hpp"

namespace gemmtune::detail {

// From the result rows of one tune (a TuneReport's, or the tuning cache's for its key): the
// median of the candidate backend/id and that of the row `reproduces_torch(row)` names. A row
// counts only where it was timed (ok, or pruned: slower than the best by the prune ratio, its
// median kept); wrong, failed and quarantined rows give 0. is_torch is the caller's.
template <class ReproducesTorch>
TorchStanding torch_standing(const std::vector<CandidateResult>& results, const std::string& backend,
                             const std::string& id, ReproducesTorch&& reproduces_torch) {
  TorchStanding s;
  for (const CandidateResult& r : results) {
    const bool timed = (r.status == CandidateStatus::ok || r.status == CandidateStatus::pruned) && r.median_us > 0;
    if (!timed) continue;
    if (r.backend == backend && r.id == id) s.median_us = r.median_us;
    if (s.torch_us == 0 && reproduces_torch(r)) s.torch_us = r.median_us;
  }
  return s;
}

}  // namespace gemmtune::detail
