// The one benchmarking module: statistics, and a race of candidates in interleaved rounds.
//
// Under sustained load the H200's clocks drift (a kernel re-timed minutes later ran up to 22%
// slower), so candidates are never timed one after the other: every round samples every
// surviving candidate once, in an order rotated each round. The sampler is injectable, so the
// selection logic is tested on a CPU with a fake clock.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"

namespace gemmtune {

struct Stats {
  double median = 0, p20 = 0, p80 = 0, min = 0;
  int samples = 0;
};
// Percentiles by linear interpolation; empty input -> all zero.
Stats summarize(std::vector<double> samples);

// One sample of candidate i's time in microseconds (may throw Error: the candidate fails).
using Sampler = std::function<double(size_t i)>;

struct RaceResult {
  std::vector<Stats> stats;            // per candidate
  std::vector<bool> pruned;            // dropped early as clearly slower
  std::vector<std::string> failure;    // non-empty: sampling threw, with the message
  long winner = -1;                    // -1 when every candidate failed
  double spread = 0;                   // winner's (p80 - p20) / median
};

// Races n candidates: min_rounds interleaved rounds; then those over prune_ratio x the best
// median are pruned; up to max_rounds while the leader is unclear; candidates within
// tie_tolerance of the best are re-timed head to head for tie_rounds more rounds; the
// winner is the lowest median, ties broken by the lower index (a stable order).
RaceResult race(size_t n, const Sampler& sample, const TuneOptions& opt);

}  // namespace gemmtune
