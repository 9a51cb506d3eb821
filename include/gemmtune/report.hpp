// gemmtune: what a tune found, candidate by candidate.
#pragma once

#include <string>
#include <vector>

#include "gemmtune/problem.hpp"
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

struct TuneReport {
  std::string op = "gemm";   // GemmOp::name or SoftmaxOp::name: which problem below is set
  GemmProblem problem;       // op "gemm"
  SoftmaxProblem softmax;    // op "softmax"
  std::string key;           // tuning-cache key
  bool from_cache = false;   // answered from the cache, nothing timed now
  double seconds = 0;        // wall time of select()
  double spread = 0;         // (p80 - p20) / median of the winner
  std::vector<std::string> notes;  // backends not available / not supporting, with reasons; the race's duel
  std::vector<CandidateResult> results;  // sorted by rank_results (below)

  // The problem of `op`: its str(), its canonical() text (what the cache stores).
  std::string problem_str() const;
  std::string problem_canonical() const;
  // Bytes the op must move at least (bandwidth-bound ops report TB/s = bytes / time).
  double min_bytes() const;

  const CandidateResult* winner() const;
  const CandidateResult* default_pick() const;
};

// The one order of candidate results (engine reports, the tuning cache, the CLI; defined in
// src/core/report_json.cpp): the winner; then correct and timed (ok) by median; pruned by
// median; wrong; failed. Wrong before failed: a wrong candidate ran and was measured (its rel_err
// says how far off it was), a failed one never ran. A NaN median sorts as +inf; ties by backend,
// then id, so the same results sort the same wherever they come from.
void rank_results(std::vector<CandidateResult>& results);

}  // namespace gemmtune
