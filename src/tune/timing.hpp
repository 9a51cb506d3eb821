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
#include <utility>
#include <vector>

#include "gemmtune/device.hpp"
#include "gemmtune/engine_options.hpp"

namespace gemmtune {

struct Stats {
  double median = 0, p20 = 0, p80 = 0, min = 0;
  int samples = 0;
};
// Percentiles by linear interpolation; empty input -> all zero.
Stats summarize(std::vector<double> samples);

// One sample of candidate i's time in microseconds (may throw Error: the candidate fails).
using Sampler = std::function<double(size_t i)>;

// One duel of step 5: the champion against a challenger; ratio = the median of their paired
// per-round time ratios (champion / challenger; > 1: the challenger was faster).
struct Duel {
  long champion = -1, challenger = -1;
  double ratio = 0;
  bool challenger_won = false;
};

struct RaceResult {
  std::vector<Stats> stats;            // per candidate
  std::vector<bool> pruned;            // dropped early as clearly slower
  std::vector<std::string> failure;    // non-empty: sampling failed, the message
  long winner = -1;                    // -1 when every candidate failed
  double spread = 0;                   // winner's (p80 - p20) / median
  std::vector<Duel> duels;             // step 5's duels, in order
};

// Races n candidates (samples in µs). Deterministic for a deterministic sampler.
//  1. Rounds: each samples every survivor once (ascending indices), starting at position
//     r mod survivors for the r-th round of the race (the count runs on across phases).
//     A sampler that throws Error, or returns a negative or non-finite time, fails that
//     candidate (failure[i] = the message; its stats keep what it had); other exceptions
//     propagate.
//  2. min_rounds rounds; after each round from then on, survivors whose median exceeds
//     prune_ratio x the best median are pruned (they keep their stats). More rounds, up to
//     max_rounds in all, while the leader's lead over the runner-up is smaller than
//     (p80 - p20) of the leader plus that of the runner-up.
//  3. Near-ties of the leader are re-timed together (only they) for tie_rounds more rounds,
//     their samples appended: survivors with median <= (1 + tie_tolerance) x the best, or
//     whose median exceeds the best by less than the leader's (p80 - p20) plus their own.
//  4. Without a duel (duel_rounds = 0): the winner is the earliest near-tie (lowest index)
//     within prefer_margin of the fastest median: the caller's order is a preference (the
//     library's default pick first), so a tune leaves it only on evidence and ties resolve the
//     same way every time. If every near-tie failed while re-timed, among the other survivors.
//  5. With duels (duel_rounds > 0): the champion is the earliest survivor within duel_window
//     (or tie_tolerance) of the fastest near-tie's median. It meets the fastest survivors it
//     has not met, in order, at most `duels` of them, while the next one is within
//     duel_window, tie_tolerance or the two spreads of the champion: the two alone get
//     duel_rounds more rounds and the challenger becomes champion only if the median of the
//     per-round ratios champion/challenger exceeds 1 + prefer_margin. The last champion wins.
//     A duellist that fails loses (both failing: winner = -1).
//  winner = -1 when every candidate failed. spread = the winner's (p80 - p20) / median.
// Throws Error for invalid options (min_rounds < 1, max_rounds < min_rounds, prune_ratio < 1,
// tie_tolerance < 0, tie_rounds < 0, prefer_margin < 0, duel_rounds < 0, duel_window < 0,
// duels < 0).
RaceResult race(size_t n, const Sampler& sample, const TuneOptions& opt);

}  // namespace gemmtune
