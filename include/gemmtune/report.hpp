// gemmtune: what a tune found, candidate by candidate.
#pragma once

#include <string>
#include <vector>

#include "gemmtune/problem.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

enum class CandidateStatus : uint8_t {
  ok,         // correct and timed
  wrong,      // failed verification: never selectable
  failed,     // compile, load or launch failed: out of the race
  pruned,     // correct, dropped from the race early as clearly slower
};
const char* to_string(CandidateStatus);

struct CandidateResult {
  std::string backend;
  std::string id;    // stable, reloadable
  std::string name;  // printable config
  CandidateStatus status = CandidateStatus::failed;
  std::string reason;       // why wrong / failed / pruned
  double rel_err = -1;      // ||D - ref|| / ||ref||, -1 if not checked
  double median_us = 0, p20_us = 0, p80_us = 0;
  int samples = 0;
  double compile_s = 0;
  bool winner = false;
  bool is_default = false;  // what the library picks unaided (cuBLASLt heuristic #0)
};

// Best first: the winner, then correct candidates by median (ok before pruned), then wrong, then
// failed; a missing (NaN) median last within its group; ties by backend and id.
bool best_first(const CandidateResult& a, const CandidateResult& b);

struct TuneReport {
  std::string op = "gemm";   // GemmOp::name, SoftmaxOp::name or GroupedOp::name: which problem below is set
  GemmProblem problem;       // op "gemm"
  SoftmaxProblem softmax;    // op "softmax"
  GroupedGemmProblem grouped;  // op "grouped"
  std::string key;           // tuning-cache key
  bool from_cache = false;   // answered from the cache, nothing timed now
  double seconds = 0;        // wall time of select()
  double spread = 0;         // (p80 - p20) / median of the winner
  std::vector<std::string> notes;  // backends not available / not supporting, with reasons; the race's duel
  std::vector<CandidateResult> results;  // sorted: winner first, then by median

  // The problem of `op`: its str(), its canonical() text (what the cache stores).
  std::string problem_str() const;
  std::string problem_canonical() const;
  // Bytes the op must move at least (bandwidth-bound ops report TB/s = bytes / time).
  double min_bytes() const;

  const CandidateResult* winner() const;
  const CandidateResult* default_pick() const;
  // Puts results in the one order every report, cache listing and CLI table uses (best_first).
  void rank();
};

}  // namespace gemmtune
