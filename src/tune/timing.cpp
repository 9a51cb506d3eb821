// Statistics and the interleaved race of candidates (host-only logic; see timing.hpp).
#include "tune/timing.hpp"

#include <algorithm>
#include <cmath>

#include "gemmtune/error.hpp"

namespace gemmtune {

Stats summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  // Percentile q at position q*(n-1) of the sorted samples, interpolated between neighbours.
  auto at = [&](double q) {
    double pos = q * double(samples.size() - 1);
    size_t lo = size_t(pos);
    size_t hi = std::min(lo + 1, samples.size() - 1);
    return samples[lo] + (pos - double(lo)) * (samples[hi] - samples[lo]);
  };
  s.median = at(0.5);
  s.p20 = at(0.2);
  s.p80 = at(0.8);
  s.min = samples.front();
  s.samples = int(samples.size());
  return s;
}

namespace {

class Race {
 public:
  Race(size_t n, const Sampler& sample) : sample_(sample), times_(n) {
    res.stats.resize(n);
    res.pruned.assign(n, false);
    res.failure.resize(n);
  }

  RaceResult res;

  // One interleaved round: every member of `group` (ascending indices) sampled once, starting
  // at position round mod size, so no candidate is always first (drift hits all alike). The
  // round counter is global, so the rotation continues across phases. Members that fail
  // leave `group`.
  void round(std::vector<size_t>& group) {
    const size_t k = group.size();
    const size_t start = size_t(rounds_++ % long(k));
    for (size_t j = 0; j < k; ++j) {
      size_t i = group[(start + j) % k];
      try {
        double t = sample_(i);
        // A NaN or negative time would poison the sort and the medians: treat it as a failure.
        if (!std::isfinite(t) || t < 0) GT_THROW("sampler returned an invalid time: " + std::to_string(t));
        times_[i].push_back(t);
      } catch (const Error& e) {
        res.failure[i] = e.message().empty() ? "sampling failed" : e.message();
      }
      res.stats[i] = summarize(times_[i]);
    }
    std::erase_if(group, [&](size_t i) { return !res.failure[i].empty(); });
  }

  // round() that also returns this round's sample of each member that did not fail (by index).
  std::vector<double> round_samples(std::vector<size_t>& group) {
    std::vector<double> out(times_.size(), 0);
    std::vector<size_t> before(times_.size());
    for (size_t i : group) before[i] = times_[i].size();
    round(group);
    for (size_t i : group)
      if (times_[i].size() > before[i]) out[i] = times_[i].back();
    return out;
  }

  // Members of `group` ordered by (median, index): the leader first, exact ties to the lower index.
  std::vector<size_t> ranked(std::vector<size_t> group) const {
    std::stable_sort(group.begin(), group.end(),
                     [&](size_t a, size_t b) { return res.stats[a].median < res.stats[b].median; });
    return group;
  }

  // Whether the leader's lead over the runner-up is within their combined p20..p80 spread.
  bool unclear(const std::vector<size_t>& group) const {
    if (group.size() < 2) return false;
    auto r = ranked(group);
    const Stats &a = res.stats[r[0]], &b = res.stats[r[1]];
    return b.median - a.median < (a.p80 - a.p20) + (b.p80 - b.p20);
  }

  void prune(std::vector<size_t>& group, double ratio) {
    if (group.empty()) return;
    double best = res.stats[ranked(group)[0]].median;
    for (size_t i : group)
      if (res.stats[i].median > ratio * best) res.pruned[i] = true;
    std::erase_if(group, [&](size_t i) { return res.pruned[i]; });
  }

 private:
  const Sampler& sample_;
  std::vector<std::vector<double>> times_;  // every sample of every candidate, in µs
  long rounds_ = 0;
};

}  // namespace

RaceResult race(size_t n, const Sampler& sample, const TuneOptions& opt) {
  GT_CHECK(opt.min_rounds >= 1, "tune.min_rounds: must be >= 1");
  GT_CHECK(opt.max_rounds >= opt.min_rounds, "tune.max_rounds: must be >= tune.min_rounds");
  GT_CHECK(opt.prune_ratio >= 1, "tune.prune_ratio: must be >= 1");
  GT_CHECK(opt.tie_tolerance >= 0, "tune.tie_tolerance: must be >= 0");
  GT_CHECK(opt.tie_rounds >= 0, "tune.tie_rounds: must be >= 0");
  GT_CHECK(opt.prefer_margin >= 0, "tune.prefer_margin: must be >= 0");
  GT_CHECK(opt.duel_rounds >= 0, "tune.duel_rounds: must be >= 0");
  GT_CHECK(opt.duel_window >= 0, "tune.duel_window: must be >= 0");
  GT_CHECK(opt.duels >= 0, "tune.duels: must be >= 0");

  Race r(n, sample);
  std::vector<size_t> alive(n);  // neither failed nor pruned, ascending indices
  for (size_t i = 0; i < n; ++i) alive[i] = i;

  // min_rounds rounds for everyone; then prune after each round, and go on while the leader
  // is unclear, up to max_rounds. Every survivor gets the same rounds, so medians compare
  // samples taken at the same times.
  for (int k = 0; k < opt.max_rounds && !alive.empty(); ++k) {
    if (k >= opt.min_rounds && !r.unclear(alive)) break;
    r.round(alive);
    if (k + 1 >= opt.min_rounds) r.prune(alive, opt.prune_ratio);
  }
  if (alive.empty()) return r.res;  // every candidate failed (or there were none)

  // Near-ties of the leader are re-timed head to head; the winner comes from that group only:
  // the others were already beaten by more than tie_tolerance, and their older samples would
  // not be comparable with the new ones under drift.
  // A near-tie is within tie_tolerance of the leader, or not beaten by more than the two
  // candidates' p20..p80 spreads together (short kernels are noisier than tie_tolerance: a
  // 3%-apart pair measured with 2% spreads each is not settled by its first rounds).
  const Stats& lead = r.res.stats[r.ranked(alive)[0]];
  const double best = lead.median;
  std::vector<size_t> contenders;
  for (size_t i : alive) {
    const Stats& s = r.res.stats[i];
    const bool within_tolerance = s.median <= best * (1 + opt.tie_tolerance);
    const bool within_noise = s.median - best < (lead.p80 - lead.p20) + (s.p80 - s.p20);
    if (within_tolerance || within_noise) contenders.push_back(i);
  }
  for (int k = 0; k < opt.tie_rounds && contenders.size() >= 2; ++k) r.round(contenders);
  if (contenders.empty()) {  // every near-tie failed while re-timed: fall back to the rest
    std::erase_if(alive, [&](size_t i) { return !r.res.failure[i].empty(); });
    contenders = alive;
  }
  if (contenders.empty()) return r.res;

  // The caller's order is a preference: backends list the library's own pick first and then
  // their heuristic's order, so a tune leaves it only on evidence, and ties resolve the same way
  // from one tune to the next. Without a duel: the earliest contender within prefer_margin of
  // the fastest median wins.
  std::erase_if(alive, [&](size_t i) { return !r.res.failure[i].empty(); });
  const double fastest = r.res.stats[r.ranked(contenders)[0]].median;
  size_t w = n;
  for (size_t i : contenders)
    if (r.res.stats[i].median <= fastest * (1 + opt.prefer_margin)) w = std::min(w, i);

  // Duels: the preference is decided on focused measurements, not on marginal medians (the
  // earliest candidate within prefer_margin of the fastest median flipped between two tunes
  // when a pair sat at the margin). The preferred one (the champion) is the earliest survivor
  // within duel_window of the fastest. It meets the fastest other survivors in turn (at most
  // opt.duels of them, each within duel_window, tie_tolerance or the two spreads of the
  // champion): the two alone get duel_rounds more rounds, the verdict is the median of the
  // per-round ratios of their paired samples (which cancels the drift both see within one
  // round), and the challenger becomes champion only if faster by more than prefer_margin.
  // The window reaches past the near-ties (a pair 2.4% apart on 5 rounds measured 6.3% apart
  // the other way round minutes later), and several duels settle three-way near-ties (one
  // tune's duel picked a kernel 2.9% slower than the one the other tune's duel picked, which
  // the first never met; bench/results/2026-11-30-h200-cublaslt-*.md, stability).
  if (opt.duel_rounds > 0) {
    const double reach = fastest * std::max(opt.duel_window, opt.tie_tolerance);
    for (size_t i : alive)
      if (r.res.stats[i].median - fastest <= reach) w = std::min(w, i);
    std::vector<size_t> met = {w};
    for (int d = 0; d < opt.duels && w != n; ++d) {
      size_t c = n;  // the fastest survivor the champion has not met
      for (size_t i : r.ranked(alive))
        if (r.res.failure[i].empty() && std::find(met.begin(), met.end(), i) == met.end()) {
          c = i;
          break;
        }
      if (c == n) break;
      const Stats &sw = r.res.stats[w], &sc = r.res.stats[c];
      const bool near = std::abs(sc.median - sw.median) <=
                        std::max({opt.duel_window * sw.median, opt.tie_tolerance * sw.median,
                                  (sw.p80 - sw.p20) + (sc.p80 - sc.p20)});
      if (!near) break;  // the others are slower still
      met.push_back(c);
      std::vector<double> ratio;  // t_champion / t_challenger, one per round both finished
      for (int k = 0; k < opt.duel_rounds; ++k) {
        std::vector<size_t> pair = {std::min(w, c), std::max(w, c)};
        auto sample = r.round_samples(pair);
        if (!r.res.failure[w].empty() || !r.res.failure[c].empty()) break;
        if (sample[c] > 0) ratio.push_back(sample[w] / sample[c]);
      }
      Duel duel{long(w), long(c), ratio.empty() ? 0 : summarize(ratio).median, false};
      if (!r.res.failure[w].empty()) duel.challenger_won = r.res.failure[c].empty();
      else if (r.res.failure[c].empty() && !ratio.empty() && duel.ratio > 1 + opt.prefer_margin)
        duel.challenger_won = true;
      r.res.duels.push_back(duel);
      if (duel.challenger_won) w = c;
      else if (!r.res.failure[w].empty()) w = n;  // both failed
    }
  }
  if (w == n) return r.res;  // both duellists failed
  const Stats& s = r.res.stats[w];
  r.res.winner = long(w);
  r.res.spread = s.median > 0 ? (s.p80 - s.p20) / s.median : 0;
  return r.res;
}

}  // namespace gemmtune
